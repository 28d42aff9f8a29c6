"""StorageClasses (storage.k8s.io/v1, cluster-scoped): reclaimPolicy and
volumeBindingMode defaults; provisioner, parameters, reclaimPolicy and
volumeBindingMode fixed after create, as upstream."""
from __future__ import annotations

import dataclasses

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.storage.v1.StorageClass"
RECLAIM_POLICIES = ["Delete", "Retain"]
BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")


def _forbidden_change(new: dict, old: dict, key: str) -> list[errors.Cause]:
    if (new.get(key) or None) == (old.get(key) or None):
        return []
    return [errors.field_forbidden(key, f"updates to {key} are forbidden.")]


class StorageClassStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        if not obj.get("volumeBindingMode"):
            obj["volumeBindingMode"] = "Immediate"
        if obj.get("reclaimPolicy") is None:
            obj["reclaimPolicy"] = "Delete"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        causes = []
        provisioner = obj.get("provisioner") or ""
        if not provisioner:
            causes.append(errors.field_required("provisioner"))
        else:
            causes.extend(errors.field_invalid("provisioner", provisioner, p)
                          for p in validation.is_qualified_name(provisioner.lower()))
        for key, value in (obj.get("parameters") or {}).items():
            if not key:
                causes.append(errors.field_invalid("parameters", key, "field can not be empty."))
        causes.extend(field_checks.one_of(obj.get("reclaimPolicy"), "reclaimPolicy", RECLAIM_POLICIES))
        causes.extend(field_checks.one_of(obj.get("volumeBindingMode"), "volumeBindingMode", BINDING_MODES,
                                          required=True))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        for key in ("parameters", "provisioner", "reclaimPolicy"):
            causes.extend(_forbidden_change(new, old, key))
        causes.extend(field_checks.immutable(new.get("volumeBindingMode"), old.get("volumeBindingMode"),
                                             "volumeBindingMode"))
        return causes


def _name(obj: dict) -> str:
    annotations = columns.get_path(obj, "metadata", "annotations", default={})
    name = columns.get_path(obj, "metadata", "name", default="")
    if any(annotations.get(a) == "true" for a in DEFAULT_CLASS_ANNOTATIONS):
        name += " (default)"
    return name


def resource_type() -> ResourceType:
    return ResourceType(
        group="storage.k8s.io", version="v1", kind="StorageClass", plural="storageclasses",
        singular="storageclass", namespaced=False, strategy=StorageClassStrategy(), short_names=("sc",),
        schema_name=SCHEMA, return_deleted_object=True,
        table_columns=(
            dataclasses.replace(columns.name_column(), cell=_name),
            columns.column("Provisioner", lambda o: o.get("provisioner") or "", SCHEMA, "provisioner"),
            columns.column("ReclaimPolicy", lambda o: o.get("reclaimPolicy") or "Delete", SCHEMA, "reclaimPolicy"),
            columns.column("VolumeBindingMode", lambda o: o.get("volumeBindingMode") or "Immediate", SCHEMA,
                           "volumeBindingMode"),
            columns.column("AllowVolumeExpansion", lambda o: bool(o.get("allowVolumeExpansion")), SCHEMA,
                           "allowVolumeExpansion", type="boolean"),
            columns.age_column(),
        ),
    )
