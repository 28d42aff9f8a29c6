"""ReplicaSets (apps/v1): replicas default, selector/template checks, scale, upstream's columns."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.apis.apps.deployments import validate_replicated_template
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.apps.v1.ReplicaSet"
SPEC = "io.k8s.api.apps.v1.ReplicaSetSpec"
STATUS = "io.k8s.api.apps.v1.ReplicaSetStatus"


class ReplicaSetStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            workload.default_template(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = workload.non_negative(spec, "spec", "replicas", "minReadySeconds")
        # upstream's ReplicaSet validation reuses the Deployment wording for an empty selector
        return causes + validate_replicated_template(spec, "spec", "deployment")

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return self.validate(rtype, new) + field_checks.immutable(
            (new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector"), "spec.selector",
            workload.go_label_selector)


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
