"""PodSecurity (upstream's admission plugin of that name, on by default).

A namespace chooses, with labels, which Pod Security Standard its pods meet:

    pod-security.kubernetes.io/enforce: restricted     # refuse pods that violate it
    pod-security.kubernetes.io/enforce-version: v1.30  # optional, "latest" by default
    pod-security.kubernetes.io/warn: baseline          # answer with a Warning header
    pod-security.kubernetes.io/audit: baseline         # add an audit annotation

Levels are ``privileged`` (no checks), ``baseline`` and ``restricted``
(``checks.py``).  What a namespace does not label comes from the plugin's
configuration (``PodSecurityConfiguration``: ``defaults`` and ``exemptions``
for usernames, runtime classes and namespaces), by default privileged.

Pods are checked on create, on updates that change more than the fields that
may change on a running pod, and through ``pods/ephemeralcontainers``.
Workload resources (Deployments, Jobs, ...) are only warned and audited about
their pod template, as upstream.  A namespace whose labels are not valid is
refused 422; changing a namespace's enforce level answers with warnings that
name the existing pods which violate it (try it with ``--dry-run=server``).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional

from kapiserver.admission.errors import PluginError, admission_forbidden, resource_name
from kapiserver.admission.pod_security import levels
from kapiserver.apis.columns import get_path
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes

if TYPE_CHECKING:
    from kapiserver.admission.pod_security.checks import Violation

PLUGIN_NAME = "PodSecurity"
LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LEVELS = (levels.PRIVILEGED, levels.BASELINE, levels.RESTRICTED)
CONFIG_API_VERSIONS = ("pod-security.admission.config.k8s.io/v1", "pod-security.admission.config.k8s.io/v1beta1",
                       "pod-security.admission.config.k8s.io/v1alpha1")
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")

AUDIT_ENFORCE_POLICY = LABEL_PREFIX + "enforce-policy"
AUDIT_VIOLATIONS = LABEL_PREFIX + "audit-violations"
AUDIT_EXEMPT = LABEL_PREFIX + "exempt"
# a namespace's new enforce level is checked against this many of its pods (upstream's limit)
MAX_PODS_TO_CHECK = 3000

# where each workload kind keeps its pod template: (group, plural) -> path to the template
POD_TEMPLATE_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "podtemplates"): ("template",),
    ("", "replicationcontrollers"): ("spec", "template"),
    ("apps", "replicasets"): ("spec", "template"),
    ("apps", "deployments"): ("spec", "template"),
    ("apps", "statefulsets"): ("spec", "template"),
    ("apps", "daemonsets"): ("spec", "template"),
    ("batch", "jobs"): ("spec", "template"),
    ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template"),
}
# pod spec fields that change on a running pod without changing what it may do
_INSIGNIFICANT_SPEC_FIELDS = ("activeDeadlineSeconds", "tolerations", "schedulingGates")


class LevelVersion(NamedTuple):
    level: str
    minor: Optional[int]  # None: latest

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.minor is None else f'v1.{self.minor}'}"


class Policy(NamedTuple):
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion


def _parse_level(value: object) -> Optional[str]:
    return value if value in LEVELS else None


def _parse_version(value: object) -> tuple[bool, Optional[int]]:
    """(valid, minor); "latest" is (True, None)."""
    if value == "latest":
        return True, None
    match = _VERSION.match(value) if isinstance(value, str) else None
    return (True, int(match.group(1))) if match else (False, None)


def policy_from_labels(labels: dict, defaults: Policy) -> tuple[Policy, list[str]]:
    """The namespace's policy and what is wrong with its labels (upstream's PolicyToEvaluate).

    An invalid level counts as restricted and an invalid version as latest, so a typo
    never makes a namespace less strict."""
    modes: dict[str, LevelVersion] = {}
    problems = []
    for mode in MODES:
        default: LevelVersion = getattr(defaults, mode)
        level, minor = default.level, default.minor
        key = LABEL_PREFIX + mode
        if key in labels:
            level = _parse_level(labels[key]) or levels.RESTRICTED
            if _parse_level(labels[key]) is None:
                problems.append(f'metadata.labels[{key}]: Invalid value: "{labels[key]}": must be one of '
                                f'{", ".join(LEVELS)}')
        version_key = f"{key}-version"
        if version_key in labels:
            valid, minor = _parse_version(labels[version_key])
            if not valid:
                problems.append(f'metadata.labels[{version_key}]: Invalid value: "{labels[version_key]}": '
                                f'must be "latest" or of the form "v1.x"')
        modes[mode] = LevelVersion(level, minor)
    return Policy(**modes), problems


class Exemptions(NamedTuple):
    usernames: frozenset[str] = frozenset()
    runtime_classes: frozenset[str] = frozenset()
    namespaces: frozenset[str] = frozenset()


class PodSecurityConfigError(ValueError):
    """The plugin's configuration cannot be used."""


