"""IngressClasses (networking.k8s.io/v1, cluster-scoped): a domain-prefixed,
immutable ``spec.controller``; parameters default to cluster scope."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.networking.v1.IngressClass"
SPEC = "io.k8s.api.networking.v1.IngressClassSpec"
MAX_CONTROLLER_LENGTH = 250
SCOPES = ["Cluster", "Namespace"]


def _controller(value: str) -> list[errors.Cause]:
    """Upstream's IsDomainPrefixedPath on spec.controller."""
    path = "spec.controller"
    if not value:
        return [errors.field_required(path)]
    if len(value) > MAX_CONTROLLER_LENGTH:
        return [errors.field_too_long(path, MAX_CONTROLLER_LENGTH)]
    domain, _, rest = value.partition("/")
    if not rest:
        return [errors.field_invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    return [errors.field_invalid(path, domain, p) for p in validation.is_dns1123_subdomain(domain)]


class IngressClassStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        params = columns.get_path(obj, "spec", "parameters")
        if isinstance(params, dict) and not params.get("scope"):
            params["scope"] = "Cluster"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = _controller(spec.get("controller") or "")
        params = spec.get("parameters")
        if isinstance(params, dict):
            for key in ("kind", "name"):
                if not params.get(key):
                    causes.append(errors.field_required(f"spec.parameters.{key}"))
            scope = params.get("scope")
            causes.extend(field_checks.one_of(scope, "spec.parameters.scope", SCOPES, required=True))
            if scope == "Namespace" and not params.get("namespace"):
                causes.append(errors.field_required("spec.parameters.namespace",
                                                    "`parameters.scope` is set to 'Namespace'"))
            if scope == "Cluster" and params.get("namespace"):
                causes.append(errors.field_forbidden("spec.parameters.namespace",
                                                     "`parameters.scope` is set to 'Cluster'"))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return self.validate(rtype, new) + field_checks.immutable(
            columns.get_path(new, "spec", "controller"), columns.get_path(old, "spec", "controller"),
            "spec.controller")


def _parameters(obj: dict) -> str:
    params = columns.get_path(obj, "spec", "parameters")
    if not isinstance(params, dict):
        return "<none>"
    kind = params.get("kind") or ""
    if params.get("apiGroup"):
        kind += "." + params["apiGroup"]
    return f"{kind}/{params.get('name') or ''}"


def resource_type() -> ResourceType:
    return ResourceType(
        group="networking.k8s.io", version="v1", kind="IngressClass", plural="ingressclasses",
        singular="ingressclass", namespaced=False, strategy=IngressClassStrategy(), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Controller", lambda o: columns.get_path(o, "spec", "controller", default=""),
                           SPEC, "controller"),
            columns.column("Parameters", _parameters, SPEC, "parameters"),
            columns.age_column(),
        ),
    )
