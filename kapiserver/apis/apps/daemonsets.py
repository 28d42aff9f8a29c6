"""DaemonSets (apps/v1): update-strategy defaults, upstream's ValidateDaemonSet, the template generation
annotation, upstream's columns."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy, TableColumn

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.apps.v1.DaemonSet"
STATUS = "io.k8s.api.apps.v1.DaemonSetStatus"
UPDATE_STRATEGIES = ["RollingUpdate", "OnDelete"]


def default_daemonset(obj: dict) -> None:
    """Upstream's SetDefaults_DaemonSet (apps/v1)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    strategy = spec.setdefault("updateStrategy", {})
    if isinstance(strategy, dict):
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.setdefault("rollingUpdate", {})
            if isinstance(rolling, dict):
                rolling.setdefault("maxUnavailable", 1)
                rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    workload.default_template(spec)


TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"


def _go_update_strategy(strategy: dict) -> gorepr.GoRepr:
    return gorepr.struct("apps.DaemonSetUpdateStrategy", (
        ("Type", gorepr.quote(strategy.get("type") or "")),
        ("RollingUpdate", gorepr.pointer(strategy.get("rollingUpdate"), "apps.RollingUpdateDaemonSet"))))


def _validate_update_strategy(strategy: dict, path: str) -> list[errors.Cause]:
    """Upstream's ValidateDaemonSetUpdateStrategy and ValidateRollingUpdateDaemonSet."""
    kind = strategy.get("type")
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        return [errors.field_not_supported(path, _go_update_strategy(strategy), UPDATE_STRATEGIES)]
    rolling = strategy.get("rollingUpdate")
    if not isinstance(rolling, dict):
        return [errors.field_required(f"{path}.rollingUpdate")]
    at = f"{path}.rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    causes = field_checks.positive_int_or_percent(unavailable, f"{at}.maxUnavailable")
    causes += field_checks.positive_int_or_percent(surge, f"{at}.maxSurge")
    causes += field_checks.not_more_than_100_percent(unavailable, f"{at}.maxUnavailable")
    causes += field_checks.not_more_than_100_percent(surge, f"{at}.maxSurge")
    has_unavailable = field_checks.int_or_percent_value(unavailable) != 0
    has_surge = field_checks.int_or_percent_value(surge) != 0
    if has_unavailable and has_surge:
        causes.append(errors.field_invalid(f"{at}.maxSurge", field_checks.go_int_or_string(surge),
                                           "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        causes.append(errors.field_required(f"{at}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return causes


def validate_daemonset_spec(spec: dict, opts: podspec.PodOptions, generation: int) -> list[errors.Cause]:
    """upstream's ValidateDaemonSetSpec (``generation`` is the template generation the annotation holds)."""
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    causes = validation.validate_label_selector(spec.get("selector"), "spec.selector",
                                                opts.allow_invalid_label_value_in_selector)
    template = workload.template_of(spec)
    selector = workload.parse_selector(spec.get("selector"))
    if selector is not None and not workload.selector_matches(selector, template):
        causes.append(workload.selector_mismatch(template, "spec"))
    found = spec.get("selector")
    if isinstance(found, dict) and not found.get("matchLabels") and not found.get("matchExpressions"):
        causes.append(errors.field_invalid("spec.selector", gorepr.label_selector(found),
                                           "empty selector is invalid for daemonset"))
    causes += podspec.validate_pod_template_spec(template, "spec.template", opts)
    causes += workload.restart_always(template, "spec")
    if (template.get("spec") or {}).get("activeDeadlineSeconds") is not None:
        causes.append(errors.field_forbidden("spec.template.spec.activeDeadlineSeconds",
                                             "activeDeadlineSeconds in DaemonSet is not Supported"))
    causes += field_checks.non_negative(spec, "spec", "minReadySeconds")
    if generation < 0:
        causes.append(errors.field_invalid("spec.templateGeneration", generation, validation.IS_NEGATIVE))
    strategy = spec.get("updateStrategy")
    causes += _validate_update_strategy(strategy if isinstance(strategy, dict) else {}, "spec.updateStrategy")
    return causes + field_checks.non_negative(spec, "spec", "revisionHistoryLimit")


def template_generation(obj: dict) -> int:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(TEMPLATE_GENERATION_ANNOTATION)
    try:
        return int(value) if value is not None else 0
    except (TypeError, ValueError):
        return 0


def _set_template_generation(obj: dict, generation: int) -> None:
    md = obj.setdefault("metadata", {})
    annotations = as_dict(md.get("annotations"))
    annotations[TEMPLATE_GENERATION_ANNOTATION] = str(generation)
    md["annotations"] = annotations


class DaemonSetStrategy(Strategy):
    """apps/v1 keeps the template generation in an annotation (upstream's conversion of
    spec.templateGeneration): 1 on create, one more each time the template changes."""

    tracks_generation = True

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        if template_generation(obj) < 1:
            _set_template_generation(obj, 1)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_update(rtype, new, old)
        generation = template_generation(old)
        if (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get("template"):
            generation += 1
        elif template_generation(new) > generation:
            generation = template_generation(new)
        if generation:
            _set_template_generation(new, generation)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_daemonset(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateDaemonSet."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_daemonset_spec(spec, workload.template_options(obj),
                                                                          template_generation(obj))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateDaemonSetUpdate, and apps/v1's fixed selector."""
        spec = as_dict(new.get("spec"))
        opts = workload.template_options(new, old)
        opts.allow_invalid_label_value_in_selector = (opts.allow_invalid_label_value_in_selector or
                                                      validation.label_selector_has_invalid_value(
                                                          (old.get("spec") or {}).get("selector")))
        generation, old_generation = template_generation(new), template_generation(old)
        causes = field_checks.kube_object_meta(new)
        if generation < old_generation:
            causes.append(errors.field_invalid("spec.templateGeneration", generation, "must not be decremented"))
        changed = spec.get("template") != (old.get("spec") or {}).get("template")
        if generation == old_generation and changed:
            causes.append(errors.field_invalid("spec.templateGeneration", generation,
                                               "must be incremented upon template update"))
        elif generation > old_generation and not changed:
            causes.append(errors.field_invalid("spec.templateGeneration", generation,
                                               "must not be incremented without template update"))
        causes += validate_daemonset_spec(spec, opts, generation)
        return causes + workload.selector_immutable(new, old)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateDaemonSetStatusUpdate."""
        causes = field_checks.non_negative(new.get("status"), "status", "currentNumberScheduled", "numberMisscheduled",
                                           "desiredNumberScheduled", "numberReady", "observedGeneration",
                                           "updatedNumberScheduled", "numberAvailable", "numberUnavailable",
                                           "collisionCount")
        return causes + workload.collision_count_decremented(new, old)


def _node_selector(obj: dict) -> str:
    selector = columns.get_path(obj, "spec", "template", "spec", "nodeSelector")
    if not isinstance(selector, dict) or not selector:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _status(name: str, prop: str) -> TableColumn:
    return columns.column(name, lambda o: workload.status_int(o, prop), STATUS, prop, type="integer")


def resource_type() -> ResourceType:
    return ResourceType(
        group="apps", version="v1", kind="DaemonSet", plural="daemonsets", singular="daemonset",
        namespaced=True, strategy=DaemonSetStrategy(), short_names=("ds",), categories=("all",),
        has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            _status("Desired", "desiredNumberScheduled"),
            _status("Current", "currentNumberScheduled"),
            _status("Ready", "numberReady"),
            _status("Up-to-date", "updatedNumberScheduled"),
            _status("Available", "numberAvailable"),
            columns.column("Node Selector", _node_selector,
                           desc="NodeSelector is a selector which must be true for the pod to fit on a node."),
            columns.age_column(),
            *workload.wide_columns(),
        ),
    )