def parse_configuration(data: Optional[bytes]) -> tuple[Policy, Exemptions]:
    privileged = LevelVersion(levels.PRIVILEGED, None)
    if not data:
        return Policy(privileged, privileged, privileged), Exemptions()
    import yaml  # (with a plugin configuration only)

    try:
        config = yaml.safe_load(data) or {}
    except yaml.YAMLError as e:
        raise PodSecurityConfigError(f"PodSecurity configuration: invalid YAML: {e}") from None
    if not isinstance(config, dict) or config.get("kind") != "PodSecurityConfiguration" \
            or config.get("apiVersion") not in CONFIG_API_VERSIONS:
        raise PodSecurityConfigError("PodSecurity configuration: expected kind PodSecurityConfiguration of "
                                     f"apiVersion {CONFIG_API_VERSIONS[0]}")
    defaults = config.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise PodSecurityConfigError("PodSecurity configuration: defaults must be a map")
    labels = {LABEL_PREFIX + k: v for k, v in defaults.items()}
    policy, problems = policy_from_labels(labels, Policy(privileged, privileged, privileged))
    if problems:
        raise PodSecurityConfigError("PodSecurity configuration: " + "; ".join(
            p.replace(f"metadata.labels[{LABEL_PREFIX}", "defaults[") for p in problems))
    exempt = config.get("exemptions") or {}

    def names(key: str) -> frozenset[str]:
        value = exempt.get(key) or [] if isinstance(exempt, dict) else []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PodSecurityConfigError(f"PodSecurity configuration: exemptions.{key} must be a list of strings")
        return frozenset(value)

    return policy, Exemptions(names("usernames"), names("runtimeClasses"), names("namespaces"))


