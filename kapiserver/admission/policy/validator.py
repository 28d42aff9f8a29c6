"""Evaluating one policy for one binding and one parameter object (upstream's validator).

Each validation yields a decision: admit, or deny with a message (the
messageExpression's result, else ``message``, else ``failed expression:
<expression>``) and a reason.  An expression that fails to evaluate denies
under ``failurePolicy: Fail`` and admits under ``Ignore``.  Audit annotations
are evaluated too: a string is published, null or "" is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from kapiserver.admission.cel.evaluation import (MAX_MESSAGE_LENGTH, RUNTIME_BUDGET, BudgetExceeded, Evaluator,
                                                 Inputs)
from kapiserver.admission.policy.compiled import CompiledPolicy

ADMIT, DENY = "Admit", "Deny"


@dataclass
class Decision:
    action: str
    message: str = ""
    reason: str = ""
    # the decision comes from an evaluation error, not from a false expression
    error: bool = False
    index: int = 0


@dataclass
class AnnotationResult:
    key: str
    value: Optional[str] = None  # None: nothing to publish
    error: str = ""


@dataclass
class ValidateResult:
    decisions: list[Decision] = field(default_factory=list)
    annotations: list[AnnotationResult] = field(default_factory=list)


def _for_error(policy: CompiledPolicy, message: str, index: int = 0) -> Decision:
    if policy.failure_policy == "Ignore":
        return Decision(ADMIT, message, error=True, index=index)
    return Decision(DENY, message, error=True, index=index)


async def validate(policy: CompiledPolicy, inputs: Inputs) -> ValidateResult:
    """The decisions of every validation (and the audit annotations) for ``inputs``."""
    if policy.match_conditions:
        matched = await policy.match_conditions.match(inputs)
        if matched.error:
            return ValidateResult([_for_error(policy, matched.error)])
        if not matched.matches:
            return ValidateResult()
    evaluator = Evaluator(inputs, RUNTIME_BUDGET, policy.variables)
    out = ValidateResult()
    try:
        for index, validation in enumerate(policy.validations):
            result = await evaluator.evaluate(validation.expression)
            if result.error:
                out.decisions.append(_for_error(policy, result.error, index))
                continue
            if result.value is True:
                out.decisions.append(Decision(ADMIT, index=index))
                continue
            message = ""
            if validation.message_expression is not None:
                # messageExpression runs without the authorizer, on what is left of the budget
                shown = await evaluator.evaluate(validation.message_expression)
                if not shown.error and isinstance(shown.value, str):
                    text = shown.value.strip()
                    if len(text) <= MAX_MESSAGE_LENGTH and "\n" not in text:
                        message = text
            if not message and validation.message.strip():
                message = validation.message.strip()
            if not message:
                message = f"failed expression: {validation.expression.source.strip()}"
            out.decisions.append(Decision(DENY, message, validation.reason or "Invalid", index=index))
    except BudgetExceeded as e:
        return ValidateResult([_for_error(policy, str(e))])
    annotations = Evaluator(inputs, RUNTIME_BUDGET, policy.variables)
    try:
        for annotation in policy.audit_annotations:
            result = await annotations.evaluate(annotation.value_expression)
            if result.error:
                if policy.failure_policy != "Ignore":
                    out.annotations.append(AnnotationResult(annotation.key, error=result.error))
                continue
            if result.value is None:
                continue
            if not isinstance(result.value, str):
                out.annotations.append(AnnotationResult(annotation.key, error=(
                    f"valueExpression '{annotation.value_expression.source}' resulted in unsupported return type: "
                    f"{type(result.value).__name__}. Return type must be either string or null.")))
                continue
            value = result.value.strip()
            if value:
                out.annotations.append(AnnotationResult(annotation.key, value))
    except BudgetExceeded as e:
        return ValidateResult([_for_error(policy, str(e))])
    return out
