"""ServiceAccounts (core/v1): only names of referenced secrets are kept; the ``token``
subresource issues TokenRequests (apis/core/serviceaccount_token.py) when the server has a
service-account signing key."""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.apis import columns
from kapiserver.apis.core import serviceaccount_token
from kapiserver.machinery import errors
from kapiserver.registry.deps import RegistryDeps
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Context, Store
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


class ServiceAccountStore(Store):
    def __init__(self, rtype: ResourceType, deps: RegistryDeps,
                 token_requests: Optional[serviceaccount_token.TokenRequests]) -> None:
        super().__init__(rtype, deps.storage, deps.admission, deps.leases)
        self.token_requests = token_requests

    async def create_subresource(self, subresource: str, namespace: str, name: str, obj: Any,
                                 ctx: Optional[Context] = None) -> dict:
        if subresource != "token" or self.token_requests is None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        return await self.token_requests.create(namespace, name, obj, ctx or Context())


def _make_store(rtype: ResourceType, deps: RegistryDeps) -> Store:
    tokens = deps.authentication.service_accounts if deps.authentication is not None else None
    if tokens is None:  # no signing key: no token subresource, as upstream without one
        rtype.create_subresources = ()
        return ServiceAccountStore(rtype, deps, None)
    return ServiceAccountStore(rtype, deps, serviceaccount_token.TokenRequests(tokens, deps.store))


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ServiceAccount", plural="serviceaccounts", singular="serviceaccount",
        namespaced=True, strategy=ServiceAccountStrategy(), short_names=("sa",), schema_name=SCHEMA,
        create_subresources=(serviceaccount_token.SUBRESOURCE,), make_store=_make_store,
        table_columns=(
            columns.name_column(),
            columns.column("Secrets", lambda o: len(o.get("secrets") or []), SCHEMA, "secrets"),
            columns.age_column(),
        ),
    )
