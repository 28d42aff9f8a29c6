"""Jobs (batch/v1): the generated selector and labels, defaults, template checks, the immutable parts.

Unless ``manualSelector: true``, a Job selects its pods by its own uid: the
template gets ``batch.kubernetes.io/controller-uid`` and
``batch.kubernetes.io/job-name`` (and the legacy ``controller-uid`` /
``job-name``) labels, and ``spec.selector`` matches the uid label.  No
controller runs pods here, so STATUS stays ``Running`` and COMPLETIONS ``0/N``.
"""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.machinery import errors, meta
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.batch.v1.Job"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
RESTART_POLICIES = ["OnFailure", "Never"]
COMPLETION_MODES = ["NonIndexed", "Indexed"]
POD_REPLACEMENT_POLICIES = ["TerminatingOrFailed", "Failed"]
# Scheduling directives a suspended Job that never started may still change (upstream's
# AllowMutableSchedulingDirectives); everything else in spec.template is immutable.
_MUTABLE_WHILE_SUSPENDED = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def generate_selector(obj: dict) -> None:
    """Upstream's generateSelector: uid and name labels on the template, a selector on the uid."""
    md = obj.get("metadata") or {}
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    template = spec.setdefault("template", {})
    if not isinstance(template, dict):
        return
    tmd = template.setdefault("metadata", {})
    labels = tmd.get("labels") if isinstance(tmd.get("labels"), dict) else {}
    tmd["labels"] = labels
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, md.get("name", ""))
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, md.get("uid", ""))
    selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
    spec["selector"] = selector
    match = selector.get("matchLabels") if isinstance(selector.get("matchLabels"), dict) else {}
    selector["matchLabels"] = match
    match.setdefault(CONTROLLER_UID_LABEL, md.get("uid", ""))


def default_job_spec(spec: dict) -> None:
    """The JobSpec part of upstream's SetDefaults_Job (CronJob templates get only the pod defaults)."""
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    policy = spec.get("podFailurePolicy")
    if isinstance(policy, dict):
        for rule in policy.get("rules") or []:
            for cond in (rule.get("onPodConditions") or []) if isinstance(rule, dict) else []:
                if isinstance(cond, dict):
                    cond.setdefault("status", "True")
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if policy is not None else "TerminatingOrFailed"


def validate_job_spec(spec: dict, path: str) -> list[errors.Cause]:
    """What a Job's spec and a CronJob's jobTemplate.spec share (upstream's validateJobSpec)."""
    causes = workload.non_negative(spec, path, "parallelism", "completions", "activeDeadlineSeconds",
                                   "backoffLimit", "ttlSecondsAfterFinished")
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline == 0:
        causes.append(errors.field_invalid(f"{path}.activeDeadlineSeconds", deadline, "must be greater than 0"))
    mode = spec.get("completionMode")
    if mode is not None and mode not in COMPLETION_MODES:
        causes.append(errors.field_not_supported(f"{path}.completionMode", mode, COMPLETION_MODES))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(errors.field_required(f"{path}.completions", "when completion mode is Indexed"))
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and replacement not in POD_REPLACEMENT_POLICIES:
        causes.append(errors.field_not_supported(f"{path}.podReplacementPolicy", replacement,
                                                 POD_REPLACEMENT_POLICIES))
    return causes + workload.validate_template(spec, path, RESTART_POLICIES)


class JobStrategy(Strategy):
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        md = obj.setdefault("metadata", {})
        # upstream fills the uid before the strategy runs; the Store keeps one that is already set
        md.setdefault("uid", meta.new_uid())
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("manualSelector") is not True:
            generate_selector(obj)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        default_job_spec(spec)
        template_labels = workload.template_labels(workload.template_of(spec))
        md = obj.setdefault("metadata", {})
        if isinstance(template_labels, dict) and template_labels and not md.get("labels"):
            md["labels"] = copy.deepcopy(template_labels)
        workload.default_template(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = validate_job_spec(spec, "spec")
        if spec.get("selector") is None:
            causes.append(errors.field_required("spec.selector"))
        else:
            causes += field_checks.label_selector(spec.get("selector"), "spec.selector")
        return causes + workload.selector_matches_template(spec, "spec")

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
        old_spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
        causes = self.validate(rtype, new)
        causes += field_checks.immutable(spec.get("selector"), old_spec.get("selector"), "spec.selector",
                                     workload.go_label_selector)
        causes += field_checks.immutable(_frozen_template(new, old), _frozen_template(old, old), "spec.template")
        elastic = spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")
        if not elastic:
            causes += field_checks.immutable(spec.get("completions"), old_spec.get("completions"), "spec.completions")
        for name in ("completionMode", "backoffLimitPerIndex", "podFailurePolicy", "successPolicy"):
            causes += field_checks.immutable(spec.get(name), old_spec.get(name), f"spec.{name}")
        return causes


def _frozen_template(obj: dict, old: dict) -> Any:
    """spec.template without what a suspended, never-started Job may still change."""
    template = copy.deepcopy((obj.get("spec") or {}).get("template"))
    suspended = (old.get("spec") or {}).get("suspend") is True and not (old.get("status") or {}).get("startTime")
    if suspended and isinstance(template, dict):
        template.pop("metadata", None)
        for name in _MUTABLE_WHILE_SUSPENDED:
            (template.get("spec") or {}).pop(name, None)
    return template


def _has_condition(obj: dict, kind: str) -> bool:
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
               for c in columns.get_path(obj, "status", "conditions", default=[]) or [])


def _status(obj: dict) -> str:
    """Upstream's printJob STATUS column."""
    if _has_condition(obj, "Complete"):
        return "Complete"
    if _has_condition(obj, "Failed"):
        return "Failed"
    if columns.get_path(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _has_condition(obj, kind):
            return kind
    return "Running"


def _completions(obj: dict) -> str:
    succeeded = workload.status_int(obj, "succeeded")
    completions = columns.get_path(obj, "spec", "completions")
    if isinstance(completions, int):
        return f"{succeeded}/{completions}"
    parallelism = workload.spec_int(obj, "parallelism")
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _duration(obj: dict) -> str:
    start = columns.get_path(obj, "status", "startTime")
    if not start:
        return ""
    done = columns.get_path(obj, "status", "completionTime")
    if not done:
        return columns.since(start)
    try:
        return columns.human_duration((meta.parse_rfc3339(done) - meta.parse_rfc3339(start)).total_seconds())
    except ValueError:
        return ""


def resource_type() -> ResourceType:
    return ResourceType(
        group="batch", version="v1", kind="Job", plural="jobs", singular="job", namespaced=True,
        strategy=JobStrategy(), categories=("all",), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Status", _status, desc="Status of the job."),
            columns.column("Completions", _completions, desc="The completion status of the job."),
            columns.column("Duration", _duration, desc="Time required to complete the job."),
            columns.age_column(),
            *workload.wide_columns(),
        ),
    )
