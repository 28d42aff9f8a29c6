"""Label selectors: the ``labelSelector`` query syntax and ``metav1.LabelSelector``.

The grammar, the matching rules and the error messages follow upstream's
``k8s.io/apimachinery/pkg/labels`` parser, because clients (kubectl, client-go)
send selectors in that syntax and show our errors to users verbatim.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.validation import is_qualified_name, is_valid_label_value

# Operators, spelled as upstream's selection.Operator values.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = [IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN]

# Lexer tokens.
_ID, _END, _COMMA, _OPEN, _CLOSE, _ERROR = "id", "end", ",", "(", ")", "error"
_SYMBOL_TOKENS = {"=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS, "!": DOES_NOT_EXIST,
                  ">": GREATER_THAN, "<": LESS_THAN, ",": _COMMA, "(": _OPEN, ")": _CLOSE}
_KEYWORDS = {"in": IN, "notin": NOT_IN}
_SPECIAL = set("=!(),><")
_WHITESPACE = set(" \t\r\n")


class _SelectorSyntaxError(Exception):
    """A problem with the selector text; becomes a 400 BadRequest."""


def _quote(values: Iterable[str]) -> str:
    """Go's ``%#v`` of a []string, as field errors print slices."""
    return "[]string{" + ", ".join(errors.render_value(v) for v in values) + "}"


def _field_error(path: str, value: str, detail: str) -> str:
    return f"{path or '<nil>'}: Invalid value: {value}: {detail}"


def _aggregate(messages: list[str]) -> str:
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


class Requirement(NamedTuple):
    """One term of a selector: ``key op values``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels:
                return False
            try:
                have = int(labels[self.key])
                want = int(self.values[0])
            except (ValueError, IndexError):
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({','.join(self.values)})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{self.values[0] if self.values else ''}"


def new_requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    """Upstream's labels.NewRequirement: validate key, operator arity and values."""
    vals = sorted(set(values))
    problems: list[str] = []
    key_problems = is_qualified_name(key)
    if key_problems:
        problems.append(_field_error("key", errors.render_value(key), "; ".join(key_problems)))
    if operator in (IN, NOT_IN):
        if not vals:
            problems.append(_field_error("values", _quote(vals),
                                         "for 'in', 'notin' operators, values set can't be empty"))
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            problems.append(_field_error("values", _quote(vals), "exact-match compatibility requires one single "
                                                                 "value"))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            problems.append(_field_error("values", _quote(vals), "values set must be empty for exists and does "
                                                                 "not exist"))
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            problems.append(_field_error("values", _quote(vals), "for 'Gt', 'Lt' operators, exactly one value is "
                                                                 "required"))
        for i, value in enumerate(vals):
            try:
                int(value, 10)
            except ValueError:
                problems.append(_field_error(f"values[{i}]", errors.render_value(value),
                                             "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(errors.render_value(o) for o in
                              (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, EXISTS, DOES_NOT_EXIST,
                               GREATER_THAN, LESS_THAN))
        problems.append(f"operator: Unsupported value: {errors.render_value(operator)}: supported values: "
                        f"{supported}")
    for i, value in enumerate(vals):
        value_problems = is_valid_label_value(value)
        if value_problems:
            problems.append(_field_error(f"values[{i}][{key}]", errors.render_value(value),
                                         "; ".join(value_problems)))
    if problems:
        raise _SelectorSyntaxError(_aggregate(problems))
    return Requirement(key, operator, tuple(vals))


class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    def __init__(self, requirements: Iterable[Requirement] = (), nothing: bool = False) -> None:
        self.requirements: list[Requirement] = sorted(requirements, key=lambda r: r.key)
        self._nothing = nothing

    @property
    def empty(self) -> bool:
        """True when the selector selects everything (so filtering can be skipped)."""
        return not self.requirements and not self._nothing

    def matches(self, labels: Optional[Mapping[str, str]]) -> bool:
        if self._nothing:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelSelector) and self.requirements == other.requirements
                and self._nothing == other._nothing)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


# ---------------------------------------------------------------- the text syntax


