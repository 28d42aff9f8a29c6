"""Scheduling constraints of the core group: node selectors and affinity,
pod (anti-)affinity, tolerations, taints and topology spread constraints.

Pods and pod templates use all of them; PersistentVolumes share node
selectors (``spec.nodeAffinity``), StorageClasses topology selector terms,
Nodes taints.  Messages and paths follow pkg/apis/core/validation.
"""
from __future__ import annotations

from typing import Any

from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.jsonvalues import as_dict, as_list

TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
TOLERATION_OPERATORS = ["Equal", "Exists"]
WHEN_UNSATISFIABLE = ["DoNotSchedule", "ScheduleAnyway"]
NODE_INCLUSION_POLICIES = ["Honor", "Ignore"]
NOT_POSITIVE = "must be greater than zero"




# ------------------------------------------------------------------ node selectors

def validate_node_selector_requirement(req: Any, path: str, allow_invalid_values: bool) -> list[Cause]:
    req = as_dict(req)
    causes: list[Cause] = []
    operator, values = req.get("operator") or "", as_list(req.get("values"))
    if operator in ("In", "NotIn"):
        if not values:
            causes.append(errors.field_required(f"{path}.values", "must be specified when `operator` is 'In' or "
                                                                   "'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            causes.append(errors.field_forbidden(f"{path}.values", "may not be specified when `operator` is "
                                                                    "'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(errors.field_required(f"{path}.values", "must be specified single value when `operator` "
                                                                   "is 'Lt' or 'Gt'"))
    else:
        causes.append(errors.field_invalid(f"{path}.operator", operator, "not a valid selector operator"))
    causes.extend(validation.validate_label_name(req.get("key") or "", f"{path}.key"))
    if not allow_invalid_values:
        for i, value in enumerate(values):
            value = "" if value is None else str(value)
            causes.extend(errors.field_invalid(f"{path}.values[{i}]", value, m)
                          for m in validation.is_valid_label_value(value))
    return causes


def validate_node_field_selector_requirement(req: Any, path: str) -> list[Cause]:
    req = as_dict(req)
    causes: list[Cause] = []
    operator, values = req.get("operator") or "", as_list(req.get("values"))
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            causes.append(errors.field_required(f"{path}.values", "must be only one value when `operator` is 'In' "
                                                                   "or 'NotIn' for node field selector"))
    else:
        causes.append(errors.field_invalid(f"{path}.operator", operator, "not a valid selector operator"))
    key = req.get("key") or ""
    if key != "metadata.name":
        causes.append(errors.field_invalid(f"{path}.key", key, "not a valid field selector key"))
    else:
        for i, value in enumerate(values):
            value = "" if value is None else str(value)
            causes.extend(errors.field_invalid(f"{path}.values[{i}]", value, m)
                          for m in validation.is_dns1123_subdomain(value))
    return causes


def validate_node_selector_term(term: Any, path: str, allow_invalid_values: bool) -> list[Cause]:
    term = as_dict(term)
    causes: list[Cause] = []
    for j, req in enumerate(as_list(term.get("matchExpressions"))):
        causes.extend(validate_node_selector_requirement(req, f"{path}.matchExpressions[{j}]", allow_invalid_values))
    for j, req in enumerate(as_list(term.get("matchFields"))):
        causes.extend(validate_node_field_selector_requirement(req, f"{path}.matchFields[{j}]"))
    return causes


