"""RuntimeClasses (node.k8s.io/v1, cluster-scoped): a handler name (a DNS label,
fixed after create), optional pod overhead and scheduling constraints.  Nothing
runs pods here, so the class only describes; the RuntimeClass admission plugin
(kapiserver/admission/runtime_class.py) adds its overhead and scheduling to pods."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import resources, scheduling
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_str
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.node.v1.RuntimeClass"


def _go_toleration(t: dict) -> gorepr.GoRepr:
    return gorepr.struct("core.Toleration", (
        ("Key", gorepr.quote(t.get("key") or "")), ("Operator", gorepr.quote(t.get("operator") or "")),
        ("Value", gorepr.quote(t.get("value") or "")), ("Effect", gorepr.quote(t.get("effect") or "")),
        ("TolerationSeconds", gorepr.pointer(t.get("tolerationSeconds"), "int64"))))


def validate_runtime_class(obj: dict) -> list[errors.Cause]:
    """upstream's ValidateRuntimeClass (the name, a DNS subdomain, is the Store's check)."""
    handler = as_str(obj.get("handler"))
    causes = field_checks.kube_object_meta(obj)
    causes += [errors.field_invalid("handler", handler, m) for m in validation.name_is_dns_label(handler)]
    overhead = obj.get("overhead")
    if isinstance(overhead, dict):
        # upstream reuses the container resource checks on {limits: podFixed}: paths say overhead.limits
        causes += resources.validate_resource_requirements({"limits": overhead.get("podFixed")}, "overhead")
    rules = obj.get("scheduling")
    if isinstance(rules, dict):
        if rules.get("nodeSelector") is not None:
            causes += validation.validate_labels(rules["nodeSelector"], "scheduling.nodeSelector")
        tolerations = [t for t in rules.get("tolerations") or () if isinstance(t, dict)]
        # sic: upstream appends "tolerations" twice to the path of these checks
        causes += scheduling.validate_tolerations(tolerations, "scheduling.tolerations.tolerations")
        seen = set()
        for i, t in enumerate(tolerations):
            key = tuple(t.get(k) or "" for k in ("key", "operator", "value", "effect"))
            if key in seen:
                causes.append(errors.field_duplicate(f"scheduling.tolerations[{i}]", _go_toleration(t)))
            seen.add(key)
    return causes


class RuntimeClassStrategy(Strategy):
    allow_unconditional_update = False  # upstream's AllowUnconditionalUpdate: a PUT names the version it replaces
    allow_create_on_update = True  # ... or creates one (AllowCreateOnUpdate)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_runtime_class(obj)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return validate_runtime_class(new) + field_checks.immutable(new.get("handler"), old.get("handler"), "handler")


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
