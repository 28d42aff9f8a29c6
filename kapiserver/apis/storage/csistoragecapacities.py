"""CSIStorageCapacities (storage.k8s.io/v1, namespaced): the capacity a CSI driver
reports for a storage class in a node topology segment; the topology and the
class are fixed after create."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.storage.v1.CSIStorageCapacity"


class CSIStorageCapacityStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        causes = field_checks.label_selector(obj.get("nodeTopology"), "nodeTopology")
        name = obj.get("storageClassName") if isinstance(obj.get("storageClassName"), str) else ""
        causes += [errors.field_invalid("storageClassName", name, p) for p in validation.name_is_dns_subdomain(name)]
        for key in ("capacity", "maximumVolumeSize"):
            if obj.get(key) is not None:
                causes += [errors.Cause(c.type, c.message, key)
                           for c in podspec.validate_resource_list({key: obj[key]}, key)]
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        if new.get("nodeTopology") != old.get("nodeTopology"):
            causes.append(errors.field_invalid("nodeTopology", new.get("nodeTopology"), validation.FIELD_IMMUTABLE))
        causes += field_checks.immutable(new.get("storageClassName"), old.get("storageClassName"), "storageClassName")
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
