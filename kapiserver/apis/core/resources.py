"""Resource names and quantities as the core group validates them.

Container requests and limits, pod overhead, ResourceQuota and LimitRange
maps, PVC requests, PV capacity and node capacity all share upstream's rules
(pkg/apis/core/validation and pkg/apis/core/helper): which names are
standard, which must be integers, which may be overcommitted, and
``requests <= limits``.  Quantities are printed in their canonical form, as
upstream's ``Quantity.String()`` does; :func:`canonicalize_resource_list`
rewrites stored maps into that form.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Optional

from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.machinery.quantity import Quantity, QuantityError, parse_quantity

HUGEPAGES_PREFIX = "hugepages-"
REQUESTS_HUGEPAGES_PREFIX = "requests.hugepages-"
REQUESTS_PREFIX = "requests."
KUBERNETES_PREFIX = "kubernetes.io/"
NOT_INTEGER = "must be an integer"
NOT_POSITIVE = "must be greater than zero"

STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
STANDARD_QUOTA_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
    "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps",
    "services.nodeports", "services.loadbalancers"})
STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "configmaps", "persistentvolumeclaims", "storage", "requests.storage",
    "services.nodeports", "services.loadbalancers"})
INTEGER_RESOURCES = frozenset({
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers"})


# ------------------------------------------------------------------ names (pkg/apis/core/helper)

def is_hugepage_resource(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_native_resource(name: str) -> bool:
    return "/" not in name or KUBERNETES_PREFIX in name


def is_extended_resource(name: str) -> bool:
    if is_native_resource(name) or name.startswith(REQUESTS_PREFIX):
        return False
    return not validation.is_qualified_name(REQUESTS_PREFIX + name)


def is_overcommit_allowed(name: str) -> bool:
    return is_native_resource(name) and not is_hugepage_resource(name)


def is_integer_resource(name: str) -> bool:
    return name in INTEGER_RESOURCES or is_extended_resource(name)


def is_standard_quota_resource(name: str) -> bool:
    return name in STANDARD_QUOTA_RESOURCES or name.startswith((HUGEPAGES_PREFIX, REQUESTS_HUGEPAGES_PREFIX))


def is_standard_resource(name: str) -> bool:
    return name in STANDARD_RESOURCES or name.startswith((HUGEPAGES_PREFIX, REQUESTS_HUGEPAGES_PREFIX))


def validate_resource_name(name: str, path: str) -> list[Cause]:
    """upstream's validateResourceName: qualified, and standard unless prefixed."""
    causes = [errors.field_invalid(path, name, m) for m in validation.is_qualified_name(name)]
    if causes:
        return causes
    if "/" not in name and not is_standard_resource(name):
        return [errors.field_invalid(path, name, "must be a standard resource type or fully qualified")]
    return []


def validate_container_resource_name(name: str, path: str) -> list[Cause]:
    causes = validate_resource_name(name, path)
    if "/" not in name:
        if not (name in STANDARD_CONTAINER_RESOURCES or is_hugepage_resource(name)):
            return causes + [errors.field_invalid(path, name, "must be a standard resource for containers")]
    elif not is_native_resource(name) and not is_extended_resource(name):
        return causes + [errors.field_invalid(path, name, "doesn't follow extended resource name standard")]
    return causes


def validate_quota_resource_name(name: str, path: str) -> list[Cause]:
    causes = validate_resource_name(name, path)
    if "/" not in name and not is_standard_quota_resource(name):
        return causes + [errors.field_invalid(path, name, "must be a standard resource for quota")]
    return causes


# ------------------------------------------------------------------ quantities

