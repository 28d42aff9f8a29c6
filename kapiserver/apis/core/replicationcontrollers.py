"""ReplicationControllers (core/v1): a map selector, a pod template, status and scale.

No controller creates the pods (the envtest contract); status stays as clients write it.
"""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors, labels
from kapiserver.registry.resource_type import ResourceType, ScaleSubresource
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.ReplicationController"
SPEC = "io.k8s.api.core.v1.ReplicationControllerSpec"
STATUS = "io.k8s.api.core.v1.ReplicationControllerStatus"
SELECTOR_MISMATCH = "`selector` does not match template `labels`"


class ReplicationControllerStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
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
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = podspec.validate_non_negative(spec.get("replicas"), "spec.replicas")
        causes += podspec.validate_non_negative(spec.get("minReadySeconds"), "spec.minReadySeconds")
        selector = spec.get("selector") or {}
        if not selector:
            causes.append(errors.field_required("spec.selector"))
        template = spec.get("template")
        if template is None:
            causes.append(errors.field_required("spec.template"))
            return causes
        labels = ((template or {}).get("metadata") or {}).get("labels") or {}
        if selector and any(labels.get(k) != v for k, v in selector.items()):
            causes.append(errors.field_invalid("spec.template.metadata.labels", labels, SELECTOR_MISMATCH))
        causes += podspec.validate_pod_template_spec(template, "spec.template")
        policy = ((template or {}).get("spec") or {}).get("restartPolicy")
        if policy and policy != "Always" and policy in podspec.RESTART_POLICIES:
            causes.append(errors.field_not_supported("spec.template.spec.restartPolicy", policy, ["Always"]))
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
