"""CSIDrivers (storage.k8s.io/v1, cluster-scoped): upstream's spec defaults and
ValidateCSIDriver; attachRequired and volumeLifecycleModes are fixed after create."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.storage.v1.CSIDriver"
SPEC = "io.k8s.api.storage.v1.CSIDriverSpec"
FS_GROUP_POLICIES = ["File", "None", "ReadWriteOnceWithFSType"]
LIFECYCLE_MODES = ["Persistent", "Ephemeral"]
_DEFAULTS = (("attachRequired", True), ("podInfoOnMount", False), ("storageCapacity", False),
             ("fsGroupPolicy", "ReadWriteOnceWithFSType"), ("requiresRepublish", False), ("seLinuxMount", False))


def validate_spec(spec: dict) -> list[errors.Cause]:
    """upstream's validateCSIDriverSpec (SELinuxMountReadWriteOncePod is on in 1.32)."""
    causes = []
    for key, path in (("attachRequired", "spec.attachedRequired"), ("podInfoOnMount", "spec.podInfoOnMount"),
                      ("storageCapacity", "spec.storageCapacity")):
        if spec.get(key) is None:
            causes.append(errors.field_required(path))
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in FS_GROUP_POLICIES:
        causes.append(errors.field_not_supported("spec.fsGroupPolicy", policy, FS_GROUP_POLICIES))
    audiences: set = set()
    for i, request in enumerate(spec.get("tokenRequests") or ()):
        request = request if isinstance(request, dict) else {}
        audience = request.get("audience") or ""
        if audience in audiences:
            causes.append(errors.field_duplicate(f"spec.tokenRequests[{i}].audience", audience))
            continue
        audiences.add(audience)
        seconds = request.get("expirationSeconds")
        if validation.is_int(seconds):
            if seconds < 600:
                causes.append(errors.field_invalid(f"spec.tokenRequests[{i}].expirationSeconds", seconds,
                                                   "may not specify a duration less than 10 minutes"))
            if seconds > 1 << 32:
                causes.append(errors.field_invalid(f"spec.tokenRequests[{i}].expirationSeconds", seconds,
                                                   "may not specify a duration larger than 2^32 seconds"))
    for mode in spec.get("volumeLifecycleModes") or ():
        if mode not in LIFECYCLE_MODES:
            causes.append(errors.field_not_supported("spec.volumeLifecycleModes", mode, LIFECYCLE_MODES))
    if spec.get("seLinuxMount") is None:
        causes.append(errors.field_required("spec.seLinuxMount"))
    return causes


class CSIDriverStrategy(Strategy):
    allow_unconditional_update = False  # upstream's AllowUnconditionalUpdate: a PUT names the version it replaces

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        """Upstream counts spec changes without setting a generation on create (0, 1, 2...)."""
        return new.get("spec") != old.get("spec")

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
        """upstream's ValidateCSIDriver (the name is a DNS subdomain)."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_spec(spec)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateCSIDriverUpdate: attachRequired and volumeLifecycleModes are fixed."""
        spec = as_dict(new.get("spec"))
        causes = field_checks.kube_object_meta(new) + validate_spec(spec)
        causes += field_checks.immutable(columns.get_path(new, "spec", "attachRequired"),
                                         columns.get_path(old, "spec", "attachRequired"), "spec.attachedRequired")
        causes += field_checks.immutable(columns.get_path(new, "spec", "volumeLifecycleModes"),
                                         columns.get_path(old, "spec", "volumeLifecycleModes"),
                                         "spec.volumeLifecycleModes", lambda v: gorepr.string_slice(
                                             v, "storage.VolumeLifecycleMode"))
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