def validate_node_selector(selector: Any, path: str, allow_invalid_values: bool = True) -> list[Cause]:
    terms = as_list(as_dict(selector).get("nodeSelectorTerms"))
    if not terms:
        return [errors.field_required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")]
    causes: list[Cause] = []
    for i, term in enumerate(terms):
        causes.extend(validate_node_selector_term(term, f"{path}.nodeSelectorTerms[{i}]", allow_invalid_values))
    return causes


def validate_topology_selector_term(term: Any, path: str) -> tuple[dict, list[Cause]]:
    """(key → set of values, causes) of one StorageClass allowedTopologies term."""
    causes: list[Cause] = []
    seen: dict[str, frozenset] = {}
    for i, req in enumerate(as_list(as_dict(term).get("matchLabelExpressions"))):
        req = as_dict(req)
        at = f"{path}.matchLabelExpressions[{i}]"
        values = as_list(req.get("values"))
        if not values:
            causes.append(errors.field_required(f"{at}.values"))
        found: list = []
        for j, value in enumerate(values):
            if value in found:
                causes.append(errors.field_duplicate(f"{at}.values[{j}]", value))
            found.append(value)
        causes.extend(validation.validate_label_name(req.get("key") or "", f"{at}.key"))
        key = req.get("key") or ""
        if key in seen:
            causes.append(errors.field_duplicate(f"{at}.key", key))
        seen[key] = frozenset(str(v) for v in found)
    return seen, causes


# ------------------------------------------------------------------ affinity

def _validate_preferred_scheduling_terms(terms: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, term in enumerate(as_list(terms)):
        term = as_dict(term)
        weight = term.get("weight") or 0
        if not validation.is_int(weight) or weight <= 0 or weight > 100:
            causes.append(errors.field_invalid(f"{path}[{i}].weight", weight, "must be in the range 1-100"))
        causes.extend(validate_node_selector_term(term.get("preference"), f"{path}[{i}].preference", True))
    return causes


def _label_keys(path: str, keys: list, selector: Any) -> list[Cause]:
    if not keys:
        return []
    if selector is None:
        return [errors.field_forbidden(path, "must not be specified when labelSelector is not set")]
    causes: list[Cause] = []
    for i, key in enumerate(keys):
        causes.extend(validation.validate_label_name(key, f"{path}[{i}]"))
    return causes


def _validate_match_label_keys(path: str, match: list, mismatch: list, selector: Any) -> list[Cause]:
    """upstream's validateMatchLabelKeysAndMismatchLabelKeys (pod affinity terms)."""
    causes = _label_keys(f"{path}.matchLabelKeys", match, selector)
    causes += _label_keys(f"{path}.mismatchLabelKeys", mismatch, selector)
    if isinstance(selector, dict):
        index = {key: i for i, key in enumerate(match)}
        selector_keys = set(as_dict(selector.get("matchLabels")))
        for expr in as_list(selector.get("matchExpressions")):
            key = as_dict(expr).get("key")
            if key in index and key in selector_keys:
                causes.append(errors.field_invalid(f"{path}[{index[key]}]", key,
                                                   "exists in both matchLabelKeys and labelSelector"))
            selector_keys.add(key)
    for i, key in enumerate(match):
        if key in mismatch:
            causes.append(errors.field_invalid(f"{path}.matchLabelKeys[{i}]", key,
                                               "exists in both matchLabelKeys and mismatchLabelKeys"))
    return causes


def validate_pod_affinity_term(term: Any, path: str, allow_invalid_values: bool) -> list[Cause]:
    term = as_dict(term)
    causes = validation.validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector",
                                                allow_invalid_values)
    causes += validation.validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector",
                                                 allow_invalid_values)
    for name in as_list(term.get("namespaces")):
        name = "" if name is None else str(name)
        causes.extend(errors.field_invalid(f"{path}.namespace", name, m) for m in validation.is_dns1123_label(name))
    causes += _validate_match_label_keys(path, as_list(term.get("matchLabelKeys")),
                                         as_list(term.get("mismatchLabelKeys")), term.get("labelSelector"))
    topology_key = term.get("topologyKey") or ""
    if not topology_key:
        causes.append(errors.field_required(f"{path}.topologyKey", "can not be empty"))
    return causes + validation.validate_label_name(topology_key, f"{path}.topologyKey")


