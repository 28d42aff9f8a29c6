"""PersistentVolumeClaims (core/v1): upstream's claim validation and update rules (the spec is
fixed but for a bound claim's storage request); a new claim is ``Pending`` until something binds
it (nothing does here)."""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources, volume_modes
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.PersistentVolumeClaim"
SPEC = "io.k8s.api.core.v1.PersistentVolumeClaimSpec"
STATUS = "io.k8s.api.core.v1.PersistentVolumeClaimStatus"
IMMUTABLE = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"


BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
RESIZE_STATUSES = ["ControllerResizeInProgress", "ControllerResizeInfeasible", "NodeResizeInProgress",
                   "NodeResizeInfeasible", "NodeResizePending"]


def _group(ref: dict) -> str:
    return ref.get("apiGroup") or ""


def enforce_data_source_backwards_compatibility(spec: Any, old_spec: Any) -> None:
    """upstream's EnforceDataSourceBackwardsCompatibility: without a dataSourceRef (an old client), a
    dataSource other than a claim or a VolumeSnapshot is silently dropped, unless the old claim had one."""
    if not isinstance(spec, dict):
        return
    if isinstance(old_spec, dict) and (old_spec.get("dataSource") is not None
                                       or old_spec.get("dataSourceRef") is not None):
        return
    if spec.get("dataSourceRef") is not None:
        return
    source = spec.get("dataSource")
    if isinstance(source, dict) and (
            (source.get("kind") == "PersistentVolumeClaim" and not _group(source))
            or (source.get("kind") == "VolumeSnapshot" and _group(source) == "snapshot.storage.k8s.io")):
        return
    spec.pop("dataSource", None)


def normalize_data_sources(spec: Any) -> None:
    """upstream's NormalizeDataSources: dataSource and dataSourceRef mirror each other when one is unset
    (a namespaced dataSourceRef has no dataSource counterpart)."""
    if not isinstance(spec, dict):
        return
    source, ref = spec.get("dataSource"), spec.get("dataSourceRef")
    if isinstance(source, dict) and ref is None:
        spec["dataSourceRef"] = {k: source[k] for k in ("apiGroup", "kind", "name") if source.get(k) is not None}
    elif isinstance(ref, dict) and source is None and not ref.get("namespace"):
        spec["dataSource"] = {k: ref[k] for k in ("apiGroup", "kind", "name") if ref.get(k) is not None}


class PersistentVolumeClaimStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        obj["status"] = {"phase": "Pending"}  # what upstream's defaulting gives the cleared status
        enforce_data_source_backwards_compatibility(obj.get("spec"), None)
        normalize_data_sources(obj.get("spec"))

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_update(rtype, new, old)
        enforce_data_source_backwards_compatibility(new.get("spec"), old.get("spec"))
        normalize_data_sources(new.get("spec"))

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            if not spec.get("volumeMode"):
                spec["volumeMode"] = "Filesystem"
            resources.canonicalize_requirements(spec.get("resources"))
        if "status" not in obj:
            obj["status"] = {"phase": "Pending"}

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidatePersistentVolumeClaim."""
        from kapiserver.apis.core import volumes  # the volume validation loads with the first use
        return field_checks.kube_object_meta(obj) + volumes.validate_claim_spec(obj.get("spec"), "spec")

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePersistentVolumeClaimUpdate (on top of the create checks)."""
        from kapiserver.apis.core import volumes
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        selector_allowed = bool(validation.validate_label_selector(old_spec.get("selector"), "x"))
        group_allowed = any(isinstance(old_spec.get(k), dict) and old_spec[k].get("apiGroup") is not None
                            for k in ("dataSource", "dataSourceRef"))
        causes = field_checks.kube_object_meta(new) + volumes.validate_claim_spec(
            spec, "spec", allow_invalid_selector=selector_allowed, allow_invalid_group=group_allowed)
        annotations = (new.get("metadata") or {}).get("annotations") or {}
        old_annotations = (old.get("metadata") or {}).get("annotations") or {}
        a, b = copy.deepcopy(spec), copy.deepcopy(old_spec)
        if not old_spec.get("volumeName"):
            b.pop("volumeName", None)
            if "volumeName" in a:
                b["volumeName"] = a["volumeName"]
        old_class = old_spec.get("storageClassName")
        new_class = spec.get("storageClassName")
        old_beta = old_annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
        if (BETA_STORAGE_CLASS_ANNOTATION in old_annotations and old_class is None and new_class == old_beta
                and annotations.get(BETA_STORAGE_CLASS_ANNOTATION, old_beta) == old_beta):
            a.pop("storageClassName", None)
        else:
            new_beta = annotations.get(BETA_STORAGE_CLASS_ANNOTATION, "")
            if new_beta != (old_beta or ""):
                causes.append(errors.field_invalid(f"metadata.annotations.{BETA_STORAGE_CLASS_ANNOTATION}", new_beta,
                                                   validation.FIELD_IMMUTABLE))
            if new_class is not None and old_class is None and (
                    BETA_STORAGE_CLASS_ANNOTATION not in old_annotations or new_class == old_beta):
                a.pop("storageClassName", None)
        bound = (new.get("status") or {}).get("phase") == "Bound"
        if bound:
            requests = (a.get("resources") or {}).get("requests")
            if isinstance(requests, dict):
                old_storage = ((old_spec.get("resources") or {}).get("requests") or {}).get("storage")
                if old_storage is None:
                    requests.pop("storage", None)
                else:
                    requests["storage"] = old_storage
            if a.get("volumeAttributesClassName") is not None:
                if "volumeAttributesClassName" in b:
                    a["volumeAttributesClassName"] = b["volumeAttributesClassName"]
                else:
                    a.pop("volumeAttributesClassName", None)
        if not _same_claim_spec(a, b):
            causes.append(errors.field_forbidden("spec", IMMUTABLE + "\n" + field_checks.spec_diff(
                b, a, "core.PersistentVolumeClaimSpec")))
        new_size = _storage(spec)
        old_size = _storage(old_spec)
        status_size = resources.quantity_or_cause(((old.get("status") or {}).get("capacity") or {}).get("storage", "0"),
                                                  "")[0]
        if new_size is not None and old_size is not None and new_size < old_size:
            if status_size is None or new_size <= status_size:
                causes.append(errors.field_forbidden("spec.resources.requests.storage",
                                                     "field can not be less than status.capacity"))
        causes += field_checks.immutable(spec.get("volumeMode"), old_spec.get("volumeMode"), "volumeMode")
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePersistentVolumeClaimStatusUpdate (RecoverVolumeExpansionFailure is on in 1.32)."""
        causes: list[errors.Cause] = []
        if not (new.get("spec") or {}).get("accessModes"):
            causes.append(errors.field_required("Spec.accessModes"))  # sic: upstream's path
        status = new.get("status") or {}
        for name, key_path, q, problems in resources.quantities(status.get("capacity"), "status.capacity"):
            causes += problems
            if q is not None:
                causes += resources.validate_basic_resource(q, key_path)
        for name, value in (status.get("allocatedResourceStatuses") or {}).items():
            key_problems = _claim_resource_key(name, "status.allocatedResourceStatus")
            causes += key_problems
            if value not in RESIZE_STATUSES:
                causes.append(errors.field_not_supported("status.allocatedResourceStatus", name, RESIZE_STATUSES))
        for name, key_path, q, problems in resources.quantities(status.get("allocatedResources"),
                                                                 "status.allocatedResources"):
            key_problems = _claim_resource_key(name, "status.allocatedResources")
            if key_problems:
                causes += key_problems
                continue
            causes += problems
            if q is not None:
                basic = resources.validate_basic_resource(q, key_path)
                causes += basic or resources.validate_resource_quantity_value("storage", q, key_path)
        return causes


def _claim_resource_key(name: str, path: str) -> list[errors.Cause]:
    causes = [errors.field_invalid(path, name, m) for m in validation.is_qualified_name(name)]
    if causes:
        return causes
    if resources.is_native_resource(name) and name != "storage":
        return [errors.field_not_supported(path, name, ["storage"])]
    return []


def _storage(spec: dict) -> Any:
    value = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    return None if value is None else resources.quantity_or_cause(value, "")[0]


def _same_claim_spec(a: dict, b: dict) -> bool:
    """Semantic equality: quantities compare by value."""
    def norm(spec: dict) -> dict:
        out = copy.deepcopy(spec)
        res = out.get("resources")
        if isinstance(res, dict):
            resources.canonicalize_requirements(res)
        return out
    return norm(a) == norm(b)


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
