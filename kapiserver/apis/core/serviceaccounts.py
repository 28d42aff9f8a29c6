"""ServiceAccounts (core/v1): only names of referenced secrets are kept."""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.ServiceAccount"


def _clean_secret_references(obj: dict) -> None:
    """Upstream keeps only ``name`` of each ``secrets`` reference."""
    refs = obj.get("secrets")
    if isinstance(refs, list):
        obj["secrets"] = [{"name": r.get("name", "")} if isinstance(r, dict) else r for r in refs]


class ServiceAccountStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        _clean_secret_references(obj)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        _clean_secret_references(new)


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ServiceAccount", plural="serviceaccounts", singular="serviceaccount",
        namespaced=True, strategy=ServiceAccountStrategy(), short_names=("sa",), schema_name=SCHEMA,
        return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.column("Secrets", lambda o: len(o.get("secrets") or []), SCHEMA, "secrets"),
            columns.age_column(),
        ),
    )