def _validate_pod_affinity(affinity: Any, path: str, allow_invalid_values: bool) -> list[Cause]:
    affinity = as_dict(affinity)
    causes: list[Cause] = []
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    for i, term in enumerate(as_list(affinity.get(required))):
        causes.extend(validate_pod_affinity_term(term, f"{path}.{required}[{i}]", allow_invalid_values))
    preferred = "preferredDuringSchedulingIgnoredDuringExecution"
    for i, weighted in enumerate(as_list(affinity.get(preferred))):
        weighted = as_dict(weighted)
        weight = weighted.get("weight") or 0
        if not validation.is_int(weight) or weight <= 0 or weight > 100:
            causes.append(errors.field_invalid(f"{path}.{preferred}[{i}].weight", weight,
                                               "must be in the range 1-100"))
        causes.extend(validate_pod_affinity_term(weighted.get("podAffinityTerm"),
                                                 f"{path}.{preferred}[{i}].podAffinityTerm", allow_invalid_values))
    return causes


def validate_affinity(affinity: Any, path: str, allow_invalid_values: bool = False) -> list[Cause]:
    if not isinstance(affinity, dict):
        return []
    causes: list[Cause] = []
    node = affinity.get("nodeAffinity")
    if isinstance(node, dict):
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            causes.extend(validate_node_selector(required, f"{path}.nodeAffinity."
                                                           "requiredDuringSchedulingIgnoredDuringExecution"))
        preferred = node.get("preferredDuringSchedulingIgnoredDuringExecution")
        if preferred:
            causes.extend(_validate_preferred_scheduling_terms(
                preferred, f"{path}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"))
    if isinstance(affinity.get("podAffinity"), dict):
        causes.extend(_validate_pod_affinity(affinity["podAffinity"], f"{path}.podAffinity", allow_invalid_values))
    if isinstance(affinity.get("podAntiAffinity"), dict):
        causes.extend(_validate_pod_affinity(affinity["podAntiAffinity"], f"{path}.podAntiAffinity",
                                             allow_invalid_values))
    return causes


def affinity_has_invalid_label_value(affinity: Any) -> bool:
    """upstream's hasInvalidLabelValueInAffinitySelector (an old pod keeps what it was allowed)."""
    for kind in ("podAffinity", "podAntiAffinity"):
        block = as_dict(as_dict(affinity).get(kind))
        terms = list(as_list(block.get("requiredDuringSchedulingIgnoredDuringExecution")))
        terms += [as_dict(w).get("podAffinityTerm") for w in
                  as_list(block.get("preferredDuringSchedulingIgnoredDuringExecution"))]
        for term in terms:
            if validation.label_selector_has_invalid_value(as_dict(term).get("labelSelector")):
                return True
    return False


# ------------------------------------------------------------------ taints and tolerations

def validate_taint_effect(effect: Any, allow_empty: bool, path: str) -> list[Cause]:
    if not allow_empty and not effect:
        return [errors.field_required(path)]
    if effect not in TAINT_EFFECTS:
        return [errors.field_not_supported(path, effect or "", TAINT_EFFECTS)]
    return []


