"""Compiling admission CEL expressions (webhook matchConditions, ValidatingAdmissionPolicy).

The variables an expression may use are upstream's: ``object``, ``oldObject``,
``request``, ``namespaceObject``, plus ``params`` when the policy has a
paramKind, ``authorizer`` where upstream declares it and ``variables.<name>``
for the policy's variables declared before.  Anything else is upstream's
``undeclared reference`` compile error.

The engine (cel-rust) has no optional field syntax, so ``a.?b`` and
``a[?k]`` are rewritten to calls of ``optSelect``/``optIndex`` before
compiling; both yield CEL optionals as upstream's syntax does.

Upstream's ``k8s.io/apiserver/pkg/admission/plugin/cel``: admission compiles
with it, and so does the validation of the admissionregistration kinds
(``apis/admissionregistration/validation.py``), which sits below admission.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

from kapiserver.cel import cost
from kapiserver.cel.references import BOUND_VARS, OPERATOR, compile_error, ref_error

OBJECT, OLD_OBJECT, REQUEST, NAMESPACE, PARAMS, AUTHORIZER, VARIABLES = (
    "object", "oldObject", "request", "namespaceObject", "params", "authorizer", "variables")
AUTHZ_FUNCTIONS = frozenset(("path", "group", "serviceAccount", "resource", "subresource", "namespace", "name",
                             "fieldSelector", "labelSelector", "check", "allowed", "reason", "errored", "error"))
_VARIABLE_REF = re.compile(r"(?<![\w.])variables\s*\.\s*([A-Za-z_]\w*)")


# The engine, and the function library built on it, are imported where they are
# used, so they load with the first expression compiled (cel/library.py).
def _opt_select(target: Any, name: str) -> Any:
    from kapiserver.machinery.cel_runtime import cel
    if isinstance(target, cel.OptionalValue):
        if not target.has_value():
            return target
        target = target.value()
    if isinstance(target, dict) and name in target:
        return cel.OptionalValue.of(target[name])
    if isinstance(target, dict):
        return cel.OptionalValue.none()
    raise TypeError("no such overload")


def _opt_index(target: Any, key: Any) -> Any:
    from kapiserver.machinery.cel_runtime import cel
    if isinstance(target, cel.OptionalValue):
        if not target.has_value():
            return target
        target = target.value()
    if isinstance(target, dict):
        return cel.OptionalValue.of(target[key]) if key in target else cel.OptionalValue.none()
    if isinstance(target, list) and isinstance(key, int) and not isinstance(key, bool):
        return cel.OptionalValue.of(target[key]) if 0 <= key < len(target) else cel.OptionalValue.none()
    raise TypeError("no such overload")


@functools.cache
def functions() -> dict[str, Callable]:
    """The functions every admission expression may call (authorizer ones are bound per request)."""
    from kapiserver.cel import library
    return dict(library.functions(), optSelect=_opt_select, optIndex=_opt_index)


@functools.cache
def known_functions() -> frozenset[str]:
    from kapiserver.cel import library
    return library.known_functions() | {"optSelect", "optIndex"} | AUTHZ_FUNCTIONS


class Declarations(NamedTuple):
    """Which optional variables an environment declares (upstream's OptionalVariableDeclarations)."""

    has_params: bool = False
    has_authorizer: bool = False
    # names of the policy variables visible to the expression (composition)
    variables: tuple[str, ...] = ()
    composition: bool = False

    def names(self) -> set[str]:
        out = {OBJECT, OLD_OBJECT, REQUEST, NAMESPACE}
        if self.has_params:
            out.add(PARAMS)
        if self.has_authorizer:
            out.add(AUTHORIZER)
        if self.composition:
            out.add(VARIABLES)
        return out


@dataclass(frozen=True)
class CompiledExpression:
    source: str
    program: Any = None
    # upstream's compile error detail ("compilation failed: ..."), "" when compiled
    error: str = ""
    uses: frozenset[str] = frozenset()
    # the composition variables the expression reads
    variables: tuple[str, ...] = ()
    ops: int = 1
    depth: int = 0
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def uses_authorizer(self) -> bool:
        return AUTHORIZER in self.uses


def rewrite_optional_syntax(source: str) -> str:
    """``a.?b`` -> ``a.optSelect("b")`` and ``a[?k]`` -> ``a.optIndex(k)`` outside string literals."""
    if ".?" not in source and "[?" not in source:
        return source
    out: list[str] = []
    i, n = 0, len(source)
    closers: list[bool] = []  # per open bracket: whether it was a [? rewritten to .optIndex(
    while i < n:
        c = source[i]
        if c in "'\"":
            quote = source[i:i + 3] if source[i:i + 3] in ("'''", '"""') else c
            j = i + len(quote)
            while j < n and source[j:j + len(quote)] != quote:
                j += 2 if source[j] == "\\" else 1
            j += len(quote)
            out.append(source[i:j])
            i = j
            continue
        if c == "." and source[i + 1:i + 2] == "?":
            m = re.match(r"\s*([A-Za-z_]\w*)", source[i + 2:])
            if m:
                out.append(f'.optSelect("{m.group(1)}")')
                i += 2 + m.end()
                continue
        if c == "[":
            if source[i + 1:i + 2] == "?":
                out.append(".optIndex(")
                closers.append(True)
                i += 2
                continue
            closers.append(False)
        elif c == "]" and closers:
            if closers.pop():
                out.append(")")
                i += 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _check_references(source: str, program: Any, decls: Declarations) -> Optional[str]:
    from kapiserver.cel import library
    refs = program.references()
    bound = {name for m in BOUND_VARS.finditer(source) for name in m.groups() if name}
    allowed = decls.names() | library.NAMESPACES | bound
    for name in refs["variables"]:
        if name not in allowed:
            return ref_error(source, name)
    for name in refs["functions"]:
        if not OPERATOR.match(name) and name not in known_functions():
            return ref_error(source, name)
    if decls.composition:
        for m in _VARIABLE_REF.finditer(source):
            if m.group(1) not in decls.variables:
                offset = m.start(1) - 1
                line = source.count("\n", 0, offset) + 1
                col = offset - (source.rfind("\n", 0, offset) + 1) + 1
                text_line = source.splitlines()[line - 1]
                return (f"ERROR: <input>:{line}:{col}: undefined field '{m.group(1)}'\n"
                        f" | {text_line}\n | {'.' * (col - 1)}^")
    return None


def compile_expression(source: str, decls: Declarations) -> CompiledExpression:
    """Compile ``source``; a problem is returned in ``error``, never raised."""
    from kapiserver.machinery.cel_runtime import cel
    rewritten = rewrite_optional_syntax(source)
    try:
        program = cel.compile(rewritten)
    except Exception as e:  # the engine raises ValueError on parse errors
        return CompiledExpression(source, error="compilation failed: " + compile_error(rewritten, e))
    problem = _check_references(source, program, decls)
    if problem:
        return CompiledExpression(source, error="compilation failed: " + problem)
    refs = program.references()
    used = frozenset(refs["variables"])
    variables = tuple(dict.fromkeys(m.group(1) for m in _VARIABLE_REF.finditer(source))) \
        if decls.composition else ()
    return CompiledExpression(source, program, uses=used, variables=variables,
                              ops=max(1, len(refs["functions"])), depth=cost.comprehension_depth(source))
