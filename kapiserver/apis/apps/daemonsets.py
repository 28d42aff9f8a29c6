"""DaemonSets (apps/v1): update-strategy defaults, selector/template checks, upstream's columns."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType, TableColumn
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.apps.v1.DaemonSet"
STATUS = "io.k8s.api.apps.v1.DaemonSetStatus"
UPDATE_STRATEGIES = ["OnDelete", "RollingUpdate"]


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


def _validate_update_strategy(strategy: dict, path: str) -> list[errors.Cause]:
    """Upstream's ValidateDaemonSetUpdateStrategy and ValidateRollingUpdateDaemonSet."""
    kind = strategy.get("type")
    if kind == "OnDelete":
        return []
    if kind != "RollingUpdate":
        return [errors.field_not_supported(path, strategy, UPDATE_STRATEGIES[::-1])]
    rolling = strategy.get("rollingUpdate")
    if not isinstance(rolling, dict):
        return [errors.field_required(f"{path}.rollingUpdate")]
    causes: list[errors.Cause] = []
    present = {}
    for name in ("maxUnavailable", "maxSurge"):
        value = rolling.get(name)
        at = f"{path}.rollingUpdate.{name}"
        if value is not None and workload.int_or_percent_value(value) != 0:
            present[name] = True
            causes += workload.positive_int_or_percent(value, at)
            causes += workload.not_more_than_100_percent(value, at)
    if len(present) == 2:
        causes.append(errors.field_invalid(f"{path}.rollingUpdate.maxSurge", rolling.get("maxSurge"),
                                           "may not be set when maxUnavailable is non-zero"))
    elif not present:
        causes.append(errors.field_invalid(f"{path}.rollingUpdate.maxUnavailable", rolling.get("maxUnavailable"),
                                           "cannot be 0 when maxSurge is 0"))
    return causes


class DaemonSetStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_daemonset(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = workload.validate_selector(spec, "spec", "daemonset", required=False)
        causes += workload.selector_matches_template(spec, "spec")
        causes += workload.validate_template(spec, "spec", ["Always"])
        if (workload.template_of(spec).get("spec") or {}).get("activeDeadlineSeconds") is not None:
            value = workload.template_of(spec)["spec"]["activeDeadlineSeconds"]
            causes.append(errors.field_invalid("spec.template.spec.activeDeadlineSeconds", value,
                                               "activeDeadlineSeconds must be nil for daemonset"))
        causes += workload.non_negative(spec, "spec", "minReadySeconds", "templateGeneration")
        strategy = spec.get("updateStrategy")
        causes += _validate_update_strategy(strategy if isinstance(strategy, dict) else {}, "spec.updateStrategy")
        return causes + workload.non_negative(spec, "spec", "revisionHistoryLimit")

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return self.validate(rtype, new) + field_checks.immutable(
            (new.get("spec") or {}).get("selector"), (old.get("spec") or {}).get("selector"), "spec.selector",
            workload.go_label_selector)


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
