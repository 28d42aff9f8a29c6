"""What the workload kinds (apps/v1 and batch/v1) share.

Selectors that must match the pod template's labels, the pod template's
defaults and validation (from :mod:`kapiserver.apis.core.podspec`), the
int-or-percent rollout knobs, the scale subresource, the CONTAINERS / IMAGES
/ SELECTOR columns of ``kubectl get -o wide``, and the Go ``%#v`` rendering
upstream's messages use for label maps and selectors.
"""
from __future__ import annotations

import json
import re
from typing import Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors, labels, validation
from kapiserver.machinery.errors import Cause
from kapiserver.registry.resource_type import ScaleSubresource, TableColumn

SELECTOR_MISMATCH = "`selector` does not match template `labels`"
# Scale of Deployments, ReplicaSets and StatefulSets: status.selector is built from spec.selector.
SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", ".spec.selector")
PERCENT_RE = re.compile(r"[0-9]+%")
PERCENT_MESSAGE = validation.regex_error("a valid percent string must be a numeric string followed by an ending '%'",
                                         "[0-9]+%", "1%", "93%")
NOT_MORE_THAN_100 = "must not be greater than 100%"


# ------------------------------------------------------------------ Go value rendering

def _go_quote(text: Any) -> str:
    return json.dumps("" if text is None else str(text), ensure_ascii=False)


def go_string_map(value: Any) -> str:
    """A ``map[string]string`` as Go's ``%#v`` prints it (keys sorted)."""
    if not isinstance(value, dict):
        return "map[string]string(nil)"
    body = ", ".join(f"{_go_quote(k)}:{_go_quote(v)}" for k, v in sorted(value.items()))
    return f"map[string]string{{{body}}}"


def go_label_selector(selector: Any) -> str:
    """A ``metav1.LabelSelector`` as Go's ``%#v`` prints it (upstream's selector messages)."""
    sel = selector if isinstance(selector, dict) else {}
    exprs = sel.get("matchExpressions")
    if isinstance(exprs, list):
        items = []
        for e in exprs:
            e = e if isinstance(e, dict) else {}
            values = e.get("values")
            vals = ("[]string{" + ", ".join(_go_quote(v) for v in values) + "}") if isinstance(values, list) \
                else "[]string(nil)"
            items.append(f"v1.LabelSelectorRequirement{{Key:{_go_quote(e.get('key'))}, "
                         f"Operator:{_go_quote(e.get('operator'))}, Values:{vals}}}")
        expr_text = "[]v1.LabelSelectorRequirement{" + ", ".join(items) + "}"
    else:
        expr_text = "[]v1.LabelSelectorRequirement(nil)"
    return f"v1.LabelSelector{{MatchLabels:{go_string_map(sel.get('matchLabels'))}, MatchExpressions:{expr_text}}}"





# ------------------------------------------------------------------ selectors and templates




def _selector_matches(selector: Optional[dict], template_labels: Any) -> Optional[bool]:
    """Whether the selector matches the labels; None when the selector cannot be parsed."""
    try:
        sel = labels.selector_from_label_selector_dict(selector)
    except errors.StatusError:
        return None
    if sel.empty:
        return True
    return sel.matches({str(k): "" if v is None else str(v)
                        for k, v in (template_labels if isinstance(template_labels, dict) else {}).items()})


def template_of(spec: dict) -> dict:
    template = spec.get("template")
    return template if isinstance(template, dict) else {}


def template_labels(template: dict) -> Any:
    return (template.get("metadata") or {}).get("labels")


def validate_selector(spec: dict, path: str, kind_word: str, required: bool = True) -> list[Cause]:
    """spec.selector: required, a valid LabelSelector, not empty (upstream's per-kind messages)."""
    selector = spec.get("selector")
    if selector is None:
        return [errors.field_required(f"{path}.selector")] if required else []
    if not isinstance(selector, dict):
        return []
    causes = field_checks.label_selector(selector, f"{path}.selector")
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(field_checks.invalid_rendered(f"{path}.selector", go_label_selector(selector),
                                       f"empty selector is invalid for {kind_word}"))
    return causes


