"""Whether a policy's matchConstraints or a binding's matchResources cover a request
(upstream's policy matching.Matcher)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from kapiserver.admission import predicates
from kapiserver.admission.resources import ResourceMapper
from kapiserver.machinery import errors
from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.machinery.labels import selector_from_label_selector_dict
from kapiserver.registry.admission import Attributes
from kapiserver.registry.resource_type import ResourceType


class MatchError(Exception):
    """Matching failed (a bad selector, a namespace that cannot be read): a configuration error."""


@dataclass
class Match:
    resource: GroupVersionResource
    kind: GroupVersionKind
    rtype: ResourceType


def _named_rule_matches(rule: dict, attrs: Attributes, resource: Optional[GroupVersionResource] = None) -> bool:
    if not predicates.rule_matches(rule, attrs, resource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


class PolicyMatcher:
    def __init__(self, mapper: ResourceMapper, namespaces: Callable[[], Any]) -> None:
        self.mapper = mapper
        self.namespaces = namespaces

    async def matches(self, match: dict, attrs: Attributes) -> Optional[Match]:
        """The resource and kind the request matched as (an equivalent one, maybe), or None."""
        ns_error: Optional[str] = None
        try:
            ns_selector = selector_from_label_selector_dict(match.get("namespaceSelector") or {})
            obj_selector = selector_from_label_selector_dict(match.get("objectSelector") or {})
        except errors.StatusError as e:
            raise MatchError(e.message) from None
        try:
            if not await predicates.match_namespace_selector(ns_selector, attrs, self.namespaces):
                return None
        except errors.StatusError as e:
            ns_error = e.message
        if not predicates.match_object_selector(obj_selector, attrs):
            return None
        policy = match.get("matchPolicy") or "Equivalent"
        if self._rules_match(match.get("excludeResourceRules") or [], policy, attrs) is not None:
            return None
        rules = match.get("resourceRules") or []
        if not rules:
            found: Optional[Match] = Match(attrs.resource, attrs.gvk, attrs.rtype)
        else:
            found = self._rules_match(rules, policy, attrs)
        if found is None:
            return None
        if ns_error is not None:
            raise MatchError(ns_error)
        return found

    def _rules_match(self, rules: list, policy: str, attrs: Attributes) -> Optional[Match]:
        for rule in rules:
            if _named_rule_matches(rule, attrs):
                return Match(attrs.resource, attrs.gvk, attrs.rtype)
        if policy != "Equivalent":
            return None
        equivalents = self.mapper.equivalents(attrs.rtype, attrs.subresource)
        for rule in rules:
            for gvr in equivalents:
                if gvr == attrs.resource:
                    continue
                if _named_rule_matches(rule, attrs, gvr):
                    rtype = self.mapper.resource_type(gvr)
                    kind = self.mapper.kind_for(gvr, attrs.subresource)
                    if rtype is None or kind is None:
                        raise MatchError(f"unable to convert to {gvr.group}/{gvr.version}, Resource={gvr.resource}: "
                                         "unknown kind")
                    return Match(gvr, kind, rtype)
        return None
