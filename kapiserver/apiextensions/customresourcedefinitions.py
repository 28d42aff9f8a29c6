"""The CustomResourceDefinition kind (apiextensions.k8s.io/v1, cluster-scoped, status subresource).

Served from the apiextensions link of the delegation chain (``crd_groups``),
as upstream serves this group from apiextensions-apiserver.  The strategy
applies upstream's defaulting and validation (``crd_validation``), the API
approval rule for protected groups, keeps ``status.storedVersions`` in step
with the storage version, and turns the first delete into a pending one: the
cleanup finalizer and a Terminating condition are added, and the finalizing
controller (``controllers/finalizer.py``) deletes the custom resources before
it lets the CRD go.
"""
from __future__ import annotations

import copy
from typing import Optional
from urllib.parse import urlparse

from kapiserver.apiextensions.conditions import TERMINATING, set_condition
from kapiserver.machinery import errors
from kapiserver.machinery.errors import Cause
from kapiserver.registry.resource_type import ResourceType, Strategy

GROUP = "apiextensions.k8s.io"
VERSION = "v1"
PLURAL = "customresourcedefinitions"
SCHEMA = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
APPROVAL_LINK = "https://github.com/kubernetes/enhancements/pull/1111"


def is_protected_group(group: str) -> bool:
    """Groups under k8s.io / kubernetes.io need an API review approval annotation."""
    return any(group == d or group.endswith("." + d) for d in ("k8s.io", "kubernetes.io"))


def approval_state(crd: dict) -> tuple[str, str]:
    """(state, value) of the approval annotation: missing, bypassed, approved or invalid ("" if unprotected)."""
    group = (crd.get("spec") or {}).get("group") or ""
    if not is_protected_group(group):
        return "", ""
    value = ((crd.get("metadata") or {}).get("annotations") or {}).get(APPROVAL_ANNOTATION)
    if value is None:
        return "missing", ""
    if value.startswith("unapproved"):
        return "bypassed", value
    parsed = urlparse(value)
    if parsed.scheme and parsed.netloc:
        return "approved", value
    return "invalid", value


def _validate_approval(crd: dict, old: Optional[dict]) -> list[Cause]:
    state, value = approval_state(crd)
    if state in ("", "approved", "bypassed"):
        return []
    if old is not None and approval_state(old)[0] in ("missing", "invalid"):
        return []  # an update does not have to fix what was already wrong
    path = f"metadata.annotations[{APPROVAL_ANNOTATION}]"
    if state == "missing":
        return [errors.field_required(path, f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}", '
                                            f"see {APPROVAL_LINK}")]
    return [errors.field_invalid(path, value, f'protected groups must have approval annotation "{APPROVAL_ANNOTATION}" '
                                              f'with either a URL or a reason starting with "unapproved", '
                                              f"see {APPROVAL_LINK}")]


# (crd_validation, and the schema and CEL code it brings, is imported with the first CRD written: a
# start without CRDs needs none of it)
def _add_stored_version(crd: dict) -> None:
    from kapiserver.apiextensions import crd_validation
    storage = crd_validation.storage_version(crd)
    if storage is None:
        return
    status = crd.setdefault("status", {})
    stored = status.get("storedVersions")
    if not isinstance(stored, list):  # absent, or Go's null
        stored = status["storedVersions"] = []
    if storage not in stored:
        stored.append(storage)


class CRDStrategy(Strategy):
    tracks_generation = True

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        obj["status"] = {"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": []}
        _add_stored_version(obj)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_update(rtype, new, old)
        if new.get("status") is not None:
            new["status"] = copy.deepcopy(new["status"])
        _add_stored_version(new)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        from kapiserver.apiextensions import crd_validation
        crd_validation.default_crd(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[Cause]:
        from kapiserver.apiextensions import crd_validation
        return crd_validation.validate_crd(obj) + _validate_approval(obj, None)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[Cause]:
        from kapiserver.apiextensions import crd_validation
        causes = crd_validation.validate_crd(new, old) + _validate_approval(new, old)
        for field in ("group",):
            if (new.get("spec") or {}).get(field) != (old.get("spec") or {}).get(field):
                causes.append(errors.field_invalid(f"spec.{field}", (new.get("spec") or {}).get(field),
                                                   "field is immutable"))
        return causes

    def delete_pending(self, rtype: ResourceType, obj: dict) -> bool:
        """The first delete adds the cleanup finalizer and the Terminating condition."""
        md = obj.setdefault("metadata", {})
        if md.get("deletionTimestamp"):
            return False  # the update emptying the finalizers removes it
        finalizers = md.setdefault("finalizers", [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        set_condition(obj, TERMINATING, "True", "InstanceDeletionPending",
                      "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon")
        return True


def resource_type() -> ResourceType:
    return ResourceType(
        group=GROUP, version=VERSION, kind="CustomResourceDefinition", plural=PLURAL,
        singular="customresourcedefinition", namespaced=False, strategy=CRDStrategy(),
        short_names=("crd", "crds"), categories=("api-extensions",), has_status=True, schema_name=SCHEMA,
        storage_version="apiextensions.k8s.io/v1beta1",  # what upstream's discovery hashes, to this day
    )
