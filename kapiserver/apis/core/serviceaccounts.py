"""ServiceAccounts (core/v1): only names of referenced secrets are kept; the ``token``
subresource issues TokenRequests (apis/core/serviceaccount_token.py) when the server has a
service-account signing key."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import serviceaccount_token
from kapiserver.apis.deps import RegistryDeps
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType, Strategy

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

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateServiceAccount: metadata only."""
        return field_checks.kube_object_meta(obj)


def _bind_token_subresource(rtype: ResourceType, deps: RegistryDeps) -> None:
    """``serviceaccounts/token``, only with a signing key (upstream installs it only then)."""
    tokens = deps.authentication.service_accounts if deps.authentication is not None else None
    if tokens is not None:
        rtype.extra_subresources = (*rtype.extra_subresources,
                                    serviceaccount_token.subresource(tokens))


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ServiceAccount", plural="serviceaccounts", singular="serviceaccount",
        namespaced=True, strategy=ServiceAccountStrategy(), short_names=("sa",), schema_name=SCHEMA,
        return_deleted_object=True, bind_deps=_bind_token_subresource,
        table_columns=(
            columns.name_column(),
            columns.column("Secrets", lambda o: len(o.get("secrets") or []), SCHEMA, "secrets"),
            columns.age_column(),
        ),
    )
