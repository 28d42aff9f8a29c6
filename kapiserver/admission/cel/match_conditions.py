"""matchConditions of webhooks and policies (upstream's matchconditions.Matcher).

Every condition must be true for the webhook or policy to apply; the first
false one skips it.  Evaluation errors follow the failure policy: with
``Fail`` they refuse the request (unless a condition is false), with
``Ignore`` the webhook or policy is skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kapiserver.admission.cel.evaluation import RUNTIME_BUDGET_MATCH_CONDITIONS, BudgetExceeded, Evaluator, Inputs
from kapiserver.cel.compiler import CompiledExpression, Declarations, compile_expression


@dataclass
class MatchResult:
    matches: bool
    error: str = ""
    failed_condition: str = ""


def aggregate(messages: Sequence[str]) -> str:
    """Upstream's utilerrors.NewAggregate(...).Error()."""
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


class MatchConditions:
    def __init__(self, conditions: Sequence[dict], decls: Declarations, failure_policy: str) -> None:
        self.conditions: list[tuple[str, CompiledExpression]] = [
            (c.get("name") or "", compile_expression(c.get("expression") or "", decls)) for c in conditions]
        self.fail = failure_policy != "Ignore"

    def __bool__(self) -> bool:
        return bool(self.conditions)

    async def match(self, inputs: Inputs) -> MatchResult:
        evaluator = Evaluator(inputs, RUNTIME_BUDGET_MATCH_CONDITIONS)
        problems: list[str] = []
        for name, expr in self.conditions:
            try:
                result = await evaluator.evaluate(expr)
            except BudgetExceeded as e:
                return MatchResult(False, str(e) if self.fail else "")
            if result.error:
                problems.append(result.error)
            elif result.value is False:
                return MatchResult(False, failed_condition=name)
            elif result.value is not True:
                problems.append(f"expression '{expr.source}' resulted in error: no such overload")
        if problems:
            return MatchResult(False, aggregate(problems) if self.fail else "")
        return MatchResult(True)
