"""Jobs (batch/v1): the generated selector and labels, defaults, template checks, the immutable parts.

Unless ``manualSelector: true``, a Job selects its pods by its own uid: the
template gets ``batch.kubernetes.io/controller-uid`` and
``batch.kubernetes.io/job-name`` (and the legacy ``controller-uid`` /
``job-name``) labels, and ``spec.selector`` matches the uid label.  No
controller runs pods here, so STATUS stays ``Running`` and COMPLETIONS ``0/N``.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.apps import workload
from kapiserver.apis.batch import job_indexes, job_status
from kapiserver.machinery import errors, gorepr, meta, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.batch.v1.Job"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
RESTART_POLICIES = ["OnFailure", "Never"]
COMPLETION_MODES = ["NonIndexed", "Indexed"]
POD_REPLACEMENT_POLICIES = ["Failed", "TerminatingOrFailed"]
# Scheduling directives a suspended Job that never started may still change (upstream's
# AllowMutableSchedulingDirectives); everything else in spec.template is immutable.
_MUTABLE_WHILE_SUSPENDED = ("nodeSelector", "tolerations", "schedulingGates")


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
    labels = as_dict(tmd.get("labels"))
    tmd["labels"] = labels
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, md.get("name", ""))
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, md.get("uid", ""))
    selector = as_dict(spec.get("selector"))
    spec["selector"] = selector
    match = as_dict(selector.get("matchLabels"))
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


MAX_PARALLELISM_INDEXED = 100000
MAX_FAILED_INDEXES = 100000
COMPLETIONS_SOFT_LIMIT = 100000
PARALLELISM_LIMIT_HIGH_COMPLETIONS = 10000
MAX_FAILED_INDEXES_HIGH_COMPLETIONS = 10000
MAX_FAILURE_POLICY_RULES = 20
MAX_EXIT_CODES = 255
MAX_POD_CONDITION_PATTERNS = 20
MAX_MANAGED_BY_LENGTH = 63
MAX_SUCCEEDED_INDEXES_LENGTH = 64 * 1024
MAX_SUCCESS_POLICY_RULES = 20
FAILURE_ACTIONS = ["Count", "FailIndex", "FailJob", "Ignore"]
EXIT_CODE_OPERATORS = ["In", "NotIn"]
CONDITION_STATUSES = ["False", "True", "Unknown"]


def validate_job_spec(spec: dict, path: str, opts: Optional[podspec.PodOptions] = None) -> list[errors.Cause]:
    """What a Job's spec and a CronJob's jobTemplate.spec share (upstream's validateJobSpec)."""
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    causes = field_checks.non_negative(spec, path, "parallelism", "completions", "activeDeadlineSeconds",
                                       "backoffLimit", "ttlSecondsAfterFinished", "backoffLimitPerIndex")
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if max_failed is not None:
        causes += field_checks.non_negative(spec, path, "maxFailedIndexes")
        if per_index is None:
            causes.append(errors.field_required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        causes += validation.is_domain_prefixed_path(f"{path}.managedBy", str(managed_by))
        if len(str(managed_by)) > MAX_MANAGED_BY_LENGTH:
            causes.append(errors.field_too_long(f"{path}.managedBy", MAX_MANAGED_BY_LENGTH))
    mode = spec.get("completionMode")
    if mode is not None:
        if mode not in COMPLETION_MODES:
            causes.append(errors.field_not_supported(f"{path}.completionMode", mode, COMPLETION_MODES))
        if mode == "Indexed":
            if completions is None:
                causes.append(errors.field_required(f"{path}.completions", "when completion mode is Indexed"))
            if _int(parallelism) > MAX_PARALLELISM_INDEXED:
                causes.append(errors.field_invalid(f"{path}.parallelism", parallelism, "must be less than or equal to "
                                                   f"{MAX_PARALLELISM_INDEXED} when completion mode is Indexed"))
            if completions is not None and max_failed is not None and _int(max_failed) > _int(completions):
                causes.append(errors.field_invalid(f"{path}.maxFailedIndexes", max_failed,
                                                   "must be less than or equal to completions"))
            if max_failed is not None and _int(max_failed) > MAX_FAILED_INDEXES:
                causes.append(errors.field_invalid(f"{path}.maxFailedIndexes", max_failed,
                                                   f"must be less than or equal to {MAX_FAILED_INDEXES}"))
            if completions is not None and _int(completions) > COMPLETIONS_SOFT_LIMIT and per_index is not None:
                if max_failed is None:
                    causes.append(errors.field_required(f"{path}.maxFailedIndexes", "must be specified when "
                                                        f"completions is above {COMPLETIONS_SOFT_LIMIT}"))
                if _int(parallelism) > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
                    causes.append(errors.field_invalid(f"{path}.parallelism", parallelism, "must be less than or "
                                                       f"equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} when "
                                                       f"completions are above {COMPLETIONS_SOFT_LIMIT} and used "
                                                       "with backoff limit per index"))
                if max_failed is not None and _int(max_failed) > MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
                    causes.append(errors.field_invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than "
                                                       f"or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} when "
                                                       f"completions are above {COMPLETIONS_SOFT_LIMIT} and used "
                                                       "with backoff limit per index"))
    if mode in (None, "NonIndexed"):
        if per_index is not None:
            causes.append(errors.field_invalid(f"{path}.backoffLimitPerIndex", per_index,
                                               "requires indexed completion mode"))
        if max_failed is not None:
            causes.append(errors.field_invalid(f"{path}.maxFailedIndexes", max_failed,
                                               "requires indexed completion mode"))
    if spec.get("podFailurePolicy") is not None:
        causes += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    if spec.get("successPolicy") is not None:
        if mode != "Indexed":
            causes.append(errors.field_invalid(f"{path}.successPolicy", gorepr.GoRepr(
                _go_success_policy(spec["successPolicy"])), "requires indexed completion mode"))
        else:
            causes += _validate_success_policy(spec, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        if spec.get("podFailurePolicy") is not None:
            if replacement != "Failed":
                causes.append(errors.field_not_supported(f"{path}.podReplacementPolicy", replacement, ["Failed"]))
        elif replacement not in POD_REPLACEMENT_POLICIES:
            causes.append(errors.field_not_supported(f"{path}.podReplacementPolicy", replacement,
                                                     sorted(POD_REPLACEMENT_POLICIES)))
    template = as_dict(spec.get("template"))
    causes += podspec.validate_pod_template_spec(template, f"{path}.template", opts or podspec.PodOptions())
    policy = (template.get("spec") or {}).get("restartPolicy") or ""
    policy_path = f"{path}.template.spec.restartPolicy"
    if policy in ("Always", ""):
        causes.append(errors.field_required(policy_path, 'valid values: "OnFailure", "Never"'))
    elif policy not in RESTART_POLICIES:
        causes.append(errors.field_not_supported(policy_path, policy, RESTART_POLICIES))
    elif spec.get("podFailurePolicy") is not None and policy != "Never":
        causes.append(errors.field_invalid(policy_path, policy,
                                           'only "Never" is supported when podFailurePolicy is specified'))
    return causes


def _int(value: Any) -> int:
    return value if validation.is_int(value) else 0


def _validate_pod_failure_policy(spec: dict, path: str) -> list[errors.Cause]:
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    causes: list[errors.Cause] = []
    if len(rules) > MAX_FAILURE_POLICY_RULES:
        causes.append(errors.field_too_many(f"{path}.rules", len(rules), MAX_FAILURE_POLICY_RULES))
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    names = {(c or {}).get("name") for key in ("containers", "initContainers") for c in pod_spec.get(key) or ()
             if isinstance(c, dict)}
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        at = f"{path}.rules[{i}]"
        action = rule.get("action") or ""
        if not action:
            causes.append(errors.field_required(f"{at}.action", f"valid values: {gorepr.quoted_list(FAILURE_ACTIONS)}"))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                causes.append(errors.field_invalid(f"{at}.action", action,
                                                   "requires the backoffLimitPerIndex to be set"))
        elif action not in FAILURE_ACTIONS:
            causes.append(errors.field_not_supported(f"{at}.action", action, FAILURE_ACTIONS))
        exit_codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if exit_codes is not None:
            causes += _validate_exit_codes(exit_codes if isinstance(exit_codes, dict) else {}, f"{at}.onExitCodes",
                                           names)
        if conditions:
            if len(conditions) > MAX_POD_CONDITION_PATTERNS:
                causes.append(errors.field_too_many(f"{at}.onPodConditions", len(conditions),
                                                    MAX_POD_CONDITION_PATTERNS))
            for j, pattern in enumerate(conditions):
                pattern = pattern if isinstance(pattern, dict) else {}
                kind = pattern.get("type") or ""
                causes.extend(errors.field_invalid(f"{at}.onPodConditions[{j}].type", kind, m)
                              for m in validation.is_qualified_name(kind))
                status = pattern.get("status") or ""
                if not status:
                    causes.append(errors.field_required(f"{at}.onPodConditions[{j}].status",
                                                        f"valid values: {gorepr.quoted_list(CONDITION_STATUSES)}"))
                elif status not in CONDITION_STATUSES:
                    causes.append(errors.field_not_supported(f"{at}.onPodConditions[{j}].status", status,
                                                             CONDITION_STATUSES))
        if exit_codes is not None and conditions:
            causes.append(errors.field_invalid(at, errors.OMIT,
                                               "specifying both OnExitCodes and OnPodConditions is not supported"))
        if exit_codes is None and not conditions:
            causes.append(errors.field_invalid(at, errors.OMIT,
                                               "specifying one of OnExitCodes and OnPodConditions is required"))
    return causes


def _validate_exit_codes(rule: dict, path: str, names: set) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    operator = rule.get("operator") or ""
    if not operator:
        causes.append(errors.field_required(f"{path}.operator",
                                            f"valid values: {gorepr.quoted_list(EXIT_CODE_OPERATORS)}"))
    elif operator not in EXIT_CODE_OPERATORS:
        causes.append(errors.field_not_supported(f"{path}.operator", operator, EXIT_CODE_OPERATORS))
    container = rule.get("containerName")
    if container is not None and container not in names:
        causes.append(errors.field_invalid(f"{path}.containerName", container,
                                           "must be one of the container or initContainer names in the pod template"))
    values = rule.get("values") or []
    if not values:
        causes.append(errors.field_invalid(f"{path}.values", gorepr.int_slice(rule.get("values")),
                                           "at least one value is required"))
    elif len(values) > MAX_EXIT_CODES:
        causes.append(errors.field_too_many(f"{path}.values", len(values), MAX_EXIT_CODES))
    seen: set = set()
    ordered = True
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            causes.append(errors.field_invalid(f"{path}.values[{j}]", value, "must not be 0 for the In operator"))
        if value in seen:
            causes.append(errors.field_duplicate(f"{path}.values[{j}]", value))
        seen.add(value)
        if j > 0 and isinstance(values[j - 1], int) and isinstance(value, int) and values[j - 1] > value:
            ordered = False
    if not ordered:
        causes.append(errors.field_invalid(f"{path}.values", gorepr.int_slice(values), "must be ordered"))
    return causes


def _go_success_policy(policy: Any) -> str:
    rules = [r if isinstance(r, dict) else {} for r in (policy or {}).get("rules") or ()] if isinstance(policy,
                                                                                                         dict) else []
    items = ", ".join(gorepr.struct("batch.SuccessPolicyRule", (
        ("SucceededIndexes", gorepr.pointer(r.get("succeededIndexes"), "string")),
        ("SucceededCount", gorepr.pointer(r.get("succeededCount"), "int32")))) for r in rules)
    return f"batch.SuccessPolicy{{Rules:[]batch.SuccessPolicyRule{{{items}}}}}"


def _validate_success_policy(spec: dict, path: str) -> list[errors.Cause]:
    rules = (spec.get("successPolicy") or {}).get("rules") or []
    causes: list[errors.Cause] = []
    if not rules:
        causes.append(errors.field_required(f"{path}.rules",
                                            "at least one rules must be specified when the successPolicy is specified"))
    if len(rules) > MAX_SUCCESS_POLICY_RULES:
        causes.append(errors.field_too_many(f"{path}.rules", len(rules), MAX_SUCCESS_POLICY_RULES))
    completions = _int(spec.get("completions"))
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        at = f"{path}.rules[{i}]"
        indexes, count = rule.get("succeededIndexes"), rule.get("succeededCount")
        if indexes is None and count is None:
            causes.append(errors.field_required(at, "at least one of succeededCount or succeededIndexes must be "
                                                    "specified"))
        total = 0
        if indexes is not None:
            if len(str(indexes)) > MAX_SUCCEEDED_INDEXES_LENGTH:
                causes.append(errors.field_too_long(f"{at}.succeededIndexes", MAX_SUCCEEDED_INDEXES_LENGTH))
            total, problem = job_indexes.parse_indexes(str(indexes), completions)
            if problem:
                causes.append(errors.field_invalid(f"{at}.succeededIndexes", indexes,
                                                   f"error parsing succeededIndexes: {problem}"))
        if count is not None:
            causes += field_checks.non_negative(rule, at, "succeededCount")
            if _int(count) > completions:
                causes.append(errors.field_invalid(f"{at}.succeededCount", count, f"must be less than or equal to "
                                                   f"{completions} (the number of specified completions)"))
            if indexes is not None and _int(count) > total:
                causes.append(errors.field_invalid(f"{at}.succeededCount", count, f"must be less than or equal to "
                                                   f"{total} (the number of indexes in the specified "
                                                   "succeededIndexes field)"))
    return causes


def _validate_generated_selector(obj: dict, require_prefixed: bool) -> list[errors.Cause]:
    """upstream's validateGeneratedSelector: the labels and selector the server generated are intact."""
    spec = as_dict(obj.get("spec"))
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return []
    md = obj.get("metadata") or {}
    uid, name = md.get("uid") or "", md.get("name") or ""
    causes: list[errors.Cause] = []
    if not uid:
        causes.append(errors.field_required("metadata.uid"))
    template_md = (spec.get("template") or {}).get("metadata") or {}
    found = template_md.get("labels") if isinstance(template_md.get("labels"), dict) else None
    expected = [(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)]
    if require_prefixed:
        expected += [(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]
    for key, value in expected:
        path = f"spec.template.metadata.labels[{key}]"
        if found is None or key not in found:
            causes.append(errors.field_required(path, f"must be '{value}'"))
        elif found[key] != value:
            causes.append(errors.field_invalid(path, gorepr.string_map(found), f"must be '{value}'"))
    selector = workload.parse_selector(spec.get("selector"))
    if selector is not None and not selector.matches(dict(expected)):
        causes.append(errors.field_invalid("spec.selector", gorepr.label_selector(spec.get("selector")),
                                           "`selector` not auto-generated"))
    return causes


def validate_job(obj: dict, opts: podspec.PodOptions, require_prefixed: bool = True) -> list[errors.Cause]:
    """upstream's ValidateJob, after the generic metadata checks."""
    spec = as_dict(obj.get("spec"))
    causes = field_checks.kube_object_meta(obj) + _validate_generated_selector(obj, require_prefixed)
    causes += validate_job_spec(spec, "spec", opts)
    if spec.get("selector") is None:
        causes.append(errors.field_required("spec.selector"))
    else:
        causes += validation.validate_label_selector(spec.get("selector"), "spec.selector",
                                                     opts.allow_invalid_label_value_in_selector)
    selector = workload.parse_selector(spec.get("selector"))
    if selector is not None and not workload.selector_matches(selector, workload.template_of(spec)):
        causes.append(workload.selector_mismatch(workload.template_of(spec), "spec"))
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and validation.is_int(completions) and completions > 0:
        name = (obj.get("metadata") or {}).get("name") or ""
        hostname = f"{name}-{completions - 1}"
        if validation.is_dns1123_label(hostname):
            causes.append(errors.field_invalid("metadata.name", name, "will not able to create pod with invalid DNS "
                                               f"label: {hostname}"))
    return causes


def _go_template(_: Any) -> str:
    return "core.PodTemplateSpec{...}"


def _labels_from_template(obj: dict, spec: dict) -> None:
    """SetDefaults_Job: a Job without labels gets its pod template's."""
    template_labels = workload.template_labels(workload.template_of(spec))
    md = obj.setdefault("metadata", {})
    if isinstance(template_labels, dict) and template_labels and not md.get("labels"):
        md["labels"] = copy.deepcopy(template_labels)


class JobStrategy(Strategy):
    tracks_generation = True

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        md = obj.setdefault("metadata", {})
        # upstream fills the uid before the strategy runs; the Store keeps one that is already set
        md.setdefault("uid", meta.new_uid())
        spec = obj.get("spec")
        if isinstance(spec, dict) and spec.get("manualSelector") is not True:
            generate_selector(obj)
            # the generated labels become the Job's own when it has none, as upstream's
            # SetDefaults_Job gives them to every reader of the stored Job
            _labels_from_template(obj, spec)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        default_job_spec(spec)
        _labels_from_template(obj, spec)
        workload.default_template(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_job(obj, workload.template_options(obj))

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateJob and ValidateJobUpdate."""
        spec = as_dict(new.get("spec"))
        old_spec = as_dict(old.get("spec"))
        opts = workload.template_options(new, old)
        opts.allow_invalid_label_value_in_selector = (opts.allow_invalid_label_value_in_selector
                                                      or validation.label_selector_has_invalid_value(
                                                          old_spec.get("selector")))
        old_labels = workload.template_labels(workload.template_of(old_spec)) or {}
        require_prefixed = JOB_NAME_LABEL in old_labels and CONTROLLER_UID_LABEL in old_labels
        causes = validate_job(new, opts, require_prefixed)
        if spec.get("completionMode") != "Indexed":
            causes += field_checks.immutable(spec.get("completions"), old_spec.get("completions"), "spec.completions")
        elif spec.get("completions") != old_spec.get("completions") and spec.get("completions") is not None \
                and spec.get("completions") != spec.get("parallelism"):
            causes.append(errors.field_invalid("spec.completions", spec.get("completions"),
                                               "can only be modified in tandem with spec.parallelism"))
        causes += field_checks.immutable(spec.get("selector"), old_spec.get("selector"), "spec.selector",
                                         gorepr.label_selector)
        causes += field_checks.immutable(_frozen_template(new, old), _frozen_template(old, old), "spec.template",
                                         _go_template)
        for name in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
            causes += field_checks.immutable(spec.get(name), old_spec.get(name), f"spec.{name}")
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateJobUpdateStatus with the JobManagedBy options of 1.32."""
        return job_status.validate_status_update(new, old)


def _frozen_template(obj: dict, old: dict) -> Any:
    """spec.template without what a suspended, never-started Job may still change."""
    template = copy.deepcopy((obj.get("spec") or {}).get("template"))
    suspended = (old.get("spec") or {}).get("suspend") is True and not (old.get("status") or {}).get("startTime")
    if suspended and isinstance(template, dict):
        md = template.get("metadata")
        if isinstance(md, dict):
            md.pop("labels", None)
            md.pop("annotations", None)
        pod_spec = as_dict(template.get("spec"))
        for name in _MUTABLE_WHILE_SUSPENDED:
            pod_spec.pop(name, None)
        affinity = pod_spec.get("affinity")
        if isinstance(affinity, dict):
            affinity.pop("nodeAffinity", None)
            if not affinity:
                pod_spec.pop("affinity", None)
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
        # the count of succeeded pods, under upstream's label
        selectable_fields={"status.successful": lambda o: str(columns.get_path(o, "status", "succeeded", default=0))},
        field_labels=FieldLabelConversion(("metadata.name", "metadata.namespace", "status.successful"),
                                          lambda label: f"field label {gorepr.quote(label)} not supported for Job"),
        table_columns=(
            columns.name_column(),
            columns.column("Status", _status, desc="Status of the job."),
            columns.column("Completions", _completions, desc="The completion status of the job."),
            columns.column("Duration", _duration, desc="Time required to complete the job."),
            columns.age_column(),
            *workload.wide_columns(),
        ),
    )
