"""CSINodes (storage.k8s.io/v1, cluster-scoped, named after their Node): the CSI
drivers a kubelet registered, each with its node ID and topology keys; a
driver's entry may not change once there (drivers come and go whole)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_str
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.storage.v1.CSINode"
NODE_ID_MAX = 256  # upstream allows the longer node IDs on the apiserver side


def _validate_driver(driver: dict, path: str, seen: set) -> list[errors.Cause]:
    from kapiserver.apis.core.volumes import validate_csi_driver_name  # the volume validation loads with the first use
    name = as_str(driver.get("name"))
    causes = validate_csi_driver_name(name, f"{path}.name")
    node_id = as_str(driver.get("nodeID"))
    if not node_id:
        causes.append(errors.field_required(f"{path}.nodeID"))
    if len(node_id) > NODE_ID_MAX:
        causes.append(errors.field_invalid(f"{path}.nodeID", node_id, f"must be {NODE_ID_MAX} characters or less"))
    count = columns.get_path(driver, "allocatable", "count")
    if isinstance(count, int) and count < 0:
        causes.append(errors.field_invalid(f"{path}.allocatable.count", count, validation.IS_NEGATIVE))
    if name in seen:
        causes.append(errors.field_duplicate(f"{path}.name", name))
    seen.add(name)
    keys: set = set()
    for key in driver.get("topologyKeys") or []:
        if not key:
            causes.append(errors.field_required(path))
        if key in keys:
            causes.append(errors.field_duplicate(path, key))
        keys.add(key)
        causes += [errors.field_invalid(path, key, p) for p in validation.is_qualified_name(key or "")]
    return causes


def _go_driver(driver: dict) -> gorepr.GoRepr:
    """A storage.CSINodeDriver as %#v prints it."""
    count = columns.get_path(driver, "allocatable", "count")
    allocatable = driver.get("allocatable")
    return gorepr.struct("storage.CSINodeDriver", (
        ("Name", gorepr.quote(driver.get("name") or "")), ("NodeID", gorepr.quote(driver.get("nodeID") or "")),
        ("TopologyKeys", gorepr.string_slice(driver.get("topologyKeys"))),
        ("Allocatable", gorepr.pointer(allocatable, "storage.VolumeNodeResources")
         if allocatable is None or count is None else "(*storage.VolumeNodeResources)(0xc000000000)")))


class CSINodeStrategy(Strategy):
    allow_unconditional_update = False  # upstream's AllowUnconditionalUpdate: a PUT names the version it replaces

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateCSINode (long node IDs allowed, as its strategy does)."""
        causes: list[errors.Cause] = field_checks.kube_object_meta(obj)
        seen: set = set()
        for i, driver in enumerate(columns.get_path(obj, "spec", "drivers", default=[])):
            if isinstance(driver, dict):
                causes += _validate_driver(driver, f"spec.drivers[{i}]", seen)
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        old_drivers = {d.get("name"): d for d in columns.get_path(old, "spec", "drivers", default=[])
                       if isinstance(d, dict)}
        for driver in columns.get_path(new, "spec", "drivers", default=[]):
            if isinstance(driver, dict) and driver.get("name") in old_drivers and driver != old_drivers[driver["name"]]:
                causes.append(errors.field_invalid("CSINodeDriver", _go_driver(driver), validation.FIELD_IMMUTABLE))
        return causes


def resource_type() -> ResourceType:
    return ResourceType(
        group="storage.k8s.io", version="v1", kind="CSINode", plural="csinodes", singular="csinode",
        namespaced=False, strategy=CSINodeStrategy(), schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.column("Drivers", lambda o: len(columns.get_path(o, "spec", "drivers", default=[])),
                           type="integer", desc="Drivers indicates the number of CSI drivers registered on the node"),
            columns.age_column(),
        ),
    )
