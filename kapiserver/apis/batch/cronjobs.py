"""CronJobs (batch/v1): schedule and time-zone checks, defaults, the job template, upstream's columns."""
from __future__ import annotations

import re
import zoneinfo

from kapiserver.apis import columns
from kapiserver.apis.apps import workload
from kapiserver.apis.batch import cron, jobs
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.batch.v1.CronJob"
CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
_TZ_CHARS = re.compile(r"[A-Za-z0-9_+\-/]+")
TZ_IN_SCHEDULE = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"


def default_cronjob(obj: dict) -> None:
    """Upstream's SetDefaults_CronJob; the job template gets only pod-template defaults, as upstream."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    if not spec.get("concurrencyPolicy"):
        spec["concurrencyPolicy"] = "Allow"
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_spec = (spec.get("jobTemplate") or {}).get("spec") if isinstance(spec.get("jobTemplate"), dict) else None
    workload.default_template(job_spec)


def _validate_time_zone(zone: object) -> list[errors.Cause]:
    path = "spec.timeZone"
    if not isinstance(zone, str):
        return []
    if not zone:
        return [errors.field_invalid(path, zone, "timeZone must be nil or non-empty string")]
    if zone.lower() == "local":
        return [errors.field_invalid(path, zone,
                                     "timeZone must be an explicit time zone as defined in "
                                     "https://www.iana.org/time-zones")]
    try:
        if not _TZ_CHARS.fullmatch(zone):
            raise ValueError
        zoneinfo.ZoneInfo(zone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):
        return [errors.field_invalid(path, zone, f"unknown time zone {zone}")]
    return []


class CronJobStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_cronjob(obj)

    def _validate(self, obj: dict, allow_tz: bool) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes: list[errors.Cause] = []
        schedule = spec.get("schedule")
        if not schedule:
            causes.append(errors.field_required("spec.schedule"))
        elif isinstance(schedule, str):
            problem = cron.schedule_error(schedule)
            if problem:
                causes.append(errors.field_invalid("spec.schedule", schedule, problem))
            if "TZ" in schedule and not allow_tz:
                causes.append(errors.field_invalid("spec.schedule", schedule, TZ_IN_SCHEDULE))
        causes += _validate_time_zone(spec.get("timeZone"))
        policy = spec.get("concurrencyPolicy")
        if policy not in CONCURRENCY_POLICIES:
            causes.append(errors.field_not_supported("spec.concurrencyPolicy", policy or "", CONCURRENCY_POLICIES))
        causes += workload.non_negative(spec, "spec", "startingDeadlineSeconds", "successfulJobsHistoryLimit",
                                        "failedJobsHistoryLimit")
        template = spec.get("jobTemplate")
        job_spec = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(job_spec, dict):
            job_spec = {}
        return causes + jobs.validate_job_spec(job_spec, "spec.jobTemplate.spec")

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return self._validate(obj, allow_tz=False)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        # an old object that already had TZ in its schedule keeps it (upstream's AllowTZInSchedule)
        old_schedule = (old.get("spec") or {}).get("schedule") or ""
        return self._validate(new, allow_tz="TZ" in old_schedule)


def _suspend(obj: dict) -> str:
    value = columns.get_path(obj, "spec", "suspend")
    return "<unset>" if value is None else ("True" if value else "False")


def _last_schedule(obj: dict) -> str:
    when = columns.get_path(obj, "status", "lastScheduleTime")
    return columns.since(when) if when else "<none>"


def resource_type() -> ResourceType:
    template = ("spec", "jobTemplate", "spec", "template")
    return ResourceType(
        group="batch", version="v1", kind="CronJob", plural="cronjobs", singular="cronjob", namespaced=True,
        strategy=CronJobStrategy(), short_names=("cj",), categories=("all",), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Schedule", lambda o: columns.get_path(o, "spec", "schedule", default=""),
                           desc="The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
            columns.column("Timezone", lambda o: columns.get_path(o, "spec", "timeZone", default="<none>"),
                           desc="The time zone name for the given schedule, see "
                                "https://en.wikipedia.org/wiki/List_of_tz_database_time_zones."),
            columns.column("Suspend", _suspend, type="boolean",
                           desc="This flag tells the controller to suspend subsequent executions."),
            columns.column("Active", lambda o: len(columns.get_path(o, "status", "active", default=[]) or []),
                           type="integer", desc="A list of pointers to currently running jobs."),
            columns.column("Last Schedule", _last_schedule,
                           desc="Information when was the last time the job was successfully scheduled."),
            columns.age_column(),
            *workload.wide_columns(("spec", "jobTemplate", "spec", "selector"), template),
        ),
    )
