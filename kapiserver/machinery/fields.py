"""Field selectors: the ``fieldSelector`` query syntax (upstream's fields.ParseSelector),
and field label conversions (upstream's ``runtime.Scheme.ConvertFieldLabel``).

Terms are ``field=value``, ``field==value`` or ``field!=value`` joined by
commas; ``\\``, ``,`` and ``=`` inside a value are escaped with a backslash.

Which labels a kind's version accepts, and what each stands for in the kind's
field set, is a :class:`FieldLabelConversion` (upstream registers one per kind
and version with ``AddFieldLabelConversionFunc`` in ``pkg/apis/*/v*/conversion.go``;
a kind without one gets :data:`METAV1_FIELD_LABELS`, upstream's
``DefaultMetaV1FieldSelectorConversion``).  The registry declares them per kind.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping, NamedTuple, Optional

from kapiserver.machinery import errors, gorepr

EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
_OPERATORS = (NOT_EQUALS, DOUBLE_EQUALS, EQUALS)  # tried in this order at each position


class FieldRequirement(NamedTuple):
    field: str
    operator: str
    value: str

    def matches(self, get: Callable[[str], Optional[str]]) -> bool:
        have = get(self.field)
        have = "" if have is None else have
        return have != self.value if self.operator == NOT_EQUALS else have == self.value

    def __str__(self) -> str:
        op = NOT_EQUALS if self.operator == NOT_EQUALS else EQUALS
        return f"{self.field}{op}{escape_value(self.value)}"


class FieldSelector:
    """A conjunction of field requirements; the empty selector matches everything."""

    def __init__(self, requirements: list[FieldRequirement] | tuple = ()) -> None:
        self.requirements: list[FieldRequirement] = list(requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def fields(self) -> set[str]:
        """The field names the selector refers to (for the caller's allow-list)."""
        return {r.field for r in self.requirements}

    def matches(self, get: Callable[[str], Optional[str]]) -> bool:
        """``get(field)`` returns the object's value for a field (None when absent, compared as "")."""
        return all(r.matches(get) for r in self.requirements)

    def requires_exact_match(self, field: str) -> Optional[str]:
        """The value ``field`` must equal, if the selector pins it (e.g. ``metadata.name``)."""
        for r in self.requirements:
            if r.field == field and r.operator != NOT_EQUALS:
                return r.value
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"


def escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """Undo backslash escaping; unescaped ``,``/``=`` and unknown escapes are 400s."""
    if not any(c in value for c in "\\,="):
        return value
    out = []
    in_slash = False
    for c in value:
        if in_slash:
            if c not in "\\,=":
                raise errors.bad_request(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c in ",=":
            # Go prints the rune as its number
            raise errors.bad_request(f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if in_slash:
        raise errors.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped (escapes stay in the terms)."""
    terms, start, in_slash = [], 0, False
    for i, c in enumerate(text):
        if in_slash:
            in_slash = False
        elif c == "\\":
            in_slash = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> Optional[tuple[str, str, str]]:
    """Split at the first operator; the field name has no escaping."""
    for i in range(len(term)):
        for op in _OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """Parse a ``fieldSelector`` query value; a bad one is a 400 BadRequest."""
    if not text:
        return FieldSelector()
    requirements = []
    for term in sorted(_split_terms(text)):
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, op, raw_value = split
        value = unescape_value(raw_value)
        if field or value:  # upstream's Transform makes a term of nothing on either side Everything()
            requirements.append(FieldRequirement(field, op, value))
    return FieldSelector(requirements)


def field_label_not_supported(label: str) -> str:
    """The message most of upstream's conversion functions give for a label they refuse."""
    return f"field label not supported: {label}"


class FieldLabelConversion:
    """The field labels one version of a kind accepts in a selector, and the label of the
    kind's field set (upstream's ``GetAttrs``) each one stands for.

    ``labels`` are accepted as they are; ``renamed`` maps a label clients send to another
    one (a Pod's ``spec.host`` is ``spec.nodeName``; events.k8s.io's ``regarding.kind`` is the
    Event's ``involvedObject.kind``).  ``not_supported(label)`` is the message of the 400 for
    any other label: upstream's functions word it differently per kind.
    """

    def __init__(self, labels: Iterable[str], not_supported: Callable[[str], str] = field_label_not_supported,
                 renamed: Optional[Mapping[str, str]] = None) -> None:
        self.labels: dict[str, str] = {label: label for label in labels}
        self.labels.update(renamed or {})
        self.not_supported = not_supported

    def accepted(self) -> frozenset[str]:
        """The labels a selector may use."""
        return frozenset(self.labels)

    def convert(self, selector: FieldSelector) -> FieldSelector:
        """``selector`` in the field set's labels (upstream's ``fields.Selector.Transform``):
        a 400 BadRequest names the first refused label, in the selector's (sorted) order."""
        out = []
        for requirement in selector.requirements:
            label = self.labels.get(requirement.field)
            if label is None:
                raise errors.bad_request(self.not_supported(requirement.field))
            out.append(requirement if label == requirement.field
                       else FieldRequirement(label, requirement.operator, requirement.value))
        return FieldSelector(out)


METAV1_FIELD_LABELS = FieldLabelConversion(
    ("metadata.name", "metadata.namespace"),
    lambda label: f'{gorepr.quote(label)} is not a known field selector: only "metadata.name", "metadata.namespace"')
"""Kinds for which upstream registers no conversion: the object's name and namespace
(a cluster-scoped object's namespace is empty)."""