def quantity_or_cause(value: Any, path: str) -> tuple[Optional[Quantity], list[Cause]]:
    """A map value as a Quantity; a cause when it is not one.

    The decoder normally refuses such a body with 400 before validation;
    this keeps an object that got here anyway from being stored.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None, [errors.field_invalid(path, value, "must be a quantity")]
    text = value if isinstance(value, str) else gorepr.scalar(value)
    try:
        return parse_quantity(text.strip()), []
    except QuantityError as e:
        return None, [errors.field_invalid(path, text, str(e))]


def quantities(resources: Any, path: str) -> Iterator[tuple[str, str, Optional[Quantity], list[Cause]]]:
    """(name, key path, quantity, parse problems) for each entry of a ResourceList."""
    if not isinstance(resources, dict):
        return
    for name, value in resources.items():
        key_path = f"{path}[{name}]"
        q, causes = quantity_or_cause(value, key_path)
        yield str(name), key_path, q, causes


def validate_nonnegative_quantity(q: Quantity, path: str) -> list[Cause]:
    if q.sign() < 0:
        return [errors.field_invalid(path, q.canonical(), validation.IS_NEGATIVE)]
    return []


def validate_positive_quantity(q: Quantity, path: str) -> list[Cause]:
    if q.sign() <= 0:
        return [errors.field_invalid(path, q.canonical(), NOT_POSITIVE)]
    return []


def go_quantity(q: Quantity) -> gorepr.GoRepr:
    """A ``resource.Quantity`` passed by value to field.Invalid: Go prints the struct (%#v), an
    int64Amount when its parser took the fast path, an inf.Dec (at some address) otherwise."""
    cached = gorepr.quote(q.text)
    if q.amount is not None:
        value, scale = q.amount
        return gorepr.GoRepr(f"resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, "
                             f"d:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:{cached}, "
                             f"Format:{gorepr.quote(q.format)}}}")
    return gorepr.GoRepr(f"resource.Quantity{{i:resource.int64Amount{{value:0, scale:0}}, "
                         f"d:resource.infDecAmount{{Dec:(*inf.Dec)(0xc000000000)}}, s:{cached}, "
                         f"Format:{gorepr.quote(q.format)}}}")


def go_resource_list(values: Any) -> gorepr.GoRepr:
    """A ``core.ResourceList`` as ``%#v`` prints it."""
    if not values:
        return gorepr.GoRepr("core.ResourceList(nil)" if values is None else "core.ResourceList{}")
    items = []
    for name, value in sorted(values.items()) if isinstance(values, dict) else ():
        q, _ = quantity_or_cause(value, "")
        items.append(f"{gorepr.quote(name)}:{go_quantity(q) if q is not None else gorepr.scalar(value)}")
    return gorepr.GoRepr("core.ResourceList{" + ", ".join(items) + "}")


def validate_resource_quantity_value(name: str, q: Quantity, path: str) -> list[Cause]:
    """upstream's ValidateResourceQuantityValue: not negative; whole for integer resources."""
    causes = validate_nonnegative_quantity(q, path)
    if is_integer_resource(name) and not q.is_integer():
        causes.append(errors.field_invalid(path, go_quantity(q), NOT_INTEGER))
    return causes


def validate_basic_resource(q: Quantity, path: str) -> list[Cause]:
    value = q.int_value()
    if value < 0:
        return [errors.field_invalid(path, value, "must be a valid resource quantity")]
    return []


def hugepage_problem(name: str, q: Quantity) -> str:
    """Why a hugepage quantity is not a whole number of pages ("" when it is)."""
    if not is_hugepage_resource(name):
        return ""
    try:
        page = parse_quantity(name[len(HUGEPAGES_PREFIX):])
    except QuantityError:
        page = None
    if page is not None and page.sign() > 0 and page.is_integer() and page.int_value() > 0:
        if q.int_value() % page.int_value() == 0:
            return ""
    return f"{q.canonical()} is not positive integer multiple of {name}"


def validate_resource_requirements(req: Any, path: str, claim_names: Iterable[str] = (),
                                   name_check: Optional[Callable[[str, str], list[Cause]]] = None,
                                   allow_indivisible_hugepages: bool = False) -> list[Cause]:
    """upstream's validateResourceRequirements (containers, and pod overhead as limits)."""
    if not isinstance(req, dict):
        return []
    name_check = name_check or validate_container_resource_name
    causes: list[Cause] = []
    lim_path, req_path = path + ".limits", path + ".requests"
    limits: dict[str, Quantity] = {}
    has_qos = has_hugepages = False
    for name, key_path, q, problems in quantities(req.get("limits"), lim_path):
        causes.extend(name_check(name, key_path))
        causes.extend(problems)
        if q is None:
            continue
        limits[name] = q
        causes.extend(validate_resource_quantity_value(name, q, key_path))
        if is_hugepage_resource(name):
            has_hugepages = True
            problem = "" if allow_indivisible_hugepages else hugepage_problem(name, q)
            if problem:
                causes.append(errors.field_invalid(key_path, q.canonical(), problem))
        has_qos = has_qos or name in ("cpu", "memory")
    raw_limits = as_dict(req.get("limits"))
    for name, key_path, q, problems in quantities(req.get("requests"), req_path):
        causes.extend(name_check(name, key_path))
        causes.extend(problems)
        if q is None:
            continue
        causes.extend(validate_resource_quantity_value(name, q, key_path))
        limit = limits.get(name)
        if limit is not None:
            if not q.equals(limit) and not is_overcommit_allowed(name):
                causes.append(errors.field_invalid(req_path, q.canonical(),
                                                   f"must be equal to {name} limit of {limit.canonical()}"))
            elif q > limit:
                causes.append(errors.field_invalid(req_path, q.canonical(),
                                                   f"must be less than or equal to {name} limit of "
                                                   f"{limit.canonical()}"))
        elif name not in raw_limits and not is_overcommit_allowed(name):
            causes.append(errors.field_required(lim_path, "Limit must be set for non overcommitable resources"))
        if is_hugepage_resource(name):
            has_hugepages = True
            problem = "" if allow_indivisible_hugepages else hugepage_problem(name, q)
            if problem:
                causes.append(errors.field_invalid(key_path, q.canonical(), problem))
        has_qos = has_qos or name in ("cpu", "memory")
    if has_hugepages and not has_qos:
        causes.append(errors.field_forbidden(path, "HugePages require cpu or memory"))
    causes.extend(_validate_claim_names(req.get("claims"), set(claim_names), path + ".claims"))
    return causes


def _validate_claim_names(claims: Any, pod_claims: set[str], path: str) -> list[Cause]:
    """upstream's validateResourceClaimNames: each claim named in pod.spec.resourceClaims."""
    causes: list[Cause] = []
    names: list[str] = []
    for i, claim in enumerate(claims if isinstance(claims, list) else ()):
        claim = claim if isinstance(claim, dict) else {}
        name = claim.get("name") or ""
        at = f"{path}[{i}]"
        if not name:
            causes.append(errors.field_required(at))
            continue
        if name in names:
            causes.append(errors.field_duplicate(at, name))
        else:
            key = name
            request = claim.get("request") or ""
            if request:
                causes.extend(errors.field_invalid(f"{at}.request", request, m)
                              for m in validation.is_dns1123_label(request))
                key += "/" + request
            if key in names:
                causes.append(errors.field_duplicate(at, key))
            elif not request:
                for seen in names:
                    if "/" in seen and seen.split("/", 1)[0] == name:
                        causes.append(errors.field_duplicate(at, name))
            names.append(key)
        if name not in pod_claims:
            detail = "must be one of the names in pod.spec.resourceClaims"
            detail += " which is empty" if not pod_claims else ": " + ", ".join(sorted(pod_claims))
            causes.append(errors.field_not_found(at, name, detail))
    return causes


def canonicalize_resource_list(resources: Any) -> None:
    """Rewrite every quantity of a ResourceList into upstream's canonical text (in place)."""
    if not isinstance(resources, dict):
        return
    for name, value in list(resources.items()):
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            q, problems = quantity_or_cause(value, "")
            if q is not None:
                resources[name] = q.canonical()


def canonicalize_requirements(req: Any) -> None:
    if isinstance(req, dict):
        canonicalize_resource_list(req.get("limits"))
        canonicalize_resource_list(req.get("requests"))
