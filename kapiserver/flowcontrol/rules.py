"""Which FlowSchema a request matches (upstream's util/flowcontrol/rule.go).

A schema matches when one of its rules does: the user is one of the rule's
subjects (a user, a group, a service account; ``*`` for any), and the request
is one of its resource rules (verb, API group, ``resource[/subresource]``,
namespace, or ``clusterScope`` for requests without a namespace) or, for
other paths, one of its non-resource rules (verb, path or ``prefix/*``).
"""
from __future__ import annotations

from typing import Any, Optional
from kapiserver.request.info import RequestInfo


SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def matches_flow_schema(user_name: str, groups: tuple[str, ...], info: RequestInfo, fs: dict) -> bool:
    for rule in (fs.get("spec") or {}).get("rules") or ():
        if _matches_rule(user_name, groups, info, rule):
            return True
    return False


def _matches_rule(user_name: str, groups: tuple[str, ...], info: RequestInfo, rule: dict) -> bool:
    if not any(_matches_subject(user_name, groups, s) for s in rule.get("subjects") or ()):
        return False
    if info.is_resource_request:
        return any(_matches_resource_rule(info, r) for r in rule.get("resourceRules") or ())
    return any(_matches_non_resource_rule(info, r) for r in rule.get("nonResourceRules") or ())


def _matches_subject(user_name: str, groups: tuple[str, ...], subject: dict) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        user = subject.get("user")
        return user is not None and user.get("name") in ("*", user_name)
    if kind == "Group":
        group = subject.get("group")
        if group is None:
            return False
        return group.get("name") == "*" or group.get("name") in groups
    if kind == "ServiceAccount":
        account = subject.get("serviceAccount")
        if account is None:
            return False
        namespace, name = account.get("namespace") or "", account.get("name") or ""
        if name == "*":
            return user_name.startswith(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:")
        return user_name == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"
    return False


def _contains(value: str, values: Any, wildcard: str = "*") -> bool:
    values = values or ()
    if len(values) == 1 and values[0] == wildcard:
        return True
    return value in values


def _matches_resource_rule(info: RequestInfo, rule: dict) -> bool:
    if not _contains(info.verb, rule.get("verbs")):
        return False
    resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
    if not _contains(resource, rule.get("resources")):
        return False
    if not _contains(info.group, rule.get("apiGroups")):
        return False
    if not info.namespace:
        return bool(rule.get("clusterScope"))
    return _contains(info.namespace, rule.get("namespaces"))


def _matches_non_resource_rule(info: RequestInfo, rule: dict) -> bool:
    if not _contains(info.verb, rule.get("verbs")):
        return False
    for url in rule.get("nonResourceURLs") or ():
        if url == "*" or url == info.path:
            return True
        prefix = url[:-1] if url.endswith("*") else url
        if not prefix.endswith("/"):
            prefix += "/"
        if info.path.startswith(prefix):
            return True
    return False


def flow_distinguisher(method: Optional[dict], user_name: str, info: RequestInfo) -> str:
    """The part of the flow's identity the schema's distinguisher method names."""
    if not method:
        return ""
    if method.get("type") == "ByUser":
        return user_name
    if method.get("type") == "ByNamespace":
        return info.namespace
    return ""
