"""CEL validation rules (``x-kubernetes-validations``) of CRD schemas.

``compile_rules`` walks a structural schema once, compiles every rule and
messageExpression and reports what upstream rejects at CRD write time
(compile errors, undeclared references, bad reasons/fieldPaths, transition
rules where old values cannot be correlated, estimated cost over budget).
``evaluate`` then checks an object (and, on update, its old version) and
returns upstream's field errors.  Compiled programs are immutable and every
evaluation builds its own context, so ``evaluate`` is thread-safe.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

from kapiserver.cel import cost
from kapiserver.cel.references import BOUND_VARS, OPERATOR, compile_error, ref_error
from kapiserver.machinery import errors, limits, regex
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.schema_paths import child, index, key

# The CEL engine (and our function library built on it) is imported on first
# use: its package pulls in a command-line stack worth ~170 ms of start-up,
# which a server whose CRDs have no validation rules should not pay.

REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")
MAX_MESSAGE_EXPRESSION_RESULT = 5 * 1024


class CompiledRule(NamedTuple):
    rule: str
    program: Any
    message: str = ""
    message_program: Any = None
    message_expression: str = ""
    reason: str = ""
    field_path: str = ""  # normalized, appended to the node path
    uses_old_self: bool = False
    optional_old_self: bool = False
    ops: int = 1
    depth: int = 0


@dataclass
class RuleNode:
    """The rules of one schema node, and the children that hold rules."""

    type: str = ""
    rules: list[CompiledRule] = field(default_factory=list)
    properties: dict[str, "RuleNode"] = field(default_factory=dict)
    additional: Optional["RuleNode"] = None
    items: Optional["RuleNode"] = None
    list_map_keys: tuple[str, ...] = ()
    map_type: str = ""

    def empty(self) -> bool:
        return not (self.rules or self.properties or self.additional or self.items)


@dataclass
class CompiledRules:
    """A schema's compiled rules; ``errors`` lists what is wrong with the rules themselves."""

    root: Optional[RuleNode]
    errors: list[Cause] = field(default_factory=list)


def compile_rules(schema: Optional[dict], path: str = "") -> CompiledRules:
    """Compile every ``x-kubernetes-validations`` rule of ``schema``; ``path`` names the schema for errors."""
    errs: list[Cause] = []
    root = _compile_node(schema or {}, path, False, "", errs) if schema else None
    return CompiledRules(root if root is not None and not root.empty() else None, errs)


def _compile_node(s: dict, path: str, uncorrelatable: bool, uncorrelatable_path: str,
                  errs: list[Cause]) -> Optional[RuleNode]:
    node = RuleNode(type=s.get("type", ""), list_map_keys=tuple(s.get("x-kubernetes-list-map-keys") or ()),
                    map_type=s.get("x-kubernetes-map-type", ""))
    for j, rule in enumerate(s.get("x-kubernetes-validations") or ()):
        compiled = _compile_rule(rule, s, index(child(path, "x-kubernetes-validations"), j),
                                 uncorrelatable, uncorrelatable_path, errs)
        if compiled is not None:
            node.rules.append(compiled)
    for name, sub in (s.get("properties") or {}).items():
        if isinstance(sub, dict):
            got = _compile_node(sub, key(child(path, "properties"), name), uncorrelatable, uncorrelatable_path, errs)
            if got is not None:
                node.properties[name] = got
    additional = s.get("additionalProperties")
    if isinstance(additional, dict):
        node.additional = _compile_node(additional, child(path, "additionalProperties"), uncorrelatable,
                                        uncorrelatable_path, errs)
    items = s.get("items")
    if isinstance(items, dict):
        lost = uncorrelatable or s.get("x-kubernetes-list-type") != "map"
        node.items = _compile_node(items, child(path, "items"), lost,
                                   uncorrelatable_path if uncorrelatable else path, errs)
    return None if node.empty() else node


def _undeclared(source: str, program: Any, allow_old_self: bool) -> Optional[str]:
    from kapiserver.cel import library
    refs = program.references()
    bound = {name for m in BOUND_VARS.finditer(source) for name in m.groups() if name}
    allowed = {"self"} | library.NAMESPACES | bound | ({"oldSelf"} if allow_old_self else set())
    for name in refs["variables"]:
        if name not in allowed:
            return ref_error(source, name)
    for name in refs["functions"]:
        if not OPERATOR.match(name) and name not in library.known_functions():
            return ref_error(source, name)
    return None


