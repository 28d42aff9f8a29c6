"""RuntimeClasses (node.k8s.io/v1, cluster-scoped): a handler name (a DNS label,
fixed after create), optional pod overhead and scheduling constraints.  Nothing
runs pods here, so the class only describes; the RuntimeClass admission plugin
(which adds overhead to pods) is not applied."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.node.v1.RuntimeClass"


class RuntimeClassStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        handler = obj.get("handler") if isinstance(obj.get("handler"), str) else ""
        causes = [errors.field_invalid("handler", handler, p) for p in validation.name_is_dns_label(handler)]
        overhead = obj.get("overhead")
        if isinstance(overhead, dict):
            causes += podspec.validate_resource_list(overhead.get("podFixed"), "overhead.podFixed")
        scheduling = obj.get("scheduling")
        if isinstance(scheduling, dict):
            if scheduling.get("nodeSelector") is not None:
                causes += validation.validate_labels(scheduling["nodeSelector"], "scheduling.nodeSelector")
            seen = set()
            for i, t in enumerate(scheduling.get("tolerations") or []):
                if not isinstance(t, dict):
                    continue
                key = (t.get("key", ""), t.get("operator", ""), t.get("value", ""), t.get("effect", ""))
                if key in seen:
                    causes.append(errors.field_duplicate(f"scheduling.tolerations[{i}]", t))
                seen.add(key)
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return self.validate(rtype, new) + field_checks.immutable(new.get("handler"), old.get("handler"), "handler")


def resource_type() -> ResourceType:
    return ResourceType(
        group="node.k8s.io", version="v1", kind="RuntimeClass", plural="runtimeclasses", singular="runtimeclass",
        namespaced=False, strategy=RuntimeClassStrategy(), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            # upstream describes this column with ObjectMeta's (missing) "handler" doc: empty
            columns.column("Handler", lambda o: o.get("handler", ""), desc=""),
            columns.age_column(),
        ),
    )
