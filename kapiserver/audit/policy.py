"""The audit policy (``--audit-policy-file``): which requests are recorded, and how much of them.

An ``audit.k8s.io/v1`` ``Policy`` is a list of rules; the first rule that
matches a request decides its level (``None``, ``Metadata``, ``Request``,
``RequestResponse``) and the stages left out; no match means ``None``.
Matching is upstream's (``k8s.io/apiserver/pkg/audit/policy/checker.go``):
users, user groups, verbs, then either resources (group, ``resource`` or
``resource/subresource``, ``*``, ``*/sub``, ``resource/*``, resourceNames)
with namespaces, or non-resource URLs (exact, ``*``, or a ``/prefix*``).
The policy is checked as upstream's ``ValidatePolicy`` does, at start.
"""
from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

from twisted.logger import Logger

from kapiserver.auth.authorizer import Attributes
from kapiserver.machinery.user import UserInfo

API_VERSION = "audit.k8s.io/v1"
KIND = "Policy"

LEVEL_NONE = "None"
LEVEL_METADATA = "Metadata"
LEVEL_REQUEST = "Request"
LEVEL_REQUEST_RESPONSE = "RequestResponse"
LEVELS = (LEVEL_NONE, LEVEL_METADATA, LEVEL_REQUEST, LEVEL_REQUEST_RESPONSE)

STAGE_REQUEST_RECEIVED = "RequestReceived"
STAGE_RESPONSE_STARTED = "ResponseStarted"
STAGE_RESPONSE_COMPLETE = "ResponseComplete"
STAGE_PANIC = "Panic"
STAGES = (STAGE_REQUEST_RECEIVED, STAGE_RESPONSE_STARTED, STAGE_RESPONSE_COMPLETE, STAGE_PANIC)

log = Logger()

_RULE_KEYS = {"level", "users", "userGroups", "verbs", "resources", "namespaces", "nonResourceURLs", "omitStages",
              "omitManagedFields"}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class PolicyError(Exception):
    """The policy file is unusable; ``str()`` is one line for the operator."""


def at_least(level: str, minimum: str) -> bool:
    """Whether ``level`` records at least as much as ``minimum``."""
    return LEVELS.index(level) >= LEVELS.index(minimum)


class RequestAuditConfig(NamedTuple):
    """What the policy decided for one request."""

    level: str
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False


class GroupResources(NamedTuple):
    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()


class PolicyRule(NamedTuple):
    level: str
    users: tuple[str, ...] = ()
    user_groups: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resources: tuple[GroupResources, ...] = ()
    namespaces: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: Optional[bool] = None

    def matches(self, user: Optional[UserInfo], attrs: Attributes) -> bool:
        if self.users and (user is None or user.name not in self.users):
            return False
        if self.user_groups and (user is None or not any(g in self.user_groups for g in user.groups)):
            return False
        if self.verbs and attrs.verb not in self.verbs:
            return False
        if self.namespaces or self.resources:
            return self._matches_resource(attrs)
        if self.non_resource_urls:
            return not attrs.resource_request and any(_path_matches(attrs.path, spec)
                                                      for spec in self.non_resource_urls)
        return True

    def _matches_resource(self, attrs: Attributes) -> bool:
        if not attrs.resource_request:
            return False
        if self.namespaces and attrs.namespace not in self.namespaces:
            return False
        if not self.resources:
            return True
        resource, sub = attrs.resource, attrs.subresource
        combined = f"{resource}/{sub}" if sub else resource
        for gr in self.resources:
            if gr.group != attrs.api_group:
                continue
            if not gr.resources:
                return True
            if gr.resource_names and attrs.name not in gr.resource_names:
                continue
            for res in gr.resources:
                if res == combined or res == "*":
                    return True
                if sub and res.startswith("*/") and res[2:] == sub:
                    return True
                if res.endswith("/*") and res[:-2] == resource:
                    return True
        return False


def _path_matches(path: str, spec: str) -> bool:
    if spec == "*" or spec == path:
        return True
    return spec.endswith("*") and path.startswith(spec.rstrip("*"))


class Policy(NamedTuple):
    rules: tuple[PolicyRule, ...]
    omit_stages: frozenset[str] = frozenset()
    omit_managed_fields: bool = False

    def evaluate(self, user: Optional[UserInfo], attrs: Attributes) -> RequestAuditConfig:
        """The first matching rule's level and omitted stages (the policy's own stages added)."""
        for rule in self.rules:
            if rule.matches(user, attrs):
                omit_fields = self.omit_managed_fields if rule.omit_managed_fields is None \
                    else rule.omit_managed_fields
                return RequestAuditConfig(rule.level, rule.omit_stages | self.omit_stages, omit_fields)
        return RequestAuditConfig(LEVEL_NONE, self.omit_stages, self.omit_managed_fields)


# ---------------------------------------------------------------- loading