def _lex(text: str) -> list[tuple[str, str]]:
    """Split the selector into (token, literal) pairs, ending with the end token."""
    items: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n or text[i] == "\x00":  # Go's lexer reads a NUL byte as the end of the text
            items.append((_END, ""))
            return items
        ch = text[i]
        if ch in _SPECIAL:
            # the longest run of special characters that still forms a token
            best, j = None, i
            while j < n and text[j] in _SPECIAL:
                candidate = text[i:j + 1]
                if candidate in _SYMBOL_TOKENS:
                    best = candidate
                elif best is not None:
                    break
                j += 1
            if best is None:
                items.append((_ERROR, f"error expected: keyword found '{text[i:j]}'"))
                i = j
            else:
                items.append((_SYMBOL_TOKENS[best], best))
                i += len(best)
            continue
        j = i
        while j < n and text[j] not in _SPECIAL and text[j] not in _WHITESPACE and text[j] != "\x00":
            j += 1
        word = text[i:j]
        items.append((_KEYWORDS.get(word, _ID), word))
        i = j + 1 if j < n and text[j] == "\x00" else j  # a NUL ends a word and is consumed with it


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        if values and tok in (IN, NOT_IN):
            tok = _ID  # ``in`` and ``notin`` are ordinary words where a value is expected
        return tok, lit

    def consume(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.lookahead(values)
        if self.pos < len(self.items) - 1:
            self.pos += 1
        return tok, lit

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok == _END:
                return requirements
            if tok not in (_ID, DOES_NOT_EXIST):
                raise _SelectorSyntaxError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except _SelectorSyntaxError as e:
                raise _SelectorSyntaxError(f"unable to parse requirement: {e}") from None
            tok, lit = self.consume()
            if tok == _END:
                return requirements
            if tok != _COMMA:
                raise _SelectorSyntaxError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.lookahead()
            if tok not in (_ID, DOES_NOT_EXIST):
                raise _SelectorSyntaxError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        operator = ""
        tok, lit = self.consume()
        if tok == DOES_NOT_EXIST:
            operator = DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok != _ID:
            raise _SelectorSyntaxError(f"found '{lit}', expected: identifier")
        key = lit
        problems = is_qualified_name(key)
        if problems:
            raise _SelectorSyntaxError(_field_error("", errors.render_value(key), "; ".join(problems)))
        if self.lookahead()[0] in (_END, _COMMA):
            return new_requirement(key, operator or EXISTS, [])
        if operator == DOES_NOT_EXIST:
            # ``!key`` must be followed by a comma or the end
            return new_requirement(key, operator, [])
        tok, lit = self.consume(values=False)
        if tok not in _BINARY_OPERATORS:
            raise _SelectorSyntaxError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        operator = tok
        if operator in (IN, NOT_IN):
            values = self.set_values()
        else:
            values = self.exact_value()
        return new_requirement(key, operator, values)

    def set_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok != _OPEN:
            raise _SelectorSyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok == _CLOSE:  # ``()``
            self.consume()
            return {""}
        if tok not in (_ID, _COMMA):
            raise _SelectorSyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifier_list()
        if self.consume()[0] != _CLOSE:
            raise _SelectorSyntaxError(f"found '{lit}', expected: ')'")
        return values

    def identifier_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok == _ID:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 == _COMMA:
                    continue
                if tok2 == _CLOSE:
                    return values
                raise _SelectorSyntaxError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _COMMA:  # empty values: ``(,a)``, ``(a,)``, ``(a,,b)``
                if not values:
                    values.add("")
                tok2, _ = self.lookahead()
                if tok2 == _CLOSE:
                    values.add("")
                    return values
                if tok2 == _COMMA:
                    self.consume()
                    values.add("")
                continue
            raise _SelectorSyntaxError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        tok, _ = self.lookahead()
        if tok in (_END, _COMMA):  # ``key=`` selects the empty value
            return {""}
        tok, lit = self.consume()
        if tok == _ID:
            return {lit}
        raise _SelectorSyntaxError(f"found '{lit}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse a ``labelSelector`` query value; a bad one is a 400 BadRequest."""
    try:
        return LabelSelector(_Parser(text or "").parse())
    except _SelectorSyntaxError as e:
        raise errors.bad_request(str(e)) from None


_EXPRESSION_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def selector_from_label_selector_dict(selector: Optional[dict]) -> LabelSelector:
    """A ``metav1.LabelSelector`` object as a selector (upstream's LabelSelectorAsSelector).

    ``None`` selects nothing; an empty selector selects everything.
    """
    if selector is None:
        return NOTHING
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    requirements = []
    try:
        for key, value in match_labels.items():
            requirements.append(new_requirement(key, EQUALS, ["" if value is None else str(value)]))
        for expr in expressions:
            operator = _EXPRESSION_OPERATORS.get(expr.get("operator"))
            if operator is None:
                raise _SelectorSyntaxError(f'"{expr.get("operator") or ""}" is not a valid label selector operator')
            requirements.append(new_requirement(expr.get("key") or "", operator, expr.get("values") or []))
    except _SelectorSyntaxError as e:
        raise errors.bad_request(str(e)) from None
    return LabelSelector(requirements)


def format_label_selector(selector: Optional[dict]) -> str:
    """The text form of a ``metav1.LabelSelector`` (``<none>`` for none), as kubectl prints it."""
    if selector is None:
        return "<none>"
    text = str(selector_from_label_selector_dict(selector))
    return text or "<none>"


def selector_string(selector: Any) -> str:
    """A LabelSelector, or a plain label map (Services', ReplicationControllers'
    selectors), as selector text (``app=web,tier in (a,b)``: what ``kubectl -l``
    takes and a Scale's ``status.selector`` holds); "" when absent or invalid."""
    if not isinstance(selector, dict):
        return ""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}
    try:
        return str(selector_from_label_selector_dict(selector))
    except errors.StatusError:
        return ""
