"""IngressClasses (networking.k8s.io/v1, cluster-scoped): a domain-prefixed,
immutable ``spec.controller``; parameters default to cluster scope."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.networking import ingresses
from kapiserver.machinery import errors, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.networking.v1.IngressClass"
SPEC = "io.k8s.api.networking.v1.IngressClassSpec"
MAX_CONTROLLER_LENGTH = 250
SCOPES = ["Cluster", "Namespace"]


def validate_spec(spec: dict) -> list[errors.Cause]:
    """upstream's validateIngressClassSpec."""
    controller = str(spec.get("controller") or "")
    causes = []
    if len(controller) > MAX_CONTROLLER_LENGTH:
        causes.append(errors.field_too_long("spec.controller", MAX_CONTROLLER_LENGTH))
    causes += validation.is_domain_prefixed_path("spec.controller", controller)
    params = spec.get("parameters")
    if isinstance(params, dict):
        causes += ingresses.typed_local_object_reference(params, "spec.parameters")
        if params.get("scope") is None:
            return causes + [errors.field_required("spec.parameters.scope")]
        scope = params.get("scope")
        if scope not in SCOPES:
            causes.append(errors.field_not_supported("spec.parameters.scope", scope, SCOPES))
        elif scope == "Namespace":
            namespace = params.get("namespace")
            if namespace is None:
                causes.append(errors.field_required("spec.parameters.namespace",
                                                    "`parameters.scope` is set to 'Namespace'"))
            else:
                causes.extend(errors.field_invalid("spec.parameters.namespace", namespace, m)
                              for m in validation.is_dns1123_label(str(namespace)))
        elif params.get("namespace") is not None:
            causes.append(errors.field_forbidden("spec.parameters.namespace", "`parameters.scope` is set to 'Cluster'"))
    return causes


class IngressClassStrategy(Strategy):
    tracks_generation = True

    def default(self, rtype: ResourceType, obj: dict) -> None:
        params = columns.get_path(obj, "spec", "parameters")
        if isinstance(params, dict) and not params.get("scope"):
            params["scope"] = "Cluster"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateIngressClass."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_spec(spec)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateIngressClassUpdate: the controller is fixed."""
        return field_checks.immutable(
            columns.get_path(new, "spec", "controller"), columns.get_path(old, "spec", "controller"),
            "spec.controller") + self.validate(rtype, new)


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
