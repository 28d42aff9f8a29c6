"""StorageClasses (storage.k8s.io/v1, cluster-scoped): reclaimPolicy and
volumeBindingMode defaults; provisioner, parameters, reclaimPolicy and
volumeBindingMode fixed after create, as upstream."""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import scheduling
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.storage.v1.StorageClass"
RECLAIM_POLICIES = ["Delete", "Retain"]
BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")


MAX_PARAMETERS = 512
MAX_PARAMETERS_SIZE = 256 * 1024


def _validate_parameters(params: Any) -> list[errors.Cause]:
    params = params if isinstance(params, dict) else {}
    if len(params) > MAX_PARAMETERS:
        return [errors.field_too_long("parameters", MAX_PARAMETERS)]
    causes = []
    size = 0
    for key, value in params.items():
        if not key:
            causes.append(errors.field_invalid("parameters", key, "field can not be empty."))
        size += len(str(key).encode()) + len(str(value if value is not None else "").encode())
    if size > MAX_PARAMETERS_SIZE:
        causes.append(errors.field_too_long("parameters", MAX_PARAMETERS_SIZE))
    return causes


def _validate_allowed_topologies(terms: Any) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    seen: list = []
    for i, term in enumerate(terms if isinstance(terms, list) else ()):
        found, term_causes = scheduling.validate_topology_selector_term(term, f"allowedTopologies[{i}]")
        causes.extend(term_causes)
        if found in seen:
            causes.append(errors.field_duplicate(f"allowedTopologies[{i}].matchLabelExpressions", ""))
        seen.append(found)
    return causes


class StorageClassStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        if not obj.get("volumeBindingMode"):
            obj["volumeBindingMode"] = "Immediate"
        if obj.get("reclaimPolicy") is None:
            obj["reclaimPolicy"] = "Delete"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateStorageClass."""
        causes = field_checks.kube_object_meta(obj)
        provisioner = str(obj.get("provisioner") or "")
        if not provisioner:
            causes.append(errors.field_required("provisioner"))
        else:
            causes.extend(errors.field_invalid("provisioner", provisioner.lower(), p)
                          for p in validation.is_qualified_name(provisioner.lower()))
        causes.extend(_validate_parameters(obj.get("parameters")))
        policy = obj.get("reclaimPolicy")
        if policy and policy not in RECLAIM_POLICIES:
            causes.append(errors.field_not_supported("reclaimPolicy", policy, RECLAIM_POLICIES))
        mode = obj.get("volumeBindingMode")
        if mode is None:
            causes.append(errors.field_required("volumeBindingMode"))
        elif mode not in BINDING_MODES:
            causes.append(errors.field_not_supported("volumeBindingMode", mode, BINDING_MODES))
        return causes + _validate_allowed_topologies(obj.get("allowedTopologies"))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateStorageClassUpdate on top of ValidateStorageClass."""
        causes = self.validate(rtype, new)
        if (new.get("parameters") or None) != (old.get("parameters") or None):
            causes.append(errors.field_forbidden("parameters", "updates to parameters are forbidden."))
        if new.get("provisioner") != old.get("provisioner"):
            causes.append(errors.field_forbidden("provisioner", "updates to provisioner are forbidden."))
        if new.get("reclaimPolicy") != old.get("reclaimPolicy"):
            causes.append(errors.field_forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
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
            columns.name_column()._replace(cell=_name),
            columns.column("Provisioner", lambda o: o.get("provisioner") or "", SCHEMA, "provisioner"),
            columns.column("ReclaimPolicy", lambda o: o.get("reclaimPolicy") or "Delete", SCHEMA, "reclaimPolicy"),
            columns.column("VolumeBindingMode", lambda o: o.get("volumeBindingMode") or "Immediate", SCHEMA,
                           "volumeBindingMode"),
            columns.column("AllowVolumeExpansion", lambda o: bool(o.get("allowVolumeExpansion")), SCHEMA,
                           "allowVolumeExpansion", type="boolean"),
            columns.age_column(),
        ),
    )
