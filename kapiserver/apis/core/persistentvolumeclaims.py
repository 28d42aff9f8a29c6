"""PersistentVolumeClaims (core/v1): access modes and a storage request are required;
a new claim is ``Pending`` until something binds it (nothing does here)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec, volume_modes
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.PersistentVolumeClaim"
SPEC = "io.k8s.api.core.v1.PersistentVolumeClaimSpec"
STATUS = "io.k8s.api.core.v1.PersistentVolumeClaimStatus"
IMMUTABLE = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"


class PersistentVolumeClaimStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and not spec.get("volumeMode"):
            spec["volumeMode"] = "Filesystem"
        if "status" not in obj:
            obj["status"] = {"phase": "Pending"}

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = volume_modes.validate_access_modes(spec.get("accessModes"), "spec.accessModes")
        requests = (spec.get("resources") or {}).get("requests") or {}
        if "storage" not in requests:
            causes.append(errors.field_required("spec.resources[storage]"))
        causes += podspec.validate_resource_list(requests, "spec.resources.requests")
        causes += field_checks.one_of(spec.get("volumeMode"), "spec.volumeMode", volume_modes.VOLUME_MODES,
                                        required=False)
        cls = spec.get("storageClassName")
        if cls:
            causes.extend(errors.field_invalid("spec.storageClassName", cls, m)
                          for m in validation.is_dns1123_subdomain(cls))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        a, b = dict(new.get("spec") or {}), dict(old.get("spec") or {})
        if (old.get("status") or {}).get("phase") == "Bound":
            for spec in (a, b):
                spec.pop("volumeAttributesClassName", None)
                spec["resources"] = {k: v for k, v in (spec.get("resources") or {}).items() if k != "requests"}
        if not b.get("volumeName"):
            a.pop("volumeName", None)  # binding sets it once
        if a != b:
            causes.append(errors.field_forbidden("spec", IMMUTABLE))
        return causes


def resource_type() -> ResourceType:
    def text(*path: str):
        return lambda o: columns.get_path(o, *path, default="")
    return ResourceType(
        group="", version="v1", kind="PersistentVolumeClaim", plural="persistentvolumeclaims",
        singular="persistentvolumeclaim", namespaced=True, strategy=PersistentVolumeClaimStrategy(),
        short_names=("pvc",), has_status=True, schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            columns.name_column(),
            columns.column("Status", text("status", "phase"), STATUS, "phase"),
            columns.column("Volume", text("spec", "volumeName"), SPEC, "volumeName"),
            columns.column("Capacity", lambda o: columns.get_path(o, "status", "capacity", "storage", default="")
                           if columns.get_path(o, "spec", "volumeName") else "", STATUS, "capacity"),
            columns.column("Access Modes", lambda o: volume_modes.short_access_modes(
                columns.get_path(o, "status", "accessModes")) if columns.get_path(o, "spec", "volumeName") else "",
                STATUS, "accessModes"),
            columns.column("StorageClass", text("spec", "storageClassName"), SPEC, "storageClassName"),
            columns.column("VolumeAttributesClass", lambda o: columns.get_path(
                o, "spec", "volumeAttributesClassName", default="") or "<unset>", SPEC, "volumeAttributesClassName"),
            columns.age_column(),
            columns.column("VolumeMode", text("spec", "volumeMode"), SPEC, "volumeMode", priority=1),
        ),
    )