def validate_tolerations(tolerations: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, toleration in enumerate(as_list(tolerations)):
        t = as_dict(toleration)
        at = f"{path}[{i}]"
        key, operator, effect = t.get("key") or "", t.get("operator") or "", t.get("effect") or ""
        if key:
            causes.extend(validation.validate_label_name(key, f"{at}.key"))
        if not key and operator != "Exists":
            causes.append(errors.field_invalid(f"{at}.operator", operator, "operator must be Exists when `key` is "
                                               "empty, which means \"match all values and all keys\""))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(errors.field_invalid(f"{at}.effect", effect,
                                               "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        value = "" if t.get("value") is None else str(t.get("value"))
        if operator in ("Equal", ""):
            problems = validation.is_valid_label_value(value)
            if problems:
                causes.append(errors.field_invalid(f"{at}.operator", value, ";".join(problems)))
        elif operator == "Exists":
            if value:
                causes.append(errors.field_invalid(f"{at}.operator", value,
                                                   "value must be empty when `operator` is 'Exists'"))
        else:
            causes.append(errors.field_not_supported(f"{at}.operator", operator, TOLERATION_OPERATORS))
        if effect:
            causes.extend(validate_taint_effect(effect, True, f"{at}.effect"))
    return causes


def _go_taint(taint: dict) -> gorepr.GoRepr:
    return gorepr.struct("core.Taint", (
        ("Key", gorepr.quote(taint.get("key"))), ("Value", gorepr.quote(taint.get("value"))),
        ("Effect", gorepr.quote(taint.get("effect"))),
        ("TimeAdded", gorepr.pointer(taint.get("timeAdded"), "v1.Time"))))


def validate_taints(taints: Any, path: str) -> list[Cause]:
    """upstream's validateNodeTaints: unique by key and effect."""
    causes: list[Cause] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(as_list(taints)):
        taint = as_dict(taint)
        at = f"{path}[{i}]"
        key, effect = taint.get("key") or "", taint.get("effect") or ""
        causes.extend(validation.validate_label_name(key, f"{at}.key"))
        value = "" if taint.get("value") is None else str(taint.get("value"))
        problems = validation.is_valid_label_value(value)
        if problems:
            causes.append(errors.field_invalid(f"{at}.value", value, ";".join(problems)))
        causes.extend(validate_taint_effect(effect, False, f"{at}.effect"))
        if (effect, key) in seen:
            causes.append(errors.field_duplicate(at, _go_taint(taint), "taints must be unique by key and effect pair"))
            continue
        seen.add((effect, key))
    return causes


# ------------------------------------------------------------------ topology spread

def validate_topology_spread_constraints(constraints: Any, path: str,
                                         allow_invalid_selector: bool = False) -> list[Cause]:
    causes: list[Cause] = []
    items = as_list(constraints)
    for i, constraint in enumerate(items):
        c = as_dict(constraint)
        at = f"{path}[{i}]"
        max_skew = c.get("maxSkew") or 0
        if not validation.is_int(max_skew) or max_skew <= 0:
            causes.append(errors.field_invalid(f"{at}.maxSkew", max_skew, NOT_POSITIVE))
        key = c.get("topologyKey") or ""
        if not key:
            causes.append(errors.field_required(f"{at}.topologyKey", "can not be empty"))
        action = c.get("whenUnsatisfiable") or ""
        if action not in WHEN_UNSATISFIABLE:
            causes.append(errors.field_not_supported(f"{at}.whenUnsatisfiable", action, WHEN_UNSATISFIABLE))
        for other in items[i + 1:]:
            other = as_dict(other)
            if (other.get("topologyKey") or "") == key and (other.get("whenUnsatisfiable") or "") == action:
                causes.append(errors.field_duplicate(f"{at}.{{topologyKey, whenUnsatisfiable}}",
                                                     f"{{{key}, {action}}}"))
                break
        min_domains = c.get("minDomains")
        if min_domains is not None:
            if not validation.is_int(min_domains) or min_domains <= 0:
                causes.append(errors.field_invalid(f"{at}.minDomains", min_domains, NOT_POSITIVE))
            if action != "DoNotSchedule":
                causes.append(errors.field_invalid(f"{at}.minDomains", min_domains,
                                                   f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                                                   f"not {action}"))
        for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = c.get(name)
            if policy is not None and policy not in NODE_INCLUSION_POLICIES:
                causes.append(errors.field_not_supported(f"{at}.{name}", policy, NODE_INCLUSION_POLICIES))
        match_keys = as_list(c.get("matchLabelKeys"))
        if match_keys:
            selector = c.get("labelSelector")
            selector_keys: set = set()
            if isinstance(selector, dict):
                selector_keys = set(as_dict(selector.get("matchLabels")))
                selector_keys |= {as_dict(e).get("key") for e in as_list(selector.get("matchExpressions"))}
            else:
                causes.append(errors.field_forbidden(f"{at}.matchLabelKeys",
                                                     "must not be specified when labelSelector is not set"))
            for j, key_name in enumerate(match_keys):
                causes.extend(validation.validate_label_name(key_name, f"{at}.matchLabelKeys[{j}]"))
                if key_name in selector_keys:
                    causes.append(errors.field_invalid(f"{at}.matchLabelKeys[{j}]", key_name,
                                                       "exists in both matchLabelKeys and labelSelector"))
        if not allow_invalid_selector:
            causes.extend(validation.validate_label_selector(c.get("labelSelector"), f"{at}.labelSelector"))
    return causes
