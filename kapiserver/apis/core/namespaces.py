"""Namespaces (core/v1, cluster-scoped): phase Active on create, the
``kubernetes`` finalizer, the ``kubernetes.io/metadata.name`` label, and a
delete that only marks the namespace Terminating while ``spec.finalizers``
is not empty (the namespace controller empties it)."""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import DNS1123_LABEL, Strategy
from kapiserver.registry.subresources import Subresource

SCHEMA = "io.k8s.api.core.v1.Namespace"
ACTIVE = "Active"
TERMINATING = "Terminating"
KUBERNETES_FINALIZER = "kubernetes"
NAME_LABEL = "kubernetes.io/metadata.name"
_STANDARD_FINALIZERS = {KUBERNETES_FINALIZER, "orphan", "foregroundDeletion"}


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
        # upstream's Canonicalize: a name generated after defaulting gets its label too
        self.default(rtype, obj)
        causes = []
        for i, finalizer in enumerate((obj.get("spec") or {}).get("finalizers") or []):
            path = f"spec.finalizers[{i}]"
            for problem in validation.is_qualified_name(finalizer):
                causes.append(errors.field_invalid(path, finalizer, problem))
            if "/" not in finalizer and finalizer not in _STANDARD_FINALIZERS:
                causes.append(errors.field_invalid(
                    path, finalizer, "name is neither a standard finalizer name nor is it fully qualified"))
        return causes

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
        selectable_fields={"status.phase": lambda o: columns.get_path(o, "status", "phase", default="")},
        table_columns=(
            columns.name_column(),
            columns.column("Status", lambda o: columns.get_path(o, "status", "phase", default=""),
                           desc="The status of the namespace"),
            columns.age_column(),
        ),
    )
