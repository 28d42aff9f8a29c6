"""ReplicationControllers (core/v1): a map selector, a pod template, status and scale.

No controller creates the pods (the envtest contract); status stays as clients write it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors, gorepr, labels
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, ScaleSubresource, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.core.v1.ReplicationController"
SPEC = "io.k8s.api.core.v1.ReplicationControllerSpec"
STATUS = "io.k8s.api.core.v1.ReplicationControllerStatus"
SELECTOR_MISMATCH = "`selector` does not match template `labels`"


class ReplicationControllerStrategy(Strategy):
    tracks_generation = True

    def default(self, rtype: ResourceType, obj: dict) -> None:
        from kapiserver.apis.core import podspec  # the pod validation loads with the first use
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        template = spec.get("template")
        labels = ((template or {}).get("metadata") or {}).get("labels") if isinstance(template, dict) else None
        if labels and not spec.get("selector"):
            spec["selector"] = dict(labels)
        if labels and not (obj.get("metadata") or {}).get("labels"):
            obj.setdefault("metadata", {})["labels"] = dict(labels)
        spec.setdefault("replicas", 1)
        podspec.default_pod_template_spec(template)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateReplicationController."""
        from kapiserver.apis.core import podspec
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_spec(spec, podspec.template_options(spec.get("template")))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        from kapiserver.apis.core import podspec
        spec = as_dict(new.get("spec"))
        old_template = (old.get("spec") or {}).get("template")
        return field_checks.kube_object_meta(new) + validate_spec(
            spec, podspec.template_options(spec.get("template"), old_template))

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateReplicationControllerStatus."""
        return workload.validate_replica_status(
            new.get("status"), "status",
            ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"),
            ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"), "cannot be greater than readyReplicas")


def validate_spec(spec: dict, opts: podspec.PodOptions) -> list[errors.Cause]:
    """upstream's ValidateReplicationControllerSpec."""
    from kapiserver.apis.core import podspec
    causes = field_checks.non_negative(spec, "spec", "minReadySeconds")
    selector = as_dict(spec.get("selector"))
    if not selector:
        causes.append(errors.field_required("spec.selector"))
    causes += field_checks.non_negative(spec, "spec", "replicas")
    template = spec.get("template")
    if not isinstance(template, dict):
        return causes + [errors.field_required("spec.template")]
    labels = (template.get("metadata") or {}).get("labels")
    if selector and any((labels or {}).get(k) != v for k, v in selector.items()):
        causes.append(errors.field_invalid("spec.template.metadata.labels", gorepr.string_map(labels),
                                           SELECTOR_MISMATCH))
    causes += podspec.validate_pod_template_spec(template, "spec.template", opts)
    template_spec = as_dict(template.get("spec"))
    policy = template_spec.get("restartPolicy") or ""
    if policy != "Always":
        causes.append(errors.field_not_supported("spec.template.spec.restartPolicy", policy, ["Always"]))
    if template_spec.get("activeDeadlineSeconds") is not None:
        causes.append(errors.field_forbidden("spec.template.spec.activeDeadlineSeconds",
                                             "activeDeadlineSeconds in ReplicationController is not Supported"))
    return causes


def _images(template_spec: dict, key: str) -> str:
    return ",".join(c.get(key, "") for c in template_spec.get("containers") or ())


def resource_type() -> ResourceType:
    def int_path(*path: str):
        return lambda o: columns.get_path(o, *path, default=0)
    return ResourceType(
        group="", version="v1", kind="ReplicationController", plural="replicationcontrollers",
        singular="replicationcontroller", namespaced=True, strategy=ReplicationControllerStrategy(),
        short_names=("rc",), categories=("all",), has_status=True,
        scale=ScaleSubresource(".spec.replicas", ".status.replicas"), schema_name=SCHEMA,
        selectable_fields={"status.replicas": lambda o: str(columns.get_path(o, "status", "replicas", default=0))},
        field_labels=FieldLabelConversion(("metadata.name", "metadata.namespace", "status.replicas")),
        table_columns=(
            columns.name_column(),
            columns.column("Desired", int_path("spec", "replicas"), SPEC, "replicas", type="integer"),
            columns.column("Current", int_path("status", "replicas"), STATUS, "replicas", type="integer"),
            columns.column("Ready", int_path("status", "readyReplicas"), STATUS, "readyReplicas", type="integer"),
            columns.age_column(),
            columns.column("Containers", lambda o: _images(columns.get_path(o, "spec", "template", "spec",
                                                                            default={}), "name"),
                           desc="Names of each container in the template.", priority=1),
            columns.column("Images", lambda o: _images(columns.get_path(o, "spec", "template", "spec",
                                                                        default={}), "image"),
                           desc="Images referenced by each container in the template.", priority=1),
            columns.column("Selector", lambda o: labels.selector_string(columns.get_path(o, "spec", "selector"))
                           or "<none>", SPEC, "selector", priority=1),
        ),
    )
