"""PersistentVolumes (core/v1, cluster-scoped): capacity, access modes and exactly one volume source."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec, volume_modes
from kapiserver.machinery import errors, meta
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.PersistentVolume"
SPEC = "io.k8s.api.core.v1.PersistentVolumeSpec"
STATUS = "io.k8s.api.core.v1.PersistentVolumeStatus"
RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "hostPath", "glusterfs", "nfs", "rbd", "iscsi", "cinder",
           "cephfs", "fc", "flocker", "flexVolume", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
           "photonPersistentDisk", "portworxVolume", "scaleIO", "local", "storageos", "csi")


class PersistentVolumeStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": meta.now_rfc3339()}

    def prepare_for_status_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        """A phase change stamps ``status.lastPhaseTransitionTime`` unless the client set a new one."""
        super().prepare_for_status_update(rtype, new, old)
        status = new.get("status")
        if not isinstance(status, dict):
            return
        old_status = old.get("status") or {}
        old_time, new_time = old_status.get("lastPhaseTransitionTime"), status.get("lastPhaseTransitionTime")
        if status.get("phase") == old_status.get("phase"):
            if new_time is None and old_time is not None:
                status["lastPhaseTransitionTime"] = old_time
        elif new_time is None or new_time == old_time:
            status["lastPhaseTransitionTime"] = meta.now_rfc3339()

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            if not spec.get("persistentVolumeReclaimPolicy"):
                spec["persistentVolumeReclaimPolicy"] = "Retain"
            if not spec.get("volumeMode"):
                spec["volumeMode"] = "Filesystem"
            if isinstance(spec.get("hostPath"), dict):
                spec["hostPath"].setdefault("type", "")
        if "status" not in obj:
            obj["status"] = {"phase": "Pending"}

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = volume_modes.validate_access_modes(spec.get("accessModes"), "spec.accessModes")
        capacity = spec.get("capacity") or {}
        if not capacity:
            causes.append(errors.field_required("spec.capacity"))
        elif "storage" not in capacity:
            causes.append(errors.field_not_supported("spec.capacity", sorted(capacity), ["storage"]))
        causes += podspec.validate_resource_list(capacity, "spec.capacity")
        causes += field_checks.one_of(spec.get("persistentVolumeReclaimPolicy"),
                                        "spec.persistentVolumeReclaimPolicy", RECLAIM_POLICIES, required=False)
        causes += field_checks.one_of(spec.get("volumeMode"), "spec.volumeMode", volume_modes.VOLUME_MODES,
                                        required=False)
        sources = [k for k in SOURCES if spec.get(k) is not None]
        if not sources:
            causes.append(errors.field_required("spec", "must specify a volume type"))
        for extra in sources[1:]:
            causes.append(errors.field_forbidden(f"spec.{extra}", "may not specify more than 1 volume type"))
        return causes


def _claim(pv: dict) -> str:
    ref = columns.get_path(pv, "spec", "claimRef")
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if isinstance(ref, dict) else ""


def resource_type() -> ResourceType:
    def text(*path: str):
        return lambda o: columns.get_path(o, *path, default="")
    return ResourceType(
        group="", version="v1", kind="PersistentVolume", plural="persistentvolumes", singular="persistentvolume",
        namespaced=False, strategy=PersistentVolumeStrategy(), short_names=("pv",), has_status=True,
        schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.column("Capacity", text("spec", "capacity", "storage"), SPEC, "capacity"),
            columns.column("Access Modes", lambda o: volume_modes.short_access_modes(
                columns.get_path(o, "spec", "accessModes")), SPEC, "accessModes"),
            columns.column("Reclaim Policy", text("spec", "persistentVolumeReclaimPolicy"), SPEC,
                           "persistentVolumeReclaimPolicy"),
            columns.column("Status", text("status", "phase"), STATUS, "phase"),
            columns.column("Claim", _claim, SPEC, "claimRef"),
            columns.column("StorageClass", text("spec", "storageClassName"), SPEC, "storageClassName"),
            columns.column("VolumeAttributesClass", lambda o: columns.get_path(
                o, "spec", "volumeAttributesClassName", default="") or "<unset>", SPEC, "volumeAttributesClassName"),
            columns.column("Reason", text("status", "reason"), STATUS, "reason"),
            columns.age_column(),
            columns.column("VolumeMode", text("spec", "volumeMode"), SPEC, "volumeMode", priority=1),
        ),
    )
