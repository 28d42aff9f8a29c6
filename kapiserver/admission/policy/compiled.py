"""A ValidatingAdmissionPolicy compiled once per change (upstream's policy hook): its
expressions, variables, matchConditions and parameter kind."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kapiserver.admission.cel.match_conditions import MatchConditions
from kapiserver.admission.resources import ResourceMapper
from kapiserver.cel.compiler import CompiledExpression, Declarations, compile_expression
from kapiserver.machinery.groupversion import GroupVersionKind
from kapiserver.registry.resource_type import ResourceType


@dataclass(eq=False, repr=False)
class Validation:
    expression: CompiledExpression
    message: str = ""
    message_expression: Optional[CompiledExpression] = None
    reason: str = ""


@dataclass(eq=False, repr=False)
class AuditAnnotation:
    key: str
    value_expression: CompiledExpression


@dataclass(eq=False, repr=False)
class CompiledPolicy:
    policy: dict
    name: str
    failure_policy: str
    match_constraints: Optional[dict]
    validations: list[Validation] = field(default_factory=list)
    audit_annotations: list[AuditAnnotation] = field(default_factory=list)
    variables: list[tuple[str, CompiledExpression]] = field(default_factory=list)
    match_conditions: Optional[MatchConditions] = None
    param_kind: Optional[GroupVersionKind] = None
    param_rtype: Optional[ResourceType] = None
    # a problem with the policy itself (its paramKind is not served): failurePolicy decides
    configuration_error: str = ""
    bindings: list[dict] = field(default_factory=list)


def compile_policy(policy: dict, mapper: ResourceMapper) -> CompiledPolicy:
    spec = policy.get("spec") or {}
    name = (policy.get("metadata") or {}).get("name") or ""
    compiled = CompiledPolicy(policy=policy, name=name, failure_policy=spec.get("failurePolicy") or "Fail",
                              match_constraints=spec.get("matchConstraints"))
    raw_param_kind = spec.get("paramKind")
    has_params = isinstance(raw_param_kind, dict)
    if isinstance(raw_param_kind, dict):
        group, _, version = (raw_param_kind.get("apiVersion") or "").rpartition("/")
        compiled.param_kind = GroupVersionKind(group, version, raw_param_kind.get("kind") or "")
        compiled.param_rtype = mapper.for_kind(group, version, compiled.param_kind.kind)
        if compiled.param_rtype is None:
            compiled.configuration_error = f"failed to find resource referenced by paramKind: '{compiled.param_kind}'"
    declared: list[str] = []
    variables = spec.get("variables") or []
    composition = bool(variables)
    for variable in variables:
        vname = (variable or {}).get("name") or ""
        compiled.variables.append((vname, compile_expression((variable or {}).get("expression") or "",
                                                             Declarations(has_params, True, tuple(declared),
                                                                          True))))
        declared.append(vname)
    decls = Declarations(has_params, True, tuple(declared), composition)
    message_decls = Declarations(has_params, False, tuple(declared), composition)
    for v in spec.get("validations") or []:
        v = v or {}
        message_expression = (v.get("messageExpression") or "")
        compiled.validations.append(Validation(
            expression=compile_expression(v.get("expression") or "", decls), message=v.get("message") or "",
            message_expression=compile_expression(message_expression, message_decls)
            if message_expression.strip() else None,
            reason=v.get("reason") or ""))
    for a in spec.get("auditAnnotations") or []:
        a = a or {}
        compiled.audit_annotations.append(AuditAnnotation(
            a.get("key") or "", compile_expression((a.get("valueExpression") or "").strip(), decls)))
    conditions = spec.get("matchConditions") or []
    if conditions:
        compiled.match_conditions = MatchConditions(conditions, Declarations(has_params, True, (), False),
                                                    compiled.failure_policy)
    return compiled