def _strings(value: Any, where: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{where}: Invalid value: must be a list of strings")
        return ()
    return tuple(value)


def _stages(value: Any, where: str, problems: list[str]) -> frozenset[str]:
    stages = _strings(value, where, problems)
    for i, stage in enumerate(stages):
        if stage not in STAGES:
            problems.append(f'{where}[{i}]: Invalid value: "{stage}": allowed stages are {",".join(STAGES)}')
    return frozenset(stages)


def _rule(data: Any, where: str, problems: list[str]) -> Optional[PolicyRule]:
    if not isinstance(data, dict):
        problems.append(f"{where}: Invalid value: must be an object")
        return None
    unknown = sorted(set(data) - _RULE_KEYS)
    if unknown:  # upstream falls back to lenient decoding, with a warning
        log.warn("Audit policy contains errors, falling back to lenient decoding: {where}: unknown field "
                 "{field}", where=where, field=unknown[0])
    level = data.get("level")
    if not level:
        problems.append(f"{where}.level: Required value")
    elif level not in LEVELS:
        problems.append(f'{where}.level: Unsupported value: "{level}": supported values: '
                        + ", ".join(f'"{lv}"' for lv in LEVELS))
    urls = _strings(data.get("nonResourceURLs"), f"{where}.nonResourceURLs", problems)
    for i, url in enumerate(urls):
        if url == "*":
            continue
        if not url.startswith("/"):
            problems.append(f'{where}.nonResourceURLs[{i}]: Invalid value: "{url}": non-resource URL rules must '
                            f"begin with a '/' character")
        if url and "*" in url[:-1]:
            problems.append(f'{where}.nonResourceURLs[{i}]: Invalid value: "{url}": non-resource URL wildcards '
                            f"'*' must be the final character of the rule")
    resources: list[GroupResources] = []
    raw_resources = data.get("resources") or []
    if not isinstance(raw_resources, list):
        problems.append(f"{where}.resources: Invalid value: must be a list")
        raw_resources = []
    for j, gr in enumerate(raw_resources):
        gr_where = f"{where}.resources"
        if not isinstance(gr, dict):
            problems.append(f"{gr_where}[{j}]: Invalid value: must be an object")
            continue
        group = gr.get("group") or ""
        if not isinstance(group, str) or (group and not _DNS_SUBDOMAIN.match(group)):
            problems.append(f'{gr_where}.group: Invalid value: "{group}": a lowercase RFC 1123 subdomain must '
                            f"consist of lower case alphanumeric characters, '-' or '.'")
        names = _strings(gr.get("resources"), f"{gr_where}[{j}].resources", problems)
        resource_names = _strings(gr.get("resourceNames"), f"{gr_where}[{j}].resourceNames", problems)
        if resource_names and not names:
            problems.append(f"{gr_where}.resourceNames: Invalid value: using resourceNames requires at least one "
                            f"resource")
        resources.append(GroupResources(group if isinstance(group, str) else "", names, resource_names))
    namespaces = _strings(data.get("namespaces"), f"{where}.namespaces", problems)
    if urls and (resources or namespaces):
        problems.append(f"{where}.nonResourceURLs: Invalid value: rules cannot apply to both regular resources "
                        f"and non-resource URLs")
    omit_fields = data.get("omitManagedFields")
    if omit_fields is not None and not isinstance(omit_fields, bool):
        problems.append(f"{where}.omitManagedFields: Invalid value: must be a boolean")
        omit_fields = None
    return PolicyRule(level=level or LEVEL_NONE,
                      users=_strings(data.get("users"), f"{where}.users", problems),
                      user_groups=_strings(data.get("userGroups"), f"{where}.userGroups", problems),
                      verbs=_strings(data.get("verbs"), f"{where}.verbs", problems),
                      resources=tuple(resources), namespaces=namespaces, non_resource_urls=urls,
                      omit_stages=_stages(data.get("omitStages"), f"{where}.omitStages", problems),
                      omit_managed_fields=omit_fields)


def parse_policy(text: bytes | str, source: str = "<audit policy>") -> Policy:
    """A validated policy from YAML or JSON; raises PolicyError naming ``source``."""
    import yaml  # (with a policy only)

    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        raise PolicyError(f"{source}: failed decoding: not valid YAML or JSON") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise PolicyError(f"{source}: failed decoding: expected one {KIND} object")
    data = documents[0]
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise PolicyError(f"{source}: unknown group version field {data.get('apiVersion')!r}/{data.get('kind')!r} "
                          f"in policy (want {API_VERSION} {KIND})")
    problems: list[str] = []
    omit_stages = _stages(data.get("omitStages"), "omitStages", problems)
    raw_rules = data.get("rules") or []
    if not isinstance(raw_rules, list):
        raise PolicyError(f"{source}: rules: Invalid value: must be a list")
    rules = [_rule(r, f"rules[{i}]", problems) for i, r in enumerate(raw_rules)]
    omit_fields = data.get("omitManagedFields", False)
    if not isinstance(omit_fields, bool):
        problems.append("omitManagedFields: Invalid value: must be a boolean")
    if problems:
        raise PolicyError(f"{source}: " + (problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"))
    if not rules:
        raise PolicyError(f"{source}: loaded illegal policy with 0 rules")
    return Policy(tuple(r for r in rules if r is not None), omit_stages, bool(omit_fields))


def load_policy(path: str) -> Policy:
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as e:
        raise PolicyError(f'failed to read file path "{path}": {e.strerror}') from None
    return parse_policy(text, path)

