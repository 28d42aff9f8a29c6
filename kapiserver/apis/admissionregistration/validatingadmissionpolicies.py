"""ValidatingAdmissionPolicies (cluster-scoped, with a status subresource).

The spec's CEL expressions are compiled when the policy is written (a
compile error is a 422, as upstream); ``status.typeChecking`` is written by
the policy status controller (controllers/validating_admission_policy_status.py).
"""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.apis.admissionregistration.webhookconfigurations import GROUP, default_rule
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import RESET_OBJECT_META_FOR_STATUS, ResourceType, Strategy

SCHEMA = "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy"


def default_match_resources(match: dict) -> None:
    """upstream's SetDefaults_MatchResources (and the rules' scope)."""
    match.setdefault("matchPolicy", "Equivalent")
    if match.get("namespaceSelector") is None:
        match["namespaceSelector"] = {}
    if match.get("objectSelector") is None:
        match["objectSelector"] = {}
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or ():
            if isinstance(rule, dict):
                default_rule(rule)


def param_kind_text(obj: dict) -> str:
    kind = (obj.get("spec") or {}).get("paramKind")
    if not isinstance(kind, dict):
        return "<unset>"
    return f"{kind.get('apiVersion', '')}/{kind.get('kind', '')}"


class ValidatingAdmissionPolicyStrategy(Strategy):
    tracks_generation = True
    allow_unconditional_update = False
    status_fixed_metadata = RESET_OBJECT_META_FOR_STATUS

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        obj.pop("status", None)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("failurePolicy", "Fail")
        if isinstance(spec.get("matchConstraints"), dict):
            default_match_resources(spec["matchConstraints"])

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        from kapiserver.apis.admissionregistration import validation as v  # with the first write of the kind
        name = (obj.get("metadata") or {}).get("name") or ""
        return v.validate_policy_spec(name, obj.get("spec") or {}, v.Options())

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        from kapiserver.apis.admissionregistration import validation as v
        name = (new.get("metadata") or {}).get("name") or ""
        return (v.validate_policy_spec(name, new.get("spec") or {}, v.policy_update_options(new, old))
                + v.validate_policy_status(new.get("status") or {}))

    def prepare_for_status_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_status_update(rtype, new, old)
        if "spec" in old:
            new["spec"] = old["spec"]


def resource_type() -> ResourceType:
    return ResourceType(
        group=GROUP, version="v1", kind="ValidatingAdmissionPolicy", plural="validatingadmissionpolicies",
        singular="validatingadmissionpolicy", namespaced=False, strategy=ValidatingAdmissionPolicyStrategy(),
        categories=("api-extensions",), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Validations", lambda o: len((o.get("spec") or {}).get("validations") or []),
                           type="integer",
                           desc="Validations indicates the number of validation rules defined in this configuration"),
            columns.column("ParamKind", param_kind_text,
                           desc="ParamKind specifies the kind of resources used to parameterize this policy"),
            columns.age_column(),
        ),
    )
