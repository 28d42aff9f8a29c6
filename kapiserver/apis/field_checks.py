"""Field checks the built-in kinds of every group share: the extra metadata
rule of core's ValidateObjectMeta, enums, immutable fields and the
int-or-percent rollout knobs, with upstream's field paths and messages.
Label selectors, names and labels are machinery (``machinery.validation``)."""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Optional

from kapiserver.machinery import errors, gorepr, labels, validation

_PERCENT_RE = re.compile(r"[0-9]+%")


def kube_object_meta(obj: Any) -> list[errors.Cause]:
    """What core's ValidateObjectMeta adds to the generic checks the Store runs
    (built-in kinds only): unqualified finalizers must be standard ones."""
    md = obj.get("metadata") if isinstance(obj, dict) else None
    finalizers = md.get("finalizers") if isinstance(md, dict) else None
    return validation.validate_kube_finalizer_names(finalizers, "metadata.finalizers")


def one_of(value: Any, path: str, supported: Iterable[str], required: bool = False) -> list[errors.Cause]:
    """An enum field: NotSupported unless empty (then Required when ``required``)."""
    if value is None or value == "":
        return [errors.field_required(path)] if required else []
    supported = list(supported)
    return [] if value in supported else [errors.field_not_supported(path, value, supported)]


def immutable(new: Any, old: Any, path: str, rendered: Optional[Callable[[Any], str]] = None) -> list[errors.Cause]:
    """Upstream's ValidateImmutableField; ``rendered`` prints the value as Go would (structs)."""
    if new == old:
        return []
    value = new if rendered is None else gorepr.GoRepr(rendered(new))
    return [errors.field_invalid(path, value, validation.FIELD_IMMUTABLE)]


def non_negative_value(value: Any, path: str) -> list[errors.Cause]:
    """upstream's ValidateNonnegativeField."""
    if validation.is_int(value) and value < 0:
        return [errors.field_invalid(path, value, validation.IS_NEGATIVE)]
    return []


def non_negative(obj: Any, path: str, *names: str) -> list[errors.Cause]:
    """upstream's ValidateNonnegativeField for each named integer field of ``obj``."""
    causes: list[errors.Cause] = []
    obj = obj if isinstance(obj, dict) else {}
    for name in names:
        causes += non_negative_value(obj.get(name), f"{path}.{name}" if path else name)
    return causes


# ------------------------------------------------------------------ int-or-percent (pkg/apis/apps/validation)

def go_int_or_string(value: Any) -> gorepr.GoRepr:
    """An ``intstr.IntOrString`` passed by value: Go prints the struct."""
    if isinstance(value, str):
        return gorepr.GoRepr(f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{gorepr.quote(value)}}}")
    number = value if validation.is_int(value) else 0
    return gorepr.GoRepr(f"intstr.IntOrString{{Type:0, IntVal:{number}, StrVal:\"\"}}")


def percent_value(value: Any) -> Optional[int]:
    """The number of a valid ``N%`` string, None otherwise."""
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1])
    return None


def int_or_percent_value(value: Any) -> int:
    """upstream's getIntOrPercentValue: the percentage, or the integer (0 for anything else)."""
    percent = percent_value(value)
    if percent is not None:
        return percent
    return value if validation.is_int(value) else 0


def positive_int_or_percent(value: Any, path: str) -> list[errors.Cause]:
    """upstream's ValidatePositiveIntOrPercent."""
    if isinstance(value, str):
        return [errors.field_invalid(path, go_int_or_string(value), m) for m in validation.is_valid_percent(value)]
    if validation.is_int(value) and value < 0:
        return [errors.field_invalid(path, value, validation.IS_NEGATIVE)]
    return []


def not_more_than_100_percent(value: Any, path: str) -> list[errors.Cause]:
    """upstream's IsNotMoreThan100Percent."""
    percent = percent_value(value)
    if percent is not None and percent > 100:
        return [errors.field_invalid(path, go_int_or_string(value), "must not be greater than 100%")]
    return []


def spec_diff(old: dict, new: dict, type_name: str) -> str:
    """A diff of two specs in the shape of the ``cmp.Diff`` upstream appends to
    "immutable" messages (changed top-level fields only; upstream shows Go structs)."""
    def render(value: Any) -> str:
        if isinstance(value, (str, int, float, bool)) or value is None:
            return "nil" if value is None else gorepr.scalar(value)
        return errors.render_value(value)
    lines = [f"  {type_name}{{"]
    keys = [k for k in list(old) + [k for k in new if k not in old] if old.get(k) != new.get(k)]
    unchanged = len(set(old) | set(new)) - len(keys)
    if unchanged:
        lines.append(f"  \t... // {unchanged} identical fields")
    for key in keys:
        name = key[:1].upper() + key[1:]
        if key in old:
            lines.append(f"- \t{name}: {render(old[key])},")
        if key in new:
            lines.append(f"+ \t{name}: {render(new[key])},")
    lines.append("  }")
    return "\n".join(lines) + "\n"


def selector_text(selector: Any) -> str:
    """A LabelSelector as kubectl's columns print it (``<none>`` when empty, ``<error>`` when broken)."""
    try:
        return labels.format_label_selector(selector if isinstance(selector, dict) else None)
    except errors.StatusError:
        return "<error>"