_STRING_LITERAL = re.compile(r"""[rR]?('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_OPERATOR_CHARS = re.compile(r"[-+*/%<>=!&|?(\[{,]")
_REGEX_CALL = re.compile(r"""\.(?:matches|find|findAll)\(\s*([rR]?)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def _guard(source: str) -> Optional[str]:
    """Why an expression is refused before the engine sees it: too long, too many operators, a bad regex.

    cel-rust recurses over the expression tree, so tens of thousands of
    chained operators overflow its stack; regex literals must compile with
    RE2 (Go's regexp), as upstream's CEL library requires.
    """
    if len(source) > limits.MAX_CEL_RULE_LENGTH:
        return f"expression size {len(source)} exceeds the limit of {limits.MAX_CEL_RULE_LENGTH} characters"
    operators = len(_OPERATOR_CHARS.findall(_STRING_LITERAL.sub("''", source)))
    if operators > limits.MAX_CEL_OPERATORS:
        return (f"expression has {operators} operators, more than the limit of {limits.MAX_CEL_OPERATORS} "
                "(try simplifying the rule)")
    for m in _REGEX_CALL.finditer(source):
        raw, literal = m.group(1), m.group(2)[1:-1]
        if not raw:
            try:
                literal = codecs.decode(literal, "unicode_escape")
            except (UnicodeDecodeError, ValueError):
                continue
        problem = regex.problem(literal)
        if problem is not None:
            return f"invalid regex {literal!r}: {problem}"
    return None


def _compile_expression(source: str, allow_old_self: bool = True) -> tuple[Any, Optional[str]]:
    from kapiserver.machinery.cel_runtime import cel
    problem = _guard(source)
    if problem is not None:
        return None, problem
    try:
        program = cel.compile(source)
    except Exception as e:  # the engine raises ValueError on parse errors
        return None, compile_error(source, e)
    problem = _undeclared(source, program, allow_old_self)
    return (None, problem) if problem else (program, None)


def _compile_rule(rule: dict, s: dict, rpath: str, uncorrelatable: bool, uncorrelatable_path: str,
                  errs: list[Cause]) -> Optional[CompiledRule]:
    source = (rule.get("rule") or "")
    ok = True
    if not source.strip():
        errs.append(errors.field_required(child(rpath, "rule"), "rule is not specified"))
        return None
    program, problem = _compile_expression(source)
    if problem:
        errs.append(errors.field_invalid(child(rpath, "rule"), source, f"compilation failed: {problem}"))
        return None
    uses_old_self = "oldSelf" in program.references()["variables"]
    if uses_old_self and uncorrelatable:
        errs.append(errors.field_invalid(child(rpath, "rule"), source,
                                         "oldSelf cannot be used on the uncorrelatable portion of the schema "
                                         f"within {uncorrelatable_path}"))
        ok = False
    optional_old_self = bool(rule.get("optionalOldSelf"))
    if optional_old_self and not uses_old_self:
        errs.append(errors.field_invalid(child(rpath, "optionalOldSelf"), True,
                                         "may not be set if oldSelf is not used in rule"))
        ok = False
    message = rule.get("message") or ""
    if "message" in rule and message and not message.strip():
        errs.append(errors.field_invalid(child(rpath, "message"), message, "message must be non-empty if specified"))
        ok = False
    elif "\n" in message:
        errs.append(errors.field_invalid(child(rpath, "message"), message, "message must not contain line breaks"))
        ok = False
    message_expression = rule.get("messageExpression") or ""
    message_program = None
    if message_expression:
        message_program, problem = _compile_expression(message_expression)
        if problem:
            errs.append(errors.field_invalid(child(rpath, "messageExpression"), message_expression,
                                             f"messageExpression compilation failed: {problem}"))
            ok = False
    reason = rule.get("reason") or ""
    if reason and reason not in REASONS:
        errs.append(errors.field_not_supported(child(rpath, "reason"), reason, list(REASONS)))
        ok = False
    field_path = ""
    if rule.get("fieldPath"):
        field_path, problem = normalize_field_path(rule["fieldPath"], s)
        if problem:
            errs.append(errors.field_invalid(child(rpath, "fieldPath"), rule["fieldPath"], problem))
            ok = False
    ops = max(1, len(program.references()["functions"]))
    depth = cost.comprehension_depth(source)
    if depth >= 2:
        estimated = cost.estimate(1, depth, cost.max_cardinality(s))
        if estimated > cost.STATIC_ESTIMATED_COST_LIMIT:
            factor = estimated / cost.STATIC_ESTIMATED_COST_LIMIT
            errs.append(errors.field_forbidden(child(rpath, "rule"),
                                               f"estimated rule cost exceeds budget by factor of {_factor(factor)} "
                                               "(try simplifying the rule, or adding maxItems, maxProperties, "
                                               "and maxLength where arrays, maps, and strings are declared)"))
            ok = False
    if not ok:
        return None
    return CompiledRule(rule=source, program=program, message=message.strip(), message_program=message_program,
                        message_expression=message_expression, reason=reason, field_path=field_path,
                        uses_old_self=uses_old_self, optional_old_self=optional_old_self, ops=ops, depth=depth)


def _factor(f: float) -> str:
    return "more than 100x" if f > 100 else f"{f:.1f}x"


_FIELD_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]")


def normalize_field_path(field_path: str, s: dict) -> tuple[str, Optional[str]]:
    """``.spec.foo['bar']`` -> ``spec.foo.bar``; an error text when it names no field of ``s``."""
    pos, parts, schema = 0, [], s
    while pos < len(field_path):
        m = _FIELD_PATH_TOKEN.match(field_path, pos)
        if not m:
            return "", "fieldPath must be a valid path: expected [ or . but got: " + field_path[pos:]
        name = m.group(1) if m.group(1) is not None else m.group(2).replace("\\'", "'").replace("\\\\", "\\")
        props = schema.get("properties")
        if props is not None:
            if name not in props:
                return "", "fieldPath must be a valid path: does not refer to a valid field"
            schema = props[name]
            parts.append(name)
        elif isinstance(schema.get("additionalProperties"), dict):
            schema = schema["additionalProperties"]
            parts.append(f"[{name}]")
        else:
            return "", "fieldPath must be a valid path: does not refer to a valid field"
        pos = m.end()
    out = ""
    for p in parts:
        out = out + p if p.startswith("[") else child(out, p)
    return out, None


# ------------------------------------------------------------------ evaluation


class _Budget:
    def __init__(self) -> None:
        self.remaining = cost.RUNTIME_BUDGET
        self.exhausted = False


def evaluate(compiled: Optional[CompiledRules], new_obj: Any, old_obj: Any = None, path: str = "") -> list[Cause]:
    """Every rule violation of ``new_obj`` (``old_obj`` on update), as upstream's field errors."""
    if compiled is None or compiled.root is None:
        return []
    out: list[Cause] = []
    _walk(compiled.root, new_obj, old_obj, path, out, _Budget())
    return out


def _walk(node: RuleNode, value: Any, old: Any, path: str, out: list[Cause], budget: _Budget) -> None:
    if value is None or budget.exhausted:
        return
    if node.rules:
        _run_rules(node, value, old, path, out, budget)
    if isinstance(value, dict):
        old_map = old if isinstance(old, dict) else {}
        for name, sub in node.properties.items():
            if name in value:
                _walk(sub, value[name], old_map.get(name), child(path, name), out, budget)
                if budget.exhausted:
                    return
        if node.additional is not None:
            for name, v in value.items():
                if name in node.properties:
                    continue
                _walk(node.additional, v, old_map.get(name), key(path, name), out, budget)
                if budget.exhausted:
                    return
    elif isinstance(value, list) and node.items is not None:
        old_items = _correlate(node, old)
        for i, item in enumerate(value):
            old_item = old_items.get(_map_key(node, item)) if old_items is not None else None
            _walk(node.items, item, old_item, index(path, i), out, budget)
            if budget.exhausted:
                return


def _map_key(node: RuleNode, item: Any) -> Any:
    if not isinstance(item, dict):
        return None
    return tuple(repr(item.get(k)) for k in node.list_map_keys)


def _correlate(node: RuleNode, old: Any) -> Optional[dict]:
    if not node.list_map_keys or not isinstance(old, list):
        return None
    return {_map_key(node, item): item for item in old if isinstance(item, dict)}


def _run_rules(node: RuleNode, value: Any, old: Any, path: str, out: list[Cause], budget: _Budget) -> None:
    from kapiserver.cel import library
    from kapiserver.machinery.cel_runtime import cel
    size = None
    for rule in node.rules:
        if rule.uses_old_self and old is None and not rule.optional_old_self:
            continue
        if rule.depth:
            if size is None:
                size = cost.max_actual_size(value, cost.PER_CALL_LIMIT)
            estimated = cost.estimate(rule.ops, rule.depth, size)
        else:
            estimated = rule.ops
        if estimated > cost.PER_CALL_LIMIT:
            out.append(errors.field_invalid(path, node.type,
                                            "'operation cancelled: actual cost limit exceeded': no further validation "
                                            f"rules will be run due to call cost exceeds limit for rule: "
                                            f"{_rule_error_string(rule)}"))
            budget.exhausted = True
            return
        if estimated > budget.remaining:
            out.append(errors.field_invalid(path, node.type, "validation failed due to running out of cost budget, "
                                                             "no further validation rules will be run"))
            budget.exhausted = True
            return
        budget.remaining -= estimated
        variables = {"self": value}
        if rule.uses_old_self:
            if rule.optional_old_self:
                variables["oldSelf"] = cel.OptionalValue.of(old) if old is not None else cel.OptionalValue.none()
            else:
                variables["oldSelf"] = old
        try:
            result = rule.program.execute(library.new_context(variables))
        except Exception as e:  # the engine reports evaluation failures as exceptions
            out.append(errors.field_invalid(path, node.type, _eval_error(e, rule)))
            continue
        if result is True:
            continue
        if result is not False:
            out.append(errors.field_invalid(path, node.type,
                                            f"rule did not evaluate to a boolean for rule: {_rule_error_string(rule)}"))
            continue
        target = child(path, rule.field_path) if rule.field_path and not rule.field_path.startswith("[") \
            else path + rule.field_path
        out.append(_violation(target, value, node.type, _message(rule, variables), rule.reason))


def _eval_error(e: Exception, rule: CompiledRule) -> str:
    text = str(e).split(". Check that", 1)[0].split(". CEL does not coerce", 1)[0]
    if isinstance(e, TypeError) or text.lower().startswith("no such overload"):
        return (f"'no such overload': call arguments did not match a supported operator, function or macro "
                f"signature for rule: {_rule_error_string(rule)}")
    if isinstance(e, KeyError):
        text = f"no such key: {str(e).strip(chr(39))}"
    return f"{text} evaluating rule: {_rule_error_string(rule)}"


def _rule_error_string(rule: CompiledRule) -> str:
    return rule.message or rule.rule.strip()


def _message(rule: CompiledRule, variables: dict) -> str:
    from kapiserver.cel import library
    if rule.message_program is not None:
        try:
            text = rule.message_program.execute(library.new_context(variables))
        except Exception:
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text.strip() \
                and len(text.strip()) <= MAX_MESSAGE_EXPRESSION_RESULT:
            return text.strip()
    return rule.message or f"failed rule: {rule.rule.strip()}"


def _violation(path: str, value: Any, typ: str, detail: str, reason: str) -> Cause:
    if reason == "FieldValueForbidden":
        return errors.field_forbidden(path, detail)
    if reason == "FieldValueRequired":
        return errors.field_required(path, detail)
    if typ in ("object", "array"):
        kind = errors.DUPLICATE if reason == "FieldValueDuplicate" else errors.INVALID
        word = "Duplicate value" if reason == "FieldValueDuplicate" else "Invalid value"
        return Cause(kind, word if reason == "FieldValueDuplicate" else f"{word}: {detail}", path)
    if reason == "FieldValueDuplicate":
        return errors.field_duplicate(path, value)
    return errors.field_invalid(path, value, detail)
