"""What a Service's cluster IP fields may hold (upstream's ValidateServiceClusterIPsRelatedFields).

The Service's validation checks them, and so does the allocator before it
allocates anything (upstream's ``initIPFamilyFields``), which is why they are
not in ``services.py``: the kind uses the allocator.
"""
from __future__ import annotations

from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_list

IP_FAMILIES = ["IPv4", "IPv6"]
IP_FAMILY_POLICIES = ["PreferDualStack", "RequireDualStack", "SingleStack"]


def is_headless(spec: dict) -> bool:
    ips = spec.get("clusterIPs")
    return isinstance(ips, list) and len(ips) == 1 and ips[0] == "None"


def validate_cluster_ips_related_fields(spec: dict) -> list[errors.Cause]:
    """upstream's ValidateServiceClusterIPsRelatedFields."""
    if spec.get("type") == "ExternalName":
        return []
    causes: list[errors.Cause] = []
    ip = spec.get("clusterIP") or ""
    ips = as_list(spec.get("clusterIPs"))
    families = as_list(spec.get("ipFamilies"))
    if ip:
        if not ips:
            causes.append(errors.field_required("spec.clusterIPs"))
        elif ips[0] != ip:
            causes.append(errors.field_invalid("spec.clusterIPs", gorepr.string_slice(ips),
                                               "first value must match `clusterIP`"))
    elif ips:
        causes.append(errors.field_invalid("spec.clusterIPs", gorepr.string_slice(ips),
                                           "must be empty when `clusterIP` is not specified"))
    seen: set = set()
    for i, family in enumerate(families):
        if family not in IP_FAMILIES:
            causes.append(errors.field_not_supported(f"spec.ipFamilies[{i}]", family, IP_FAMILIES))
        if family in seen:
            causes.append(errors.field_duplicate(f"spec.ipFamilies[{i}]", family))
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in IP_FAMILY_POLICIES:
        causes.append(errors.field_not_supported("spec.ipFamilyPolicy", policy, IP_FAMILY_POLICIES))
    invalid = False
    for i, value in enumerate(ips):
        if i == 0 and value == "None":
            if len(ips) > 1:
                invalid = True
                causes.append(errors.field_invalid("spec.clusterIPs", gorepr.string_slice(ips),
                                                   "'None' must be the first and only value"))
            continue
        problems = validation.is_valid_ip(f"spec.clusterIPs[{i}]", value)
        invalid = invalid or bool(problems)
        causes.extend(problems)
    if len(ips) > 2:
        causes.append(errors.field_invalid("spec.clusterIPs", gorepr.string_slice(ips), "may only hold up to 2 values"))
    if invalid:
        return causes
    if len(ips) > 1 and not validation.is_dual_stack(ips):
        causes.append(errors.field_invalid("spec.clusterIPs", gorepr.string_slice(ips),
                                           "may specify no more than one IP for each IP family"))
    if not is_headless(spec) and ips and families:
        for i, value in enumerate(ips[:len(families)]):
            addr = validation.parse_ip_sloppy(value)
            v6 = addr is not None and validation.is_ipv6(addr)
            if families[i] == "IPv4" and v6:
                causes.append(errors.field_invalid(f"spec.clusterIPs[{i}]", value,
                                                   f"expected an IPv4 value as indicated by `ipFamilies[{i}]`"))
            if families[i] == "IPv6" and not v6:
                causes.append(errors.field_invalid(f"spec.clusterIPs[{i}]", value,
                                                   f"expected an IPv6 value as indicated by `ipFamilies[{i}]`"))
    return causes
