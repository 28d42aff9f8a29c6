"""ComponentStatuses (core/v1, cluster-scoped, get and list; deprecated upstream
since 1.19): the health of the server's storage in upstream's shape.

kube-apiserver probes the scheduler, the controller manager and each etcd
server; kapiserver has neither a scheduler nor a controller manager, so it
lists its storage only: ``etcd-0`` (the etcd3 backend) or ``sqlite-0`` (the
embedded one), from the same check as ``/readyz/etcd`` / ``/readyz/sqlite``.
Each has one ``Healthy`` condition: True with message ``ok``, or False with
the failure in ``error``.  Nothing is stored.
"""
from __future__ import annotations

import builtins

from typing import Any, Optional

from kapiserver.apis import columns
from kapiserver.apis.deps import RegistryDeps
from kapiserver.machinery import errors
from kapiserver.machinery.fields import FieldSelector
from kapiserver.registry.options import ListOptions
from kapiserver.registry.resource_type import ResourceType, Strategy

STORAGE_CHECKS = ("etcd", "sqlite")


def _healthy_condition(obj: dict) -> Optional[dict]:
    for condition in obj.get("conditions") or ():
        if condition.get("type") == "Healthy":
            return condition
    return None


def _status_cell(obj: dict) -> str:
    condition = _healthy_condition(obj)
    if condition is None:
        return "Unknown"
    return "Healthy" if condition.get("status") == "True" else "Unhealthy"


class ComponentStatusStore:
    """Answers get and list by running the storage health check (a :class:`Getter` and
    :class:`Lister`, nothing stored)."""

    def __init__(self, rtype: ResourceType, server: RegistryDeps) -> None:
        self.rtype = rtype
        self.server = server

    def _components(self) -> dict[str, str]:
        """component name -> health check name"""
        checks = self.server.health
        names = checks.names("readyz") if checks is not None else []
        return {f"{check}-0": check for check in STORAGE_CHECKS if check in names}

    async def _status(self, name: str, check: str) -> dict:
        """One component, without its type meta (as a list item)."""
        checks = self.server.health
        assert checks is not None  # (a check is only named when there are checks)
        err = await checks.run_one("readyz", check)
        condition: dict[str, Any] = {"type": "Healthy", "status": "True" if err is None else "False"}
        if err is None:
            condition["message"] = "ok"
        else:
            condition["error"] = str(err) or type(err).__name__
        return {"metadata": {"name": name, "creationTimestamp": None}, "conditions": [condition]}

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict:
        check = self._components().get(name)
        if check is None:  # upstream answers a 500 without a reason; an unknown name is a 404 here
            raise errors.not_found("componentstatuses", "", name)
        return {"kind": "ComponentStatus", "apiVersion": "v1", **await self._status(name, check)}

    async def get_stored(self, namespace: str, name: str, resource_version: str = "") -> dict:
        return await self.get(namespace, name, resource_version)

    def field_selector(self, opts: ListOptions) -> FieldSelector:
        return self.rtype.field_selector(opts)

    async def list(self, namespace: str, opts: ListOptions, warnings: Optional[list[str]] = None) -> dict:
        matches = self.rtype.matcher(opts)
        items = [await self._status(name, check) for name, check in self._components().items()]
        return {"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {},
                "items": [o for o in items if matches is None or matches(o)]}

    async def list_stored(self, namespace: str, opts: ListOptions,
                          warnings: "Optional[builtins.list[str]]" = None) -> dict:
        return await self.list(namespace, opts, warnings)


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="ComponentStatus", plural="componentstatuses", singular="componentstatus",
        namespaced=False, strategy=Strategy(), short_names=("cs",), verbs=("get", "list"),
        schema_name="io.k8s.api.core.v1.ComponentStatus",
        make_store=lambda rtype, server: ComponentStatusStore(rtype, server),
        deprecated=True, deprecation_warning="v1 ComponentStatus is deprecated in v1.19+",
        table_columns=(
            columns.name_column(),
            columns.column("Status", _status_cell, desc="Status of the component conditions"),
            columns.column("Message", lambda o: (_healthy_condition(o) or {}).get("message", ""),
                           desc="Message of the component conditions"),
            columns.column("Error", lambda o: (_healthy_condition(o) or {}).get("error", ""),
                           desc="Error of the component conditions"),
        ),
    )
