"""Nodes (core/v1, cluster-scoped): stored as kubelets (or tests) write them, validated as upstream's
ValidateNode / ValidateNodeUpdate, with kubectl's columns."""
from __future__ import annotations

import json
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import node_connections, resources, scheduling
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.jsonvalues import as_dict, as_list
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.Node"
INFO = "io.k8s.api.core.v1.NodeSystemInfo"
ROLE_PREFIX = "node-role.kubernetes.io/"
ROLE_LABEL = "kubernetes.io/role"


TAINTS_ANNOTATION = "scheduler.alpha.kubernetes.io/taints"
_PODCIDR_FORBIDDEN = "node updates may not change podCIDR except from \"\" to valid"


class NodeStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        """upstream's PrepareForCreate: a Node is created with its status (a kubelet registers
        with its addresses and capacity), less what disabled features own (dropDisabledFields:
        the dynamic kubelet config source, SupplementalGroupsPolicy's status.features)."""
        spec, status = obj.get("spec"), obj.get("status")
        if isinstance(spec, dict):
            spec.pop("configSource", None)
        if isinstance(status, dict):
            status.pop("config", None)
            status.pop("features", None)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        """upstream's dropDisabledFields on update: the dynamic kubelet config source is dropped
        unless the node already has one."""
        super().prepare_for_update(rtype, new, old)
        if not as_dict(old.get("spec")).get("configSource"):
            spec = new.get("spec")
            if isinstance(spec, dict):
                spec.pop("configSource", None)

    def prepare_for_status_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        """upstream's nodeStatusStrategy: status.config is dropped unless the node already has one."""
        super().prepare_for_status_update(rtype, new, old)
        if not as_dict(old.get("status")).get("config"):
            status = new.get("status")
            if isinstance(status, dict):
                status.pop("config", None)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):  # v1 carries podCIDR and podCIDRs in step (upstream's conversion)
            if spec.get("podCIDR") and not spec.get("podCIDRs"):
                spec["podCIDRs"] = [spec["podCIDR"]]
            elif isinstance(spec.get("podCIDRs"), list) and spec["podCIDRs"] and not spec.get("podCIDR"):
                spec["podCIDR"] = spec["podCIDRs"][0]
        status = obj.get("status")
        if isinstance(status, dict):
            resources.canonicalize_resource_list(status.get("capacity"))
            resources.canonicalize_resource_list(status.get("allocatable"))

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateNode (taints are reported under metadata, as upstream does)."""
        causes = field_checks.kube_object_meta(obj) + _annotation_checks(obj)
        spec = as_dict(obj.get("spec"))
        if spec.get("taints"):
            causes += scheduling.validate_taints(spec["taints"], "metadata.taints")
        causes += _node_resources(obj)
        cidrs = as_list(spec.get("podCIDRs"))
        for i, cidr in enumerate(cidrs):
            causes += validation.is_valid_cidr(f"spec.podCIDRs[{i}]", cidr)
        if len(cidrs) > 1:
            families = {n.version for n in (validation.parse_cidr_sloppy(c) for c in cidrs) if n is not None}
            if len(families) < 2 or len(cidrs) > 2:
                causes.append(errors.field_invalid("spec.podCIDRs", gorepr.string_slice(cidrs),
                                                   "may specify no more than one CIDR for each IP family"))
            seen: set = set()
            for i, cidr in enumerate(cidrs):
                if cidr in seen:
                    causes.append(errors.field_duplicate(f"spec.podCIDRs[{i}]", cidr))
                seen.add(cidr)
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateNodeUpdate on top of ValidateNode."""
        causes = self.validate(rtype, new) + _node_update(new, old)
        spec = as_dict(new.get("spec"))
        if spec.get("taints"):
            causes += scheduling.validate_taints(spec["taints"], "metadata.taints")
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = _annotation_checks(new) + _node_resources(new) + _node_update(new, old)
        spec = as_dict(new.get("spec"))
        if spec.get("taints"):
            causes += scheduling.validate_taints(spec["taints"], "metadata.taints")
        return causes


