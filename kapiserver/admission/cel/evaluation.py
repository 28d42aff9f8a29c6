"""Evaluating admission CEL expressions against one request (upstream's activation,
condition evaluation and variable composition).

Inputs are upstream's: ``object`` and ``oldObject`` (null when absent),
``request`` (the AdmissionRequest without its objects), ``namespaceObject``,
``params`` and the ``authorizer``.  A policy's ``variables`` are evaluated
lazily, once per request, when an expression reads them.

Cost is bounded as for CRD rules (cel/cost.py): an estimate
from the expression's shape and the actual sizes of its inputs, against
upstream's per-call limit and per-evaluation budget.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from kapiserver.admission.cel import authz
from kapiserver.cel import cost
from kapiserver.cel.compiler import (AUTHORIZER, NAMESPACE, OBJECT, OLD_OBJECT, PARAMS, REQUEST, VARIABLES,
                                     CompiledExpression, functions)
from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.registry.admission import Attributes

if TYPE_CHECKING:
    from kapiserver.machinery.cel_runtime import cel

# The engine logs every failing function call (an authorization check still pending is
# one); failures are reported through the evaluation's result instead.
_engine_log = logging.getLogger("cel")
_engine_log.addHandler(logging.NullHandler())
_engine_log.propagate = False

# upstream's celconfig
PER_CALL_LIMIT = cost.PER_CALL_LIMIT
RUNTIME_BUDGET = cost.RUNTIME_BUDGET
RUNTIME_BUDGET_MATCH_CONDITIONS = 2_500_000
MAX_MESSAGE_LENGTH = 5 * 1024  # MaxEvaluatedMessageExpressionSizeBytes
OUT_OF_BUDGET = "validation failed due to running out of cost budget, no further validation rules will be run"


class BudgetExceeded(Exception):
    """The evaluation budget is spent: no further expression runs (upstream's ErrOutOfBudget)."""

    def __str__(self) -> str:
        return OUT_OF_BUDGET


@dataclass
class Result:
    value: Any = None
    # upstream's error detail ("expression '...' resulted in error: ..."), "" on success
    error: str = ""


def error_text(e: BaseException) -> str:
    """An engine failure worded as cel-go's evaluation errors."""
    if isinstance(e, KeyError):
        return f"no such key: {e.args[0] if e.args else ''}"
    if isinstance(e, ZeroDivisionError):
        return "division by zero"
    text = str(e)
    m = re.search(r"Python function call failed: \w+: (.*?)(?:\. Check function arguments.*)?$", text, re.S)
    if m:
        text = m.group(1)
        if text.lower().startswith("no such overload"):
            return "no such overload"
        return text
    if isinstance(e, TypeError) or text.lower().startswith("no such overload"):
        return "no such overload"
    return text.split(". Check that", 1)[0].split(". CEL does not coerce", 1)[0]


def request_value(attrs: Attributes, resource: GroupVersionResource, kind: GroupVersionKind) -> dict:
    """The ``request`` variable: upstream's CreateAdmissionRequest (no uid, no objects)."""
    user = attrs.user
    user_info: dict = {}
    if user is not None:
        user_info = {"username": user.name, "groups": list(user.groups)}
        if user.uid:
            user_info["uid"] = user.uid
        user_info["extra"] = {k: list(v) for k, v in (user.extra or {}).items()}
    out = {"kind": kind.to_dict(), "resource": resource.to_dict(), "subResource": attrs.subresource,
           "requestKind": attrs.gvk.to_dict(), "requestResource": attrs.resource.to_dict(),
           "requestSubResource": attrs.subresource, "name": attrs.name, "namespace": attrs.namespace,
           "operation": attrs.operation, "userInfo": user_info, "dryRun": attrs.dry_run}
    if attrs.options is not None:
        out["options"] = attrs.options
    return out


_NAMESPACE_METADATA = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                       "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                       "annotations", "finalizers")


def namespace_value(namespace: Optional[dict]) -> Optional[dict]:
    """The ``namespaceObject`` variable: the namespace's spec, status and most of its metadata."""
    if namespace is None:
        return None
    md = namespace.get("metadata") or {}
    return {"metadata": {k: md[k] for k in _NAMESPACE_METADATA if k in md},
            "spec": namespace.get("spec") or {}, "status": namespace.get("status") or {}}


@dataclass
class Inputs:
    object: Any = None
    old_object: Any = None
    request: Optional[dict] = None
    namespace_object: Any = None
    params: Any = None
    authz: Optional[authz.AuthzSession] = None
    authorizer: Optional[dict] = None

    def variables(self) -> dict:
        return {OBJECT: self.object, OLD_OBJECT: self.old_object, REQUEST: self.request,
                NAMESPACE: self.namespace_object, PARAMS: self.params}


_INPUT_NAMES = frozenset((OBJECT, OLD_OBJECT, REQUEST, NAMESPACE, PARAMS))


class Evaluator:
    """Evaluates expressions for one request against one budget; ``composition`` is the
    policy's variables (name -> compiled expression, in declaration order)."""

    def __init__(self, inputs: Inputs, budget: int = RUNTIME_BUDGET,
                 composition: Optional[Sequence[tuple[str, CompiledExpression]]] = None) -> None:
        self.inputs = inputs
        self.remaining = budget
        self._composition = dict(composition or ())
        self._variable_values: dict[str, Result] = {}
        self._size: Optional[int] = None
        # one engine context per request, and one with the authorizer's functions when an
        # expression uses it; inputs are added when an expression first reads them (converting
        # an input into the engine's values is the costly part of an evaluation)
        self._contexts: dict[bool, tuple[cel.Context, set[str]]] = {}

    def _context_for(self, expr: CompiledExpression, authorizer: bool) -> cel.Context:
        found = self._contexts.get(authorizer)
        if found is None:
            from kapiserver.machinery.cel_runtime import cel  # loaded once the first expression compiled
            if authorizer:
                assert self.inputs.authz is not None
                context = cel.Context(functions=self.inputs.authz.functions(functions()))
                context.add_variable(AUTHORIZER, self.inputs.authorizer)
            else:
                context = cel.Context(functions=functions())
            found = self._contexts[authorizer] = (context, set())
        context, added = found
        missing = (expr.uses & _INPUT_NAMES) - added
        if missing:
            values = self.inputs.variables()
            for name in missing:
                context.add_variable(name, values[name])
            added |= missing
        return context

    def _input_size(self) -> int:
        if self._size is None:
            self._size = max(cost.max_actual_size(v, PER_CALL_LIMIT)
                             for v in (self.inputs.object, self.inputs.old_object, self.inputs.params))
        return self._size

    def _charge(self, expr: CompiledExpression) -> bool:
        """Take the expression's estimated cost from the budget; False when over the per-call limit."""
        estimated = cost.estimate(expr.ops, expr.depth, self._input_size()) if expr.depth else expr.ops
        if estimated > PER_CALL_LIMIT:
            return False
        if estimated > self.remaining:
            raise BudgetExceeded()
        self.remaining -= estimated
        return True

    async def _variable(self, name: str) -> Result:
        found = self._variable_values.get(name)
        if found is not None:
            return found
        expr = self._composition.get(name)
        if expr is None:
            result = Result(error=f'composited variable "{name}" is not defined')
        elif expr.error:
            result = Result(error=f'composited variable "{name}" fails to compile: {expr.error}')
        else:
            raw = await self._run(expr)
            result = Result(error=f'composited variable "{name}" fails to evaluate: {raw.error}') if raw.error \
                else raw
        self._variable_values[name] = result
        return result

    async def evaluate(self, expr: CompiledExpression) -> Result:
        """Evaluate one expression: its value, or upstream's error detail.  Raises BudgetExceeded."""
        if expr.error:
            return Result(error=f"compilation error: {expr.error}")
        raw = await self._run(expr)
        if raw.error:
            return Result(error=f"expression '{expr.source}' resulted in error: {raw.error}")
        return raw

    async def _run(self, expr: CompiledExpression) -> Result:
        if not self._charge(expr):
            return Result(error="operation cancelled: actual cost limit exceeded")
        values: Optional[dict] = None
        if expr.variables:
            values = {}
            for name in expr.variables:
                got = await self._variable(name)
                if got.error:
                    return Result(error=got.error)
                values[name] = got.value
        elif VARIABLES in expr.uses:
            values = {}
        session = self.inputs.authz if expr.uses_authorizer else None
        context = self._context_for(expr, session is not None)
        if values is not None:
            context.add_variable(VARIABLES, values)
        if session is None:
            try:
                return Result(expr.program.execute(context))
            except Exception as e:  # evaluation failures surface as exceptions of the engine
                return Result(error=error_text(e))
        for _ in range(authz.MAX_ROUNDS):
            try:
                value: Any = expr.program.execute(context)
                failure: Optional[BaseException] = None
            except Exception as e:
                value, failure = None, e
            if not session.pending:
                return Result(error=error_text(failure)) if failure is not None else Result(value)
            await session.resolve()
        return Result(error="too many authorization checks")