def selector_matches_template(spec: dict, path: str) -> list[Cause]:
    """The template's labels must be selected by spec.selector (a nil selector selects nothing)."""
    template = template_of(spec)
    found = template_labels(template)
    if spec.get("selector") is None:
        return [field_checks.invalid_rendered(f"{path}.template.metadata.labels", go_string_map(found), SELECTOR_MISMATCH)]
    if _selector_matches(spec.get("selector"), found) is False:
        return [field_checks.invalid_rendered(f"{path}.template.metadata.labels", go_string_map(found), SELECTOR_MISMATCH)]
    return []


def validate_template(spec: dict, path: str, restart_policies: list[str]) -> list[Cause]:
    """The pod template's own validation plus the restart policies this kind allows."""
    template = spec.get("template")
    if not isinstance(template, dict):
        return [errors.field_required(f"{path}.template")]
    causes = podspec.validate_pod_template_spec(template, f"{path}.template")
    policy = (template.get("spec") or {}).get("restartPolicy")
    if policy not in restart_policies:
        causes.append(errors.field_not_supported(f"{path}.template.spec.restartPolicy", policy or "",
                                                 restart_policies))
    return causes


def default_template(spec: Any) -> None:
    """Pod-template defaults of ``spec.template`` (podspec's upstream defaults)."""
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        podspec.default_pod_template_spec(spec["template"])


def non_negative(spec: dict, path: str, *names: str) -> list[Cause]:
    causes: list[Cause] = []
    for name in names:
        causes += podspec.validate_non_negative(spec.get(name), f"{path}.{name}")
    return causes


# ------------------------------------------------------------------ int-or-percent rollout knobs

def int_or_percent_value(value: Any) -> Optional[int]:
    """The number of an int-or-percent (``25%`` → 25), None when malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and PERCENT_RE.fullmatch(value):
        return int(value[:-1])
    return None


def positive_int_or_percent(value: Any, path: str) -> list[Cause]:
    """Upstream's ValidatePositiveIntOrPercent."""
    if isinstance(value, str):
        return [] if PERCENT_RE.fullmatch(value) else [errors.field_invalid(path, value, PERCENT_MESSAGE)]
    return podspec.validate_non_negative(value, path)


def not_more_than_100_percent(value: Any, path: str) -> list[Cause]:
    if isinstance(value, str) and PERCENT_RE.fullmatch(value) and int(value[:-1]) > 100:
        return [errors.field_invalid(path, value, NOT_MORE_THAN_100)]
    return []





# ------------------------------------------------------------------ columns

def _containers(obj: dict, *template_path: str) -> list[dict]:
    spec = columns.get_path(obj, *template_path, "spec", default={})
    found = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def wide_columns(selector_path: tuple[str, ...] = ("spec", "selector"),
                 template_path: tuple[str, ...] = ("spec", "template")) -> tuple[TableColumn, ...]:
    """CONTAINERS, IMAGES and SELECTOR (priority 1: ``kubectl get -o wide``)."""
    def selector_cell(obj: dict) -> str:
        selector = columns.get_path(obj, *selector_path)
        if selector is None:
            return "<none>"
        return labels.selector_string(selector)
    return (
        columns.column("Containers", lambda o: ",".join(c.get("name", "") for c in _containers(o, *template_path)),
                       desc="Names of each container in the template.", priority=1),
        columns.column("Images", lambda o: ",".join(c.get("image", "") for c in _containers(o, *template_path)),
                       desc="Images referenced by each container in the template.", priority=1),
        columns.column("Selector", selector_cell, desc="Label selector for pods.", priority=1),
    )


def ready_cell(obj: dict) -> str:
    """The READY column of Deployments and StatefulSets: ``readyReplicas/replicas``."""
    return f"{status_int(obj, 'readyReplicas')}/{spec_int(obj, 'replicas')}"


def status_int(obj: dict, name: str) -> int:
    value = columns.get_path(obj, "status", name, default=0)
    return value if isinstance(value, int) else 0


def spec_int(obj: dict, name: str, default: int = 0) -> int:
    value = columns.get_path(obj, "spec", name, default=default)
    return value if isinstance(value, int) else default
