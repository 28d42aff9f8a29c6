"""CSIStorageCapacities (storage.k8s.io/v1, namespaced): the capacity a CSI driver
reports for a storage class in a node topology segment; the topology and the
class are fixed after create."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_str
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.storage.v1.CSIStorageCapacity"


def validate_capacity(obj: dict, allow_invalid_label_values: bool = False) -> list[errors.Cause]:
    """upstream's ValidateCSIStorageCapacity."""
    causes = field_checks.kube_object_meta(obj)
    causes += validation.validate_label_selector(obj.get("nodeTopology"), "nodeTopology", allow_invalid_label_values)
    name = as_str(obj.get("storageClassName"))
    causes += [errors.field_invalid("storageClassName", name, m) for m in validation.name_is_dns_subdomain(name)]
    if obj.get("capacity") is not None:
        q, problems = resources.quantity_or_cause(obj["capacity"], "capacity")
        causes += problems
        if q is not None:
            causes += resources.validate_nonnegative_quantity(q, "capacity")
    return causes


class CSIStorageCapacityStrategy(Strategy):
    allow_unconditional_update = False  # upstream's AllowUnconditionalUpdate: a PUT names the version it replaces

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_capacity(obj)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateCSIStorageCapacityUpdate: what the driver was asked about is fixed."""
        causes = validate_capacity(new, validation.label_selector_has_invalid_value(old.get("nodeTopology")))
        if new.get("nodeTopology") != old.get("nodeTopology"):
            causes.append(errors.field_invalid("nodeTopology", gorepr.label_selector(new.get("nodeTopology"))
                                               if new.get("nodeTopology") is not None else None,
                                               validation.FIELD_IMMUTABLE))
        if (new.get("storageClassName") or "") != (old.get("storageClassName") or ""):
            causes.append(errors.field_invalid("storageClassName", new.get("storageClassName") or "",
                                               validation.FIELD_IMMUTABLE))
        return causes


def resource_type() -> ResourceType:
    return ResourceType(
        group="storage.k8s.io", version="v1", kind="CSIStorageCapacity", plural="csistoragecapacities",
        singular="csistoragecapacity", namespaced=True, strategy=CSIStorageCapacityStrategy(), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("StorageClassName", lambda o: o.get("storageClassName", ""), SCHEMA, "storageClassName"),
            columns.column("Capacity", lambda o: o.get("capacity") or "<unset>", SCHEMA, "capacity"),
        ),
    )
