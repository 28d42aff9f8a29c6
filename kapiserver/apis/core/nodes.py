"""Nodes (core/v1, cluster-scoped): stored as kubelets (or tests) write them, with kubectl's columns."""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.apis.core import node_connections
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.Node"
INFO = "io.k8s.api.core.v1.NodeSystemInfo"
ROLE_PREFIX = "node-role.kubernetes.io/"
ROLE_LABEL = "kubernetes.io/role"


class NodeStrategy(Strategy):
    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = []
        old_cidr = (old.get("spec") or {}).get("podCIDR")
        if old_cidr and (new.get("spec") or {}).get("podCIDR") != old_cidr:
            causes.append(errors.field_forbidden("spec.podCIDRs", "node updates may not change podCIDR except "
                                                 "from \"\" to valid"))
        return causes


def _status(node: dict) -> str:
    conditions = {c.get("type"): c.get("status") for c in columns.get_path(node, "status", "conditions", default=())}
    ready = conditions.get("Ready")
    parts = ["Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"]
    if columns.get_path(node, "spec", "unschedulable"):
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def _roles(node: dict) -> str:
    roles = set()
    for key, value in ((node.get("metadata") or {}).get("labels") or {}).items():
        if key.startswith(ROLE_PREFIX) and key[len(ROLE_PREFIX):]:
            roles.add(key[len(ROLE_PREFIX):])
        elif key == ROLE_LABEL and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _address(node: dict, kind: str) -> str:
    for a in columns.get_path(node, "status", "addresses", default=()):
        if a.get("type") == kind:
            return a.get("address", "")
    return "<none>"


def resource_type() -> ResourceType:
    def info(key: str):
        return lambda o: columns.get_path(o, "status", "nodeInfo", key, default="")
    return ResourceType(
        group="", version="v1", kind="Node", plural="nodes", singular="node", namespaced=False,
        strategy=NodeStrategy(), short_names=("no",), has_status=True, schema_name=SCHEMA,
        extra_subresources=(node_connections.node_proxy(),),
        table_columns=(
            columns.name_column(),
            columns.column("Status", _status, desc="The status of the node"),
            columns.column("Roles", _roles, desc="The roles of the node"),
            columns.age_column(),
            columns.column("Version", info("kubeletVersion"), INFO, "kubeletVersion"),
            columns.column("Internal-IP", lambda o: _address(o, "InternalIP"), desc="List of internal IPs.",
                           priority=1),
            columns.column("External-IP", lambda o: _address(o, "ExternalIP"), desc="List of external IPs.",
                           priority=1),
            columns.column("OS-Image", info("osImage"), INFO, "osImage", priority=1),
            columns.column("Kernel-Version", info("kernelVersion"), INFO, "kernelVersion", priority=1),
            columns.column("Container-Runtime", info("containerRuntimeVersion"), INFO, "containerRuntimeVersion",
                           priority=1),
        ),
        selectable_fields={
            "spec.unschedulable": lambda o: "true" if columns.get_path(o, "spec", "unschedulable") else "false",
        },
    )
