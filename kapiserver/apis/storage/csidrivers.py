"""CSIDrivers (storage.k8s.io/v1, cluster-scoped): upstream's spec defaults;
attachRequired, podInfoOnMount, volumeLifecycleModes and fsGroupPolicy are fixed
after create; the name is a CSI driver name."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.storage.v1.CSIDriver"
SPEC = "io.k8s.api.storage.v1.CSIDriverSpec"
FS_GROUP_POLICIES = ["File", "None", "ReadWriteOnceWithFSType"]
LIFECYCLE_MODES = ["Ephemeral", "Persistent"]
_DEFAULTS = (("attachRequired", True), ("podInfoOnMount", False), ("storageCapacity", False),
             ("fsGroupPolicy", "ReadWriteOnceWithFSType"), ("requiresRepublish", False), ("seLinuxMount", False))
_IMMUTABLE = ("attachRequired", "podInfoOnMount", "volumeLifecycleModes", "fsGroupPolicy")


class CSIDriverStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        for key, value in _DEFAULTS:
            if spec.get(key) is None:
                spec[key] = value
        if not spec.get("volumeLifecycleModes"):
            spec["volumeLifecycleModes"] = ["Persistent"]

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        name = columns.get_path(obj, "metadata", "name", default="")
        causes = [errors.field_invalid("metadata.name", name, p) for p in validation.is_qualified_name(name.lower())]
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes.extend(field_checks.one_of(spec.get("fsGroupPolicy"), "spec.fsGroupPolicy", FS_GROUP_POLICIES))
        for i, mode in enumerate(spec.get("volumeLifecycleModes") or []):
            causes.extend(field_checks.one_of(mode, f"spec.volumeLifecycleModes[{i}]", LIFECYCLE_MODES,
                                              required=True))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        for key in _IMMUTABLE:
            causes.extend(field_checks.immutable(columns.get_path(new, "spec", key), columns.get_path(old, "spec", key),
                                                 f"spec.{key}"))
        return causes


def _flag(key: str):
    return lambda o: bool(columns.get_path(o, "spec", key))


def resource_type() -> ResourceType:
    return ResourceType(
        group="storage.k8s.io", version="v1", kind="CSIDriver", plural="csidrivers", singular="csidriver",
        namespaced=False, strategy=CSIDriverStrategy(), schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.column("AttachRequired", _flag("attachRequired"), SPEC, "attachRequired", type="boolean"),
            columns.column("PodInfoOnMount", _flag("podInfoOnMount"), SPEC, "podInfoOnMount", type="boolean"),
            columns.column("StorageCapacity", _flag("storageCapacity"), SPEC, "storageCapacity", type="boolean"),
            columns.column("TokenRequests", lambda o: ",".join(
                (t or {}).get("audience") or "<api-server-default>"
                for t in columns.get_path(o, "spec", "tokenRequests", default=[])) or "<unset>",
                SPEC, "tokenRequests"),
            columns.column("RequiresRepublish", _flag("requiresRepublish"), SPEC, "requiresRepublish",
                           type="boolean"),
            columns.column("Modes", lambda o: ",".join(columns.get_path(o, "spec", "volumeLifecycleModes",
                                                                        default=[])) or "<none>",
                           SPEC, "volumeLifecycleModes"),
            columns.age_column(),
        ),
    )