def _annotation_checks(node: dict) -> list[errors.Cause]:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(TAINTS_ANNOTATION)
    if not value:
        return []
    try:
        taints = json.loads(value)
        if not isinstance(taints, list):
            raise ValueError("json: cannot unmarshal into Go value of type []v1.Taint")
    except ValueError as e:
        return [errors.field_invalid("metadata.annotations", TAINTS_ANNOTATION, str(e))]
    return scheduling.validate_taints(taints, f"metadata.annotations.{TAINTS_ANNOTATION}")


def _node_resources(node: dict) -> list[errors.Cause]:
    """upstream's ValidateNodeResources (paths as upstream builds them: status.capacity.<name>)."""
    status = as_dict(node.get("status"))
    causes: list[errors.Cause] = []
    for kind in ("capacity", "allocatable"):
        for name, _, q, problems in resources.quantities(status.get(kind), f"status.{kind}"):
            causes += problems
            if q is not None:
                causes += resources.validate_resource_quantity_value(name, q, f"status.{kind}.{name}")
    return causes


def _node_update(new: dict, old: dict) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    addresses = (new.get("status") or {}).get("addresses") or []
    seen: list = []
    for i, address in enumerate(addresses):
        address = address if isinstance(address, dict) else {}
        key = (address.get("type"), address.get("address"))
        if key in seen:
            causes.append(errors.field_duplicate(f"status.addresses[{i}]", gorepr.struct(
                "core.NodeAddress", (("Type", gorepr.quote(key[0])), ("Address", gorepr.quote(key[1]))))))
        seen.append(key)
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    old_cidrs, cidrs = old_spec.get("podCIDRs") or [], spec.get("podCIDRs") or []
    if old_cidrs:
        if len(old_cidrs) != len(cidrs):
            causes.append(errors.field_forbidden("spec.podCIDRs", _PODCIDR_FORBIDDEN))
        else:
            causes.extend(errors.field_forbidden("spec.podCIDRs", _PODCIDR_FORBIDDEN)
                          for value, new_value in zip(old_cidrs, cidrs) if value != new_value)
    if old_spec.get("providerID") and old_spec.get("providerID") != spec.get("providerID"):
        causes.append(errors.field_forbidden("spec.providerID",
                                             "node updates may not change providerID except from \"\" to valid"))
    source = spec.get("configSource")
    if source is not None:
        causes += _config_source(source, "spec.configSource")
    if (spec.get("externalID") or "") != (old_spec.get("externalID") or ""):
        causes.append(errors.field_forbidden("spec.externalID", "may not be updated"))
    return causes


def _config_source(source: Any, path: str) -> list[errors.Cause]:
    source = source if isinstance(source, dict) else {}
    causes: list[errors.Cause] = []
    config_map = source.get("configMap")
    if isinstance(config_map, dict):
        at = f"{path}.configMap"
        if config_map.get("uid"):
            causes.append(errors.field_forbidden(f"{at}.uid", "uid must not be set in spec"))
        if config_map.get("resourceVersion"):
            causes.append(errors.field_forbidden(f"{at}.resourceVersion", "resourceVersion must not be set in spec"))
        for key, check in (("namespace", validation.is_dns1123_label), ("name", validation.is_dns1123_subdomain),
                           ("kubeletConfigKey", validation.is_config_map_key)):
            value = config_map.get(key) or ""
            if not value:
                causes.append(errors.field_required(f"{at}.{key}", f"{key} must be set"))
            else:
                causes.extend(errors.field_invalid(f"{at}.{key}", value, m) for m in check(value))
    else:
        causes.append(errors.field_invalid(path, errors.OMIT, "exactly one reference subfield must be non-nil"))
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
            "spec.unschedulable": lambda o: "true" if columns.get_path(o, "spec", "unschedulable") is True else "false",
        },
        # pkg/apis/core/v1/conversion.go: no metadata.namespace
        field_labels=FieldLabelConversion(("metadata.name", "spec.unschedulable")),
    )
