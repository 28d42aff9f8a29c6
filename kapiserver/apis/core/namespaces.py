"""Namespaces (core/v1, cluster-scoped): phase Active on create, the
``kubernetes`` finalizer, the ``kubernetes.io/metadata.name`` label, and a
delete that only marks the namespace Terminating while ``spec.finalizers``
is not empty (the namespace controller empties it)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.validation import DNS1123_LABEL
from kapiserver.registry.resource_type import ResourceType, Strategy
from kapiserver.registry.subresources import Subresource

SCHEMA = "io.k8s.api.core.v1.Namespace"
ACTIVE = "Active"
TERMINATING = "Terminating"
KUBERNETES_FINALIZER = "kubernetes"
NAME_LABEL = "kubernetes.io/metadata.name"


def _finalizer_names(obj: dict, indexed: bool) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    for i, finalizer in enumerate((obj.get("spec") or {}).get("finalizers") or []):
        path = f"spec.finalizers[{i}]" if indexed else "spec.finalizers"
        finalizer = str(finalizer)
        problems = validation.is_qualified_name(finalizer) + validation.kube_finalizer_problems(finalizer)
        causes.extend(errors.field_invalid(path, finalizer, p) for p in problems)
    return causes


def _spec(obj: dict) -> dict:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


class NamespaceStrategy(Strategy):
    name_validation = DNS1123_LABEL

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        obj["status"] = {"phase": ACTIVE}
        spec = _spec(obj)
        finalizers = list(spec.get("finalizers") or [])
        if KUBERNETES_FINALIZER not in finalizers:
            finalizers.append(KUBERNETES_FINALIZER)
        spec["finalizers"] = finalizers

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        """Finalizers change only through /finalize, status only through /status."""
        super().prepare_for_update(rtype, new, old)
        old_finalizers = (old.get("spec") or {}).get("finalizers")
        if old_finalizers is None:
            _spec(new).pop("finalizers", None)
        else:
            _spec(new)["finalizers"] = list(old_finalizers)
        if not new.get("spec"):
            new.pop("spec", None)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("finalizers") == []:
            del spec["finalizers"]  # omitempty: an emptied list is not kept
        status = obj.get("status")
        if not isinstance(status, dict):
            status = obj["status"] = {}
        if not status.get("phase"):
            status["phase"] = ACTIVE
        md = obj.setdefault("metadata", {})
        name = md.get("name")
        if name:
            labels = md.get("labels")
            if not isinstance(labels, dict):
                labels = md["labels"] = {}
            labels[NAME_LABEL] = name

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateNamespace (spec.finalizers reported without an index, as upstream does)."""
        # upstream's Canonicalize: a name generated after defaulting gets its label too
        self.default(rtype, obj)
        return field_checks.kube_object_meta(obj) + _finalizer_names(obj, indexed=False)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        if new.get("spec") != old.get("spec"):  # only /finalize changes spec: it reports indexes
            return field_checks.kube_object_meta(new) + _finalizer_names(new, indexed=True)
        return self.validate(rtype, new)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateNamespaceStatusUpdate: the phase follows the deletion timestamp."""
        phase = (new.get("status") or {}).get("phase") or ""
        if not (new.get("metadata") or {}).get("deletionTimestamp"):
            if phase != ACTIVE:
                return [errors.field_invalid("status.Phase", phase,
                                             "may only be 'Active' if `deletionTimestamp` is empty")]
        elif phase != TERMINATING:
            return [errors.field_invalid("status.Phase", phase,
                                         "may only be 'Terminating' if `deletionTimestamp` is not empty")]
        return []

    def delete_pending(self, rtype: ResourceType, obj: dict) -> bool:
        """A namespace with spec.finalizers is only marked Terminating."""
        if (obj.get("spec") or {}).get("finalizers"):
            status = obj.get("status")
            if not isinstance(status, dict):
                status = obj["status"] = {}
            status["phase"] = TERMINATING
            return True
        return False


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Namespace", plural="namespaces", singular="namespace", namespaced=False,
        strategy=NamespaceStrategy(), short_names=("ns",), has_status=True, schema_name=SCHEMA,
        return_deleted_object=True,
        verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
        # PUT only: everything but status, spec.finalizers included (the namespace controller's way out)
        extra_subresources=(Subresource("finalize", ("update",)),),
        selectable_fields={"status.phase": columns.text_at("status", "phase")},
        # pkg/apis/core/v1/conversion.go: no metadata.namespace (the field set's legacy "name" is
        # not accepted either)
        field_labels=FieldLabelConversion(("status.phase", "metadata.name")),
        table_columns=(
            columns.name_column(),
            columns.column("Status", lambda o: columns.get_path(o, "status", "phase", default=""),
                           desc="The status of the namespace"),
            columns.age_column(),
        ),
    )