def _significant_pod_update(new: dict, old: dict) -> bool:
    """Upstream's isSignificantPodUpdate: an update that only swaps images or changes the
    fields of a running pod that do not widen what it may do is not checked again."""
    if get_path(new, "metadata", "annotations") != get_path(old, "metadata", "annotations"):
        if any(k.startswith(p) for p in (levels.SECCOMP_POD_ANNOTATION, levels.SECCOMP_CONTAINER_ANNOTATION_PREFIX,
                                         levels.APPARMOR_ANNOTATION_PREFIX)
               for k in set(get_path(new, "metadata", "annotations") or {}) | set(get_path(old, "metadata", "annotations")
                                                                               or {})):
            return True

    def comparable(spec: Any) -> Any:
        if not isinstance(spec, dict):
            return spec
        spec = {k: v for k, v in spec.items() if k not in _INSIGNIFICANT_SPEC_FIELDS}
        for key in ("containers", "initContainers"):
            if isinstance(spec.get(key), list):
                spec[key] = [{k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                             for c in spec[key]]
        return spec

    return comparable(new.get("spec")) != comparable(old.get("spec"))


def _evaluate(lv: LevelVersion, metadata: dict, spec: dict) -> list[Violation]:
    """What ``lv`` finds wrong with a pod; the checks load with the first pod checked."""
    from kapiserver.admission.pod_security import checks
    return checks.evaluate(lv.level, lv.minor, metadata, spec)


def _violation_text(lv: LevelVersion, violations: list[Violation]) -> str:
    from kapiserver.admission.pod_security import checks
    return f'PodSecurity "{lv}": {checks.describe(violations)}'


class PodSecurity(AdmissionPlugin):
    name = PLUGIN_NAME
    validating = True
    operations = (CREATE, UPDATE)
    resources = frozenset({("", "namespaces"), ("", "pods"), *POD_TEMPLATE_PATHS})

    def __init__(self, defaults: Policy, exemptions: Exemptions, namespaces: Callable[[], Any],
                 pods: Callable[[], Any]) -> None:
        self.defaults = defaults
        self.exemptions = exemptions
        self._namespaces = namespaces  # lazily: the Stores exist once the server has built them
        self._pods = pods

    async def validate(self, attrs: Attributes) -> None:
        group, plural = attrs.rtype.group, attrs.rtype.plural
        if (group, plural) == ("", "namespaces") and not attrs.subresource:
            await self._validate_namespace(attrs)
        elif (group, plural) == ("", "pods"):
            await self._validate_pod(attrs)
        elif (group, plural) in POD_TEMPLATE_PATHS and not attrs.subresource:
            await self._validate_workload(attrs, POD_TEMPLATE_PATHS[(group, plural)])

    # -- namespaces ---------------------------------------------------------------------------

    async def _validate_namespace(self, attrs: Attributes) -> None:
        labels = get_path(attrs.obj, "metadata", "labels") or {}
        policy, problems = policy_from_labels(labels, self.defaults)
        if problems:
            text = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
            # upstream answers with its own 422 Status: the resource name, no field causes
            raise errors.StatusError(422, "Invalid", f'namespaces "{resource_name(attrs)}" is invalid: {text}')
        if attrs.operation != UPDATE or attrs.name in self.exemptions.namespaces:
            return
        old_policy, _ = policy_from_labels(get_path(attrs.old_obj, "metadata", "labels") or {}, self.defaults)
        if policy.enforce == old_policy.enforce or policy.enforce.level == levels.PRIVILEGED:
            return
        attrs.warnings.extend(await self._existing_pod_warnings(attrs.name, policy.enforce))

    async def _existing_pod_warnings(self, namespace: str, enforce: LevelVersion) -> list[str]:
        from kapiserver.machinery.fields import parse_field_selector
        from kapiserver.machinery.labels import parse_label_selector
        from kapiserver.registry.options import ListOptions
        listed = await self._pods().list(namespace, ListOptions(parse_label_selector(""), parse_field_selector("")))
        pods = sorted(listed["items"], key=lambda p: p["metadata"].get("name", ""))
        by_reasons: dict[str, list[str]] = {}
        for pod in pods[:MAX_PODS_TO_CHECK]:
            if get_path(pod, "spec", "runtimeClassName") in self.exemptions.runtime_classes:
                continue
            found = _evaluate(enforce, pod.get("metadata") or {}, pod.get("spec") or {})
            if found:
                by_reasons.setdefault(", ".join(v.reason for v in found), []).append(pod["metadata"]["name"])
        warnings = []
        if by_reasons:
            warnings.append(f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce level '
                            f'"{enforce}"')
        for reasons, names in by_reasons.items():
            others = len(names) - 1
            who = names[0] if not others else \
                f"{names[0]} (and {others} other {'pod' if others == 1 else 'pods'})"
            warnings.append(f"{who}: {reasons}")
        if len(pods) > MAX_PODS_TO_CHECK:
            warnings.append(f"new PodSecurity enforce level only checked against the first {MAX_PODS_TO_CHECK} of "
                            f"{len(pods)} existing pods")
        return warnings

    # -- pods and pod templates -------------------------------------------------------------------

    async def _policy(self, namespace: str) -> Optional[Policy]:
        """The namespace's policy; None when the namespace is exempt."""
        if namespace in self.exemptions.namespaces:
            return None
        try:
            ns = await self._namespaces().get("", namespace, resource_version="0")
        except errors.StatusError as e:
            if e.code != 404:
                raise
            ns = {}
        policy, _ = policy_from_labels(get_path(ns, "metadata", "labels") or {}, self.defaults)
        return policy

    def _exempt_reason(self, attrs: Attributes, spec: dict) -> Optional[str]:
        if attrs.namespace in self.exemptions.namespaces:
            return "namespace"
        if attrs.user is not None and attrs.user.name in self.exemptions.usernames:
            return "user"
        if spec.get("runtimeClassName") in self.exemptions.runtime_classes:
            return "runtimeClass"
        return None

    async def _validate_pod(self, attrs: Attributes) -> None:
        if attrs.subresource not in ("", "ephemeralcontainers"):
            return
        pod: dict = attrs.obj if isinstance(attrs.obj, dict) else {}
        spec: dict = pod["spec"] if isinstance(pod.get("spec"), dict) else {}
        if attrs.operation == UPDATE and not attrs.subresource and isinstance(attrs.old_obj, dict) \
                and not _significant_pod_update(pod, attrs.old_obj):
            return
        exempt = self._exempt_reason(attrs, spec)
        if exempt:
            attrs.add_annotation(AUDIT_EXEMPT, exempt)
            return
        policy = await self._policy(attrs.namespace)
        if policy is None:
            return
        metadata: dict = pod["metadata"] if isinstance(pod.get("metadata"), dict) else {}
        attrs.add_annotation(AUDIT_ENFORCE_POLICY, str(policy.enforce))
        enforced = _evaluate(policy.enforce, metadata, spec)
        if enforced:
            raise admission_forbidden(attrs, "violates " + _violation_text(policy.enforce, enforced))
        self._audit(attrs, policy.audit, metadata, spec)
        if policy.warn != policy.enforce:
            self._warn(attrs, policy.warn, metadata, spec)

    async def _validate_workload(self, attrs: Attributes, path: tuple[str, ...]) -> None:
        template = get_path(attrs.obj, *path)
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            return
        spec: dict = template["spec"]
        if attrs.operation == UPDATE and get_path(attrs.old_obj, *path) == template:
            return
        if self._exempt_reason(attrs, spec):
            return
        policy = await self._policy(attrs.namespace)
        if policy is None:
            return
        metadata: dict = template["metadata"] if isinstance(template.get("metadata"), dict) else {}
        self._audit(attrs, policy.audit, metadata, spec)
        self._warn(attrs, policy.warn, metadata, spec)

    def _audit(self, attrs: Attributes, audit: LevelVersion, metadata: dict, spec: dict) -> None:
        found = _evaluate(audit, metadata, spec)
        if found:
            attrs.add_annotation(AUDIT_VIOLATIONS, "would violate " + _violation_text(audit, found))

    def _warn(self, attrs: Attributes, warn: LevelVersion, metadata: dict, spec: dict) -> None:
        found = _evaluate(warn, metadata, spec)
        if found:
            attrs.warnings.append("would violate " + _violation_text(warn, found))


def pod_security(config: Optional[bytes], deps: Any) -> PodSecurity:
    try:
        defaults, exemptions = parse_configuration(config)
    except PodSecurityConfigError as e:
        raise PluginError(str(e)) from None
    return PodSecurity(defaults, exemptions, lambda: deps.store("", "v1", "namespaces"),
                       lambda: deps.store("", "v1", "pods"))
