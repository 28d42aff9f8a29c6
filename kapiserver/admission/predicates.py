"""What webhooks and policies match on: rules, namespace and object selectors
(upstream's webhook/predicates: rules, namespace, object)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.groupversion import GroupVersionResource
from kapiserver.machinery.labels import LabelSelector
from kapiserver.registry.admission import Attributes

ADMISSION_GROUP = "admissionregistration.k8s.io"
_CONFIGURATION_KINDS = frozenset(("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                                  "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"))


def is_exempt_configuration_resource(attrs: Attributes) -> bool:
    """Webhooks and policies never see writes of their own configuration, so a broken
    webhook cannot lock itself in (upstream's IsExemptAdmissionConfigurationResource)."""
    gvk = attrs.gvk
    return gvk.group == ADMISSION_GROUP and gvk.kind in _CONFIGURATION_KINDS


def _exact_or_wildcard(items: Any, requested: str) -> bool:
    return any(item == "*" or item == requested for item in (items or ()))


def rule_matches(rule: dict, attrs: Attributes, resource: Optional[GroupVersionResource] = None) -> bool:
    """Whether a RuleWithOperations matches the request (``resource`` overrides the request's,
    for equivalent-resource matching)."""
    gvr = resource or attrs.resource
    scope = rule.get("scope") or "*"
    if scope != "*":
        is_namespace = (gvr.group, gvr.version, gvr.resource) == ("", "v1", "namespaces")
        if scope == "Namespaced":
            if is_namespace or not attrs.namespace:
                return False
        elif scope == "Cluster":
            if not (is_namespace or not attrs.namespace):
                return False
        else:
            return False
    operations = rule.get("operations") or ()
    if not any(op == "*" or op == attrs.operation for op in operations):
        return False
    if not _exact_or_wildcard(rule.get("apiGroups"), gvr.group):
        return False
    if not _exact_or_wildcard(rule.get("apiVersions"), gvr.version):
        return False
    for entry in rule.get("resources") or ():
        res, _, sub = str(entry).partition("/")
        if (res == "*" or res == gvr.resource) and (sub == "*" or sub == attrs.subresource):
            return True
    return False


async def get_namespace(namespaces: Any, name: str) -> dict:
    """A namespace from the watch cache, confirmed with a live read on a miss (upstream's
    lister-then-client lookup); 404 if it does not exist."""
    try:
        return await namespaces.get("", name, resource_version="0")
    except errors.StatusError as e:
        if e.code != 404:
            raise
    return await namespaces.get("", name)


async def namespace_labels(attrs: Attributes, namespaces: Callable[[], Any]) -> dict:
    """The labels a namespaceSelector is matched against: the namespace object's own for
    creates and updates of namespaces, else those of the request's namespace."""
    if attrs.rtype.group == "" and attrs.rtype.plural == "namespaces" and not attrs.subresource \
            and attrs.operation in ("CREATE", "UPDATE"):
        return ((attrs.obj or {}).get("metadata") or {}).get("labels") or {}
    name = attrs.namespace if attrs.namespace else attrs.name
    ns = await get_namespace(namespaces(), name)
    return (ns.get("metadata") or {}).get("labels") or {}


async def match_namespace_selector(selector: LabelSelector, attrs: Attributes,
                                   namespaces: Callable[[], Any]) -> bool:
    """Upstream's namespace Matcher: cluster-scoped requests (but namespaces) always match."""
    if not attrs.namespace and attrs.rtype.plural != "namespaces":
        return True
    if selector.empty:
        return True
    try:
        found = await namespace_labels(attrs, namespaces)
    except errors.StatusError as e:
        if e.code == 404:
            raise
        raise errors.internal_error(e.message) from None
    return selector.matches(found)


def _object_labels(obj: Optional[dict]) -> Optional[dict]:
    if not isinstance(obj, dict):
        return None
    md = obj.get("metadata")
    return (md.get("labels") or {}) if isinstance(md, dict) else None


def match_object_selector(selector: LabelSelector, attrs: Attributes) -> bool:
    """The new or the old object matches (a missing object never does)."""
    if selector.empty:
        return True
    for obj in (attrs.obj, attrs.old_obj):
        found = _object_labels(obj)
        if found is not None and selector.matches(found):
            return True
    return False
