"""CronJobs (batch/v1): schedule and time-zone checks, defaults, the job template, upstream's columns."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.apis.batch import cron, jobs
from kapiserver.machinery import errors, gorepr
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.batch.v1.CronJob"
CONCURRENCY_POLICIES = ["Allow", "Forbid", "Replace"]
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


_TZ_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


def _validate_time_zone(zone: Any) -> list[errors.Cause]:
    """upstream's validateTimeZone (the zone name must be one time.LoadLocation knows)."""
    path = "spec.timeZone"
    if not isinstance(zone, str):
        return []
    if not zone:
        return [errors.field_invalid(path, zone, "timeZone must be nil or non-empty string")]
    for part in zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.fullmatch(part):
            return [errors.field_invalid(path, zone, f"unknown time zone {zone}")]
    causes = []
    if zone.lower() == "local":
        causes.append(errors.field_invalid(path, zone, "timeZone must be an explicit time zone as defined in "
                                                       "https://www.iana.org/time-zones"))
    if zone != "Local" and zone != "UTC":
        # zoneinfo (with sysconfig, which finds the zone files) loads with the first CronJob
        # that names a zone, not with every start
        import zoneinfo
        try:
            zoneinfo.ZoneInfo(zone)
        except (ValueError, zoneinfo.ZoneInfoNotFoundError, OSError):
            causes.append(errors.field_invalid(path, zone, f"unknown time zone {zone}"))
    return causes


def validate_cronjob_spec(spec: dict, old_spec: Optional[dict], opts: podspec.PodOptions) -> list[errors.Cause]:
    """upstream's validateCronJobSpec."""
    causes: list[errors.Cause] = []
    schedule = spec.get("schedule")
    if not schedule:
        causes.append(errors.field_required("spec.schedule"))
    elif isinstance(schedule, str):
        problem = cron.schedule_error(schedule)
        if problem:
            causes.append(errors.field_invalid("spec.schedule", schedule, problem))
        allow_tz = old_spec is not None and "TZ" in str(old_spec.get("schedule") or "")
        if allow_tz and "TZ" in schedule and spec.get("timeZone") is not None:
            causes.append(errors.field_invalid("spec.schedule", schedule,
                                               "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
        elif not allow_tz and "TZ" in schedule:
            causes.append(errors.field_invalid("spec.schedule", schedule, TZ_IN_SCHEDULE))
    causes += field_checks.non_negative(spec, "spec", "startingDeadlineSeconds")
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        causes += _validate_time_zone(spec.get("timeZone"))
    policy = spec.get("concurrencyPolicy") or ""
    if not policy:
        causes.append(errors.field_required("spec.concurrencyPolicy"))
    elif policy not in CONCURRENCY_POLICIES:
        causes.append(errors.field_not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    template = as_dict(spec.get("jobTemplate"))
    job_spec = as_dict(template.get("spec"))
    causes += jobs.validate_job_spec(job_spec, "spec.jobTemplate.spec", opts)
    if job_spec.get("selector") is not None:
        causes.append(errors.field_invalid("spec.jobTemplate.spec.selector", gorepr.label_selector(
            job_spec["selector"]), "`selector` will be auto-generated"))
    if job_spec.get("manualSelector") is True:
        causes.append(errors.field_not_supported("spec.jobTemplate.spec.manualSelector", True, ["nil", "false"]))
    return causes + field_checks.non_negative(spec, "spec", "successfulJobsHistoryLimit", "failedJobsHistoryLimit")


def _options(obj: dict, old: Optional[dict] = None) -> podspec.PodOptions:
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    def template(o: Optional[dict]) -> Any:
        return (((o or {}).get("spec") or {}).get("jobTemplate") or {}).get("spec", {}).get("template")
    return podspec.template_options(template(obj), template(old) if old is not None else None)


class CronJobStrategy(Strategy):
    tracks_generation = True

    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_cronjob(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateCronJobCreate."""
        spec = as_dict(obj.get("spec"))
        causes = field_checks.kube_object_meta(obj) + validate_cronjob_spec(spec, None, _options(obj))
        name = (obj.get("metadata") or {}).get("name") or ""
        if len(name) > 52:
            causes.append(errors.field_invalid("metadata.name", name, "must be no more than 52 characters"))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateCronJobUpdate (an old schedule with TZ keeps it)."""
        spec = as_dict(new.get("spec"))
        old_spec = as_dict(old.get("spec"))
        return field_checks.kube_object_meta(new) + validate_cronjob_spec(spec, old_spec, _options(new, old))

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return []


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
