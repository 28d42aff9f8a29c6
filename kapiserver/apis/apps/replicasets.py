"""ReplicaSets (apps/v1): replicas default, selector/template checks, scale, upstream's columns."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors, gorepr
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.apps.v1.ReplicaSet"
SPEC = "io.k8s.api.apps.v1.ReplicaSetSpec"
STATUS = "io.k8s.api.apps.v1.ReplicaSetStatus"


class ReplicaSetStrategy(Strategy):
    tracks_generation = True

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            workload.default_template(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateReplicaSet."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_replica_set_spec(spec, workload.template_options(obj))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        spec = as_dict(new.get("spec"))
        causes = field_checks.kube_object_meta(new) + validate_replica_set_spec(spec,
                                                                              workload.template_options(new, old))
        return causes + workload.selector_immutable(new, old)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateReplicaSetStatus."""
        return workload.validate_replica_status(
            new.get("status"), "status",
            ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"),
            ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"), "cannot be greater than readyReplicas")


def validate_replica_set_spec(spec: dict, opts: podspec.PodOptions) -> list[errors.Cause]:
    """upstream's ValidateReplicaSetSpec (whose empty-selector message says "deployment")."""
    causes = field_checks.non_negative(spec, "spec", "replicas", "minReadySeconds")
    causes += workload.validate_selector(spec, "spec", "deployment")
    selector = workload.parse_selector(spec.get("selector"))
    if selector is None:
        return causes + [errors.field_invalid("spec.selector", gorepr.label_selector(spec.get("selector")),
                                              "invalid label selector")]
    return causes + workload.validate_replicated_template(spec, "spec", selector, "ReplicaSet", opts)


def resource_type() -> ResourceType:
    return ResourceType(
        group="apps", version="v1", kind="ReplicaSet", plural="replicasets", singular="replicaset",
        namespaced=True, strategy=ReplicaSetStrategy(), short_names=("rs",), categories=("all",),
        has_status=True, scale=workload.SCALE, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Desired", lambda o: workload.spec_int(o, "replicas"), SPEC, "replicas",
                           type="integer"),
            columns.column("Current", lambda o: workload.status_int(o, "replicas"), STATUS, "replicas",
                           type="integer"),
            columns.column("Ready", lambda o: workload.status_int(o, "readyReplicas"), STATUS, "readyReplicas",
                           type="integer"),
            columns.age_column(),
            *workload.wide_columns(),
        ),
    )
