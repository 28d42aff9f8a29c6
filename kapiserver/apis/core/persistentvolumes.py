"""PersistentVolumes (core/v1, cluster-scoped): capacity, access modes and exactly one volume source,
validated as upstream's ValidatePersistentVolume; the source is fixed after create."""
from __future__ import annotations

import copy

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources, volume_modes
from kapiserver.machinery import errors, gorepr, meta, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.PersistentVolume"
SPEC = "io.k8s.api.core.v1.PersistentVolumeSpec"
STATUS = "io.k8s.api.core.v1.PersistentVolumeStatus"
MOUNT_OPTIONS_ANNOTATION = "volume.beta.kubernetes.io/mount-options"
# sources that take mount options (pkg/volume/validation)
_MOUNT_OPTION_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "nfs", "rbd", "quobyte", "iscsi",
                         "cinder", "cephfs", "azureFile", "vsphereVolume", "azureDisk", "photonPersistentDisk")


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
            resources.canonicalize_resource_list(spec.get("capacity"))
        if "status" not in obj:
            obj["status"] = {"phase": "Pending"}

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidatePersistentVolume and the mount-option check of pkg/volume/validation."""
        from kapiserver.apis.core import volumes  # the volume validation loads with the first use
        name = (obj.get("metadata") or {}).get("name") or ""
        spec = as_dict(obj.get("spec"))
        causes = field_checks.kube_object_meta(obj) + volumes.validate_persistent_volume_spec(spec, name, "spec")
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if MOUNT_OPTIONS_ANNOTATION in annotations and not any(spec.get(k) is not None for k in _MOUNT_OPTION_SOURCES):
            causes.append(errors.field_forbidden(f"metadata.annotations.{MOUNT_OPTIONS_ANNOTATION}",
                                                 "may not specify mount options for this volume type"))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePersistentVolumeUpdate: the volume source and mode are fixed."""
        from kapiserver.apis.core import volumes
        causes = self.validate(rtype, new)
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        source = {k: copy.deepcopy(spec.get(k)) for k, _ in volumes.PV_SOURCES if spec.get(k) is not None}
        old_source = {k: old_spec.get(k) for k, _ in volumes.PV_SOURCES if old_spec.get(k) is not None}
        csi, old_csi = source.get("csi"), old_source.get("csi")
        if isinstance(csi, dict) and isinstance(old_csi, dict) and old_csi.get("controllerExpandSecretRef") is None:
            csi.pop("controllerExpandSecretRef", None)
        if source != old_source:
            causes.append(errors.field_forbidden("spec.persistentvolumesource",
                                                 "spec.persistentvolumesource is immutable after creation\n"
                                                 + field_checks.spec_diff(old_source, source,
                                                                          "core.PersistentVolumeSource")))
        causes += field_checks.immutable(spec.get("volumeMode"), old_spec.get("volumeMode"), "volumeMode")
        if old_spec.get("nodeAffinity") is not None and spec.get("nodeAffinity") != old_spec.get("nodeAffinity"):
            affinity = spec.get("nodeAffinity")
            rendered = None if affinity is None else gorepr.struct("core.VolumeNodeAffinity", (
                ("Required", gorepr.pointer((affinity or {}).get("required"), "core.NodeSelector")),))
            causes.append(errors.field_invalid("nodeAffinity", rendered, validation.FIELD_IMMUTABLE
                                               + ", except for updating from beta label to GA"))
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return []


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
