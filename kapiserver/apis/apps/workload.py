"""What the workload kinds (apps/v1 and batch/v1) share.

Selectors that must match the pod template's labels, the pod template's
defaults and validation (from :mod:`kapiserver.apis.core.podspec`), the
replica counters of a status, the scale subresource, and the CONTAINERS /
IMAGES / SELECTOR columns of ``kubectl get -o wide``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, labels, validation
from kapiserver.machinery.errors import Cause
from kapiserver.registry.resource_type import ScaleSubresource, TableColumn

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SELECTOR_MISMATCH = "`selector` does not match template `labels`"
# Scale of Deployments, ReplicaSets and StatefulSets: status.selector is built from spec.selector.
SCALE = ScaleSubresource(".spec.replicas", ".status.replicas", ".spec.selector")


# ------------------------------------------------------------------ selectors and templates

def template_of(spec: dict) -> dict:
    template = spec.get("template")
    return template if isinstance(template, dict) else {}


def template_labels(template: dict) -> Any:
    return (template.get("metadata") or {}).get("labels") if isinstance(template.get("metadata"), dict) else None


def parse_selector(selector: Any) -> Optional[labels.LabelSelector]:
    """upstream's LabelSelectorAsSelector; None when it does not parse (a nil selector selects nothing)."""
    try:
        return labels.selector_from_label_selector_dict(selector if isinstance(selector, dict) else None)
    except errors.StatusError:
        return None


def selector_matches(selector: labels.LabelSelector, template: dict) -> bool:
    found = template_labels(template)
    return selector.matches({str(k): "" if v is None else str(v)
                             for k, v in (found if isinstance(found, dict) else {}).items()})


def validate_selector(spec: dict, path: str, kind_word: str, required: bool = True,
                      allow_invalid_values: bool = False) -> list[Cause]:
    """spec.selector: required, a valid LabelSelector, not empty (upstream's per-kind messages)."""
    selector = spec.get("selector")
    if selector is None:
        return [errors.field_required(f"{path}.selector")] if required else []
    causes = validation.validate_label_selector(selector, f"{path}.selector", allow_invalid_values)
    if isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(errors.field_invalid(f"{path}.selector", gorepr.label_selector(selector),
                                           f"empty selector is invalid for {kind_word}"))
    return causes


def selector_mismatch(template: dict, path: str) -> Cause:
    return errors.field_invalid(f"{path}.template.metadata.labels", gorepr.string_map(template_labels(template)),
                                SELECTOR_MISMATCH)


def validate_replicated_template(spec: dict, path: str, selector: labels.LabelSelector, kind_name: str,
                                 opts: podspec.PodOptions) -> list[Cause]:
    """upstream's ValidatePodTemplateSpecForReplicaSet / ForRC: labels match, a valid template, restartPolicy
    Always, no activeDeadlineSeconds (``kind_name`` names the kind in that message)."""
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    template = spec.get("template")
    if not isinstance(template, dict):
        return [errors.field_required(f"{path}.template")]
    causes: list[Cause] = []
    if not selector.empty and not selector_matches(selector, template):
        causes.append(selector_mismatch(template, path))
    causes += podspec.validate_pod_template_spec(template, f"{path}.template", opts)
    causes += restart_always(template, path)
    if (template.get("spec") or {}).get("activeDeadlineSeconds") is not None:
        causes.append(errors.field_forbidden(f"{path}.template.spec.activeDeadlineSeconds",
                                             f"activeDeadlineSeconds in {kind_name} is not Supported"))
    return causes


def restart_always(template: dict, path: str) -> list[Cause]:
    policy = (template.get("spec") or {}).get("restartPolicy") or ""
    if policy != "Always":
        return [errors.field_not_supported(f"{path}.template.spec.restartPolicy", policy, ["Always"])]
    return []


def default_template(spec: Any) -> None:
    """Pod-template defaults of ``spec.template`` (podspec's upstream defaults)."""
    from kapiserver.apis.core import podspec
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        podspec.default_pod_template_spec(spec["template"])


def template_options(new: dict, old: Optional[dict] = None) -> podspec.PodOptions:
    """The pod validation options of ``spec.template`` (an update keeps what the stored template had)."""
    from kapiserver.apis.core import podspec
    new_template = (new.get("spec") or {}).get("template") if isinstance(new.get("spec"), dict) else None
    old_template = None if old is None else (old.get("spec") or {}).get("template")
    return podspec.template_options(new_template, old_template if old is not None else None)


def selector_immutable(new: dict, old: dict) -> list[Cause]:
    """apps/v1 fixes spec.selector after create."""
    return field_checks.immutable((new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector"),
                                  "spec.selector", gorepr.label_selector)


# ------------------------------------------------------------------ status

def validate_replica_status(status: Any, path: str, counters: tuple[str, ...],
                            bounded: tuple[str, ...], ready_message: str) -> list[Cause]:
    """Non-negative counters, none above status.replicas, available not above ready (upstream's
    Validate*Status for ReplicaSets, ReplicationControllers, Deployments and StatefulSets)."""
    status = status if isinstance(status, dict) else {}
    causes = field_checks.non_negative(status, path, *counters)
    replicas = status.get("replicas") or 0
    for name in bounded:
        value = status.get(name) or 0
        if validation.is_int(value) and validation.is_int(replicas) and value > replicas:
            causes.append(errors.field_invalid(f"{path}.{name}", value, "cannot be greater than status.replicas"))
    available, ready = status.get("availableReplicas") or 0, status.get("readyReplicas") or 0
    if validation.is_int(available) and validation.is_int(ready) and available > ready:
        causes.append(errors.field_invalid(f"{path}.availableReplicas", available, ready_message))
    return causes


def collision_count_decremented(new: dict, old: dict) -> list[Cause]:
    value = (new.get("status") or {}).get("collisionCount")
    old_value = (old.get("status") or {}).get("collisionCount")
    if old_value is not None and (value is None or (validation.is_int(value) and value < old_value)):
        return [errors.field_invalid("status.collisionCount", value or 0, "cannot be decremented")]
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
