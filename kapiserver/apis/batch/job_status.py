"""What a write to a Job's ``status`` may do (upstream's ValidateJobUpdateStatus).

With JobManagedBy on (1.32), upstream checks the status transitions an
external controller could get wrong (a finished Job does not come back, the
counters do not go down, a Complete Job has a completion time...), each rule
only when the fields it looks at change in this write, so a status that was
already odd can still be updated.  No controller runs Jobs here, so these
rules are what keeps a test or operator from writing a status kube-apiserver
would refuse.
"""
from __future__ import annotations

from typing import Any

from kapiserver.apis.batch import job_indexes
from kapiserver.machinery import errors, meta, validation
from kapiserver.machinery.errors import Cause


def _status(job: dict) -> dict:
    status = job.get("status")
    return status if isinstance(status, dict) else {}


def _spec(job: dict) -> dict:
    spec = job.get("spec")
    return spec if isinstance(spec, dict) else {}


def condition(job: dict, kind: str, value: str = "True") -> bool:
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == value
               for c in _status(job).get("conditions") or ())


def is_finished(job: dict) -> bool:
    return condition(job, "Complete") or condition(job, "Failed")


def _int(value: Any) -> int:
    return value if validation.is_int(value) else 0


def _time(value: Any) -> Any:
    try:
        return meta.parse_rfc3339(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _options(new: dict, old: dict) -> dict[str, bool]:
    """upstream's getStatusValidationOptions (JobManagedBy enabled)."""
    status, old_status = _status(new), _status(old)
    spec = _spec(new)
    indexed = spec.get("completionMode") == "Indexed"

    def changed(key: str) -> bool:
        return status.get(key) != old_status.get(key)

    finished_changed = is_finished(old) != is_finished(new)
    complete_changed = condition(old, "Complete") != condition(new, "Complete")
    failed_changed = condition(old, "Failed") != condition(new, "Failed")
    target_changed = condition(old, "FailureTarget") != condition(new, "FailureTarget")
    criteria_changed = condition(old, "SuccessCriteriaMet") != condition(new, "SuccessCriteriaMet")
    completed_changed = (status.get("completedIndexes") or "") != (old_status.get("completedIndexes") or "")
    failed_indexes_changed = changed("failedIndexes")
    suspended_zero = spec.get("suspend") is True and spec.get("completions") == 0
    resuming = condition(old, "Suspended") and condition(new, "Suspended", "False")
    return {
        "decreasing_succeeded": not indexed or spec.get("completions") != spec.get("parallelism"),
        "invalid_completed": completed_changed,
        "invalid_failed": failed_indexes_changed,
        "completed_non_indexed": completed_changed,
        "failed_without_per_index": failed_indexes_changed,
        "overlap": failed_indexes_changed or completed_changed,
        "failed_without_target": failed_changed or failed_indexes_changed,
        "complete_without_criteria": complete_changed or criteria_changed,
        "finished_with_active": finished_changed or changed("active"),
        "finished_without_start": (finished_changed or changed("startTime")) and not suspended_zero,
        "finished_with_uncounted": finished_changed or changed("uncountedTerminatedPods"),
        "start_time_update": changed("startTime") and not resuming,
        "completion_before_start": changed("startTime") or changed("completionTime"),
        "not_complete_with_time": complete_changed or changed("completionTime"),
        "complete_without_time": complete_changed or changed("completionTime"),
        "complete_with_failed": complete_changed or failed_changed,
        "complete_with_target": complete_changed or target_changed,
        "more_ready": changed("ready") or changed("active"),
        "finished_with_terminating": finished_changed or changed("terminating"),
    }


def _overlap(completed: str, failed: str, completions: int) -> str:
    """upstream's validateFailedIndexesNotOverlapCompleted ("" when they do not overlap)."""
    if not completed or not failed:
        return ""
    parsed_completed = [job_indexes.parse_interval(i, completions) for i in completed.split(",")]
    parsed_failed = [job_indexes.parse_interval(i, completions) for i in failed.split(",")]
    ci = fi = 0
    while ci < len(parsed_completed) and fi < len(parsed_failed):
        cx, cy, cerr = parsed_completed[ci]
        fx, fy, ferr = parsed_failed[fi]
        if cerr:
            ci += 1
        elif ferr:
            fi += 1
        else:
            if cx <= fy and fx <= cy:
                return f"failedIndexes and completedIndexes overlap at index: {max(cx, fx)}"
            if cx <= fx:
                ci += 1
            else:
                fi += 1
    return ""


def _omit(path: str, detail: str) -> Cause:
    return errors.field_invalid(path, errors.OMIT, detail)


def validate_status(job: dict, opts: dict[str, bool]) -> list[Cause]:
    """upstream's validateJobStatus."""
    status, spec = _status(job), _spec(job)
    causes = [errors.field_invalid(f"status.{k}", value, validation.IS_NEGATIVE)
              for k, value in ((k, status.get(k)) for k in ("active", "succeeded", "failed", "ready", "terminating"))
              if validation.is_int(value) and value < 0]
    uncounted = status.get("uncountedTerminatedPods")
    if isinstance(uncounted, dict):
        seen: set = set()
        for kind in ("succeeded", "failed"):
            for i, uid in enumerate(uncounted.get(kind) or ()):
                at = f"status.uncountedTerminatedPods.{kind}[{i}]"
                if not uid:
                    causes.append(errors.field_invalid(at, uid or "", "must not be empty"))
                elif uid in seen:
                    causes.append(errors.field_duplicate(at, uid))
                seen.add(uid)
    complete, failed = condition(job, "Complete"), condition(job, "Failed")
    target, criteria = condition(job, "FailureTarget"), condition(job, "SuccessCriteriaMet")
    if opts["complete_with_failed"] and complete and failed:
        causes.append(_omit("status.conditions", "cannot set Complete=True and Failed=true conditions"))
    if opts["complete_with_target"] and complete and target:
        causes.append(_omit("status.conditions", "cannot set Complete=True and FailureTarget=true conditions"))
    completion, start = status.get("completionTime"), status.get("startTime")
    if opts["not_complete_with_time"] and completion is not None and not complete:
        causes.append(errors.field_invalid("status.completionTime", completion,
                                           "cannot set completionTime when there is no Complete=True condition"))
    if opts["complete_without_time"] and completion is None and complete:
        causes.append(errors.field_required("status.completionTime", "completionTime is required for Complete jobs"))
    if opts["completion_before_start"] and start is not None and completion is not None:
        start_time, completion_time = _time(start), _time(completion)
        if start_time and completion_time and completion_time < start_time:
            causes.append(errors.field_invalid("status.completionTime", completion,
                                               "completionTime cannot be set before startTime"))
    if opts["failed_without_target"] and failed and not target:
        causes.append(_omit("status.conditions",
                            "cannot set Failed=True condition without the FailureTarget=true condition"))
    if opts["complete_without_criteria"] and complete and not criteria:
        causes.append(_omit("status.conditions",
                            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"))
    finished = complete or failed
    if opts["finished_with_active"] and _int(status.get("active")) > 0 and finished:
        causes.append(errors.field_invalid("status.active", status.get("active"),
                                           "active>0 is invalid for finished job"))
    if opts["finished_without_start"] and start is None and finished:
        causes.append(errors.field_required("status.startTime", "startTime is required for finished job"))
    if opts["finished_with_uncounted"] and finished and isinstance(uncounted, dict) and \
            (uncounted.get("failed") or uncounted.get("succeeded")):
        causes.append(_omit("status.uncountedTerminatedPods", "uncountedTerminatedPods needs to be empty for "
                                                               "finished job"))
    completions = spec.get("completions")
    completed = status.get("completedIndexes") or ""
    failed_indexes = status.get("failedIndexes")
    if opts["invalid_completed"] and validation.is_int(completions):
        _, problem = job_indexes.parse_indexes(completed, completions)
        if problem:
            causes.append(errors.field_invalid("status.completedIndexes", completed,
                                               f"error parsing completedIndexes: {problem}"))
    if opts["invalid_failed"] and validation.is_int(completions) and spec.get("backoffLimitPerIndex") is not None \
            and failed_indexes is not None:
        _, problem = job_indexes.parse_indexes(str(failed_indexes), completions)
        if problem:
            causes.append(errors.field_invalid("status.failedIndexes", failed_indexes,
                                               f"error parsing failedIndexes: {problem}"))
    indexed = spec.get("completionMode") == "Indexed"
    if opts["completed_non_indexed"] and completed and not indexed:
        causes.append(errors.field_invalid("status.completedIndexes", completed,
                                           "cannot set non-empty completedIndexes when non-indexed completion mode"))
    if opts["failed_without_per_index"] and spec.get("backoffLimitPerIndex") is None and failed_indexes is not None:
        causes.append(errors.field_invalid("status.failedIndexes", failed_indexes,
                                           "cannot set non-null failedIndexes when backoffLimitPerIndex is null"))
    if opts["overlap"] and validation.is_int(completions) and failed_indexes is not None:
        problem = _overlap(completed, str(failed_indexes), completions)
        if problem:
            causes.append(errors.field_invalid("status.failedIndexes", failed_indexes, problem))
    terminating = status.get("terminating")
    if opts["finished_with_terminating"] and _int(terminating) > 0 and finished:
        causes.append(errors.field_invalid("status.terminating", terminating,
                                           "terminating>0 is invalid for finished job"))
    ready = status.get("ready")
    if opts["more_ready"] and ready is not None and _int(ready) > _int(status.get("active")):
        causes.append(errors.field_invalid("status.ready", ready, "cannot set more ready pods than active"))
    if criteria and failed:
        causes.append(_omit("status.conditions", "cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if criteria and target:
        causes.append(_omit("status.conditions",
                            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"))
    if spec.get("successPolicy") is not None and not criteria and complete:
        causes.append(_omit("status.conditions",
                            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"))
    return causes


def validate_status_update(new: dict, old: dict) -> list[Cause]:
    """upstream's ValidateJobStatusUpdate."""
    opts = _options(new, old)
    causes = validate_status(new, opts)
    status, old_status = _status(new), _status(old)
    for kind in ("Failed", "Complete", "FailureTarget"):
        if condition(old, kind) and not condition(new, kind):
            causes.append(_omit("status.conditions", f"cannot disable the terminal {kind}=True condition"))
    if _int(status.get("failed")) < _int(old_status.get("failed")):
        causes.append(errors.field_invalid("status.failed", status.get("failed") or 0,
                                           "cannot decrease the failed counter"))
    if opts["decreasing_succeeded"] and _int(status.get("succeeded")) < _int(old_status.get("succeeded")):
        causes.append(errors.field_invalid("status.succeeded", status.get("succeeded") or 0,
                                           "cannot decrease the succeeded counter"))
    completion, old_completion = status.get("completionTime"), old_status.get("completionTime")
    if completion is not None and old_completion is not None and completion != old_completion:
        causes.append(errors.field_invalid("status.completionTime", completion, "completionTime cannot be mutated"))
    if opts["start_time_update"] and old_status.get("startTime") is not None and \
            old_status.get("startTime") != status.get("startTime") and _spec(new).get("suspend") is not True:
        causes.append(errors.field_required("status.startTime", "startTime cannot be removed for unsuspended job"))
    if condition(old, "SuccessCriteriaMet") and not condition(new, "SuccessCriteriaMet"):
        causes.append(_omit("status.conditions", "cannot disable the SuccessCriteriaMet=True condition"))
    if condition(old, "Complete") and not condition(old, "SuccessCriteriaMet") and \
            condition(new, "SuccessCriteriaMet"):
        causes.append(_omit("status.conditions",
                            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"))
    return causes
