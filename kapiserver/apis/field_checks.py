"""Field checks the built-in kinds of every group share: label selectors,
int-or-percent values, enums and immutable fields, with upstream's field paths
and messages."""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Optional

from kapiserver.machinery import errors, labels, validation

_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_PERCENT_RE = re.compile(r"[0-9]+%")
INT_OR_PERCENT_MESSAGE = "must be an integer or percentage (e.g '5%')"


def label_selector(selector: Any, path: str) -> list[errors.Cause]:
    """A ``metav1.LabelSelector`` (upstream's ValidateLabelSelector)."""
    if not isinstance(selector, dict):
        return []
    causes = validation.validate_labels(selector.get("matchLabels") or {}, f"{path}.matchLabels")
    for i, expr in enumerate(selector.get("matchExpressions") or []):
        at = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            continue
        operator, values = expr.get("operator") or "", expr.get("values") or []
        if operator in ("In", "NotIn") and not values:
            causes.append(errors.field_required(f"{at}.values",
                                                "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist") and values:
            causes.append(errors.field_forbidden(f"{at}.values",
                                                 "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif operator not in _SELECTOR_OPERATORS:
            causes.append(errors.field_invalid(f"{at}.operator", operator, "not a valid selector operator"))
        key = expr.get("key") or ""
        causes.extend(errors.field_invalid(f"{at}.key", key, p) for p in validation.is_qualified_name(key))
    return causes


def int_or_percent(value: Any, path: str) -> list[errors.Cause]:
    """A non-negative int or a ``N%`` string of at most 100%."""
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value):
            return [errors.field_invalid(path, value, INT_OR_PERCENT_MESSAGE)]
        if int(value[:-1]) > 100:
            return [errors.field_invalid(path, value, "must not be greater than 100%")]
    elif isinstance(value, int) and value < 0:
        return [errors.field_invalid(path, value, validation.IS_NEGATIVE)]
    return []


def one_of(value: Any, path: str, supported: Iterable[str], required: bool = False) -> list[errors.Cause]:
    """An enum field: NotSupported unless empty (then Required when ``required``)."""
    if value is None or value == "":
        return [errors.field_required(path)] if required else []
    supported = list(supported)
    return [] if value in supported else [errors.field_not_supported(path, value, supported)]


def invalid_rendered(path: str, rendered: str, detail: str) -> errors.Cause:
    """A FieldValueInvalid whose value is already rendered (Go struct syntax)."""
    return errors.Cause(errors.INVALID, f"Invalid value: {rendered}: {detail}", path)


def immutable(new: Any, old: Any, path: str, rendered: Optional[Callable[[Any], str]] = None) -> list[errors.Cause]:
    """Upstream's ValidateImmutableField; ``rendered`` prints the value as Go would (structs)."""
    if new == old:
        return []
    if rendered is None:
        return [errors.field_invalid(path, new, validation.FIELD_IMMUTABLE)]
    return [invalid_rendered(path, rendered(new), validation.FIELD_IMMUTABLE)]



def selector_text(selector: Any) -> str:
    """A LabelSelector as kubectl's columns print it (``<none>`` when empty, ``<error>`` when broken)."""
    try:
        return labels.format_label_selector(selector if isinstance(selector, dict) else None)
    except errors.StatusError:
        return "<error>"
