"""ValidatingAdmissionPolicyBindings (cluster-scoped): which policy applies where, with which
parameters and actions."""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.apis.admissionregistration.validatingadmissionpolicies import default_match_resources
from kapiserver.apis.admissionregistration.webhookconfigurations import GROUP
from kapiserver.machinery import errors, labels
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding"


def param_ref_text(obj: dict) -> str:
    """upstream's printer: ``ns/name``, ``*/name`` (namespace unknown) or the selector."""
    ref = (obj.get("spec") or {}).get("paramRef")
    if not isinstance(ref, dict):
        return "<unset>"
    if ref.get("name"):
        return f"{ref.get('namespace') or '*'}/{ref['name']}"
    if ref.get("selector") is not None:
        try:
            return str(labels.selector_from_label_selector_dict(ref["selector"]))
        except errors.StatusError:
            return "<error>"
    return "<unset>"


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    tracks_generation = True
    allow_unconditional_update = False

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("matchResources"), dict):
            default_match_resources(spec["matchResources"])

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        from kapiserver.apis.admissionregistration import validation as v  # with the first write of the kind
        return v.validate_binding_spec(obj.get("spec") or {})


def resource_type() -> ResourceType:
    return ResourceType(
        group=GROUP, version="v1", kind="ValidatingAdmissionPolicyBinding",
        plural="validatingadmissionpolicybindings", singular="validatingadmissionpolicybinding", namespaced=False,
        strategy=ValidatingAdmissionPolicyBindingStrategy(), categories=("api-extensions",), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("PolicyName", lambda o: (o.get("spec") or {}).get("policyName") or "",
                           desc="PolicyName indicates the policy definition which the policy binding binded to"),
            columns.column("ParamRef", param_ref_text,
                           desc="ParamRef indicates the param resource which sets the configration param"),
            columns.age_column(),
        ),
    )
