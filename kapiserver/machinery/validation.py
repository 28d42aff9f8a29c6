"""Generic validation of names, labels and ObjectMeta, with upstream's messages.

The ``is_*`` helpers mirror ``k8s.io/apimachinery/pkg/util/validation``: each
returns the list of problems with a value (empty: valid), worded exactly like
upstream so clients and tests that match on messages keep working.
``validate_object_meta`` and ``validate_object_meta_update`` mirror
``pkg/api/validation/objectmeta.go``; ``validate_labels`` and
``validate_label_selector`` mirror ``pkg/apis/meta/v1/validation``.  They
return field causes for a 422.
"""
from __future__ import annotations

import datetime
import ipaddress
import re
from typing import Any, Callable, Optional, TypeGuard, Union

from kapiserver.machinery import errors, gorepr, meta
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.managedfields.fieldmanager import validate_field_manager

# How a kind's metadata.name is validated (upstream's ValidateNameFunc per kind; a Strategy names one).
DNS1123_SUBDOMAIN = "subdomain"
DNS1123_LABEL = "label"
DNS1035_LABEL = "dns1035-label"
PATH_SEGMENT = "path-segment"

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                      "and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                          "'-' or '.', and must start and end with an alphanumeric character")
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                      "alphabetic character, and end with an alphanumeric character")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character")

FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"
EMPTY_ERROR = "must be non-empty"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's RegexError (its examples are followed by ``', '`` then `` or ``)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    return msg + " (e.g. " + " or ".join(f"'{e}', " for e in examples) + f"regex used for validation is '{fmt}')"


def is_dns1123_label(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_LABEL_MAX:
        problems.append(max_len_error(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            problems.append("must not contain dots")  # a subdomain within the length limit: dots
        else:
            problems.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return problems


def is_dns1123_subdomain(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return problems


def is_dns1035_label(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1035_LABEL_MAX:
        problems.append(max_len_error(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        problems.append(regex_error(_DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return problems


def is_qualified_name(value: str) -> list[str]:
    """A label/annotation key: ``[prefix/]name``, prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT,
                                                  "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    problems: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("prefix part " + EMPTY_ERROR)
        else:
            problems.extend("prefix part " + p for p in is_dns1123_subdomain(prefix))
    if not name:
        problems.append("name part " + EMPTY_ERROR)
    elif len(name) > QUALIFIED_NAME_MAX:
        problems.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        problems.append("name part " + regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT,
                                                   "MyName", "my.name", "123-abc"))
    return problems


def is_valid_label_value(value: str) -> list[str]:
    problems = []
    if len(value) > LABEL_VALUE_MAX:
        problems.append(max_len_error(LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.fullmatch(value):
        problems.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return problems


def is_path_segment_name(value: str) -> list[str]:
    """Names that are safe as one URL path segment (no ``.``/``..``, ``/`` or ``%``)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return is_path_segment_prefix(value)


def is_path_segment_prefix(value: str) -> list[str]:
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


PORT_RANGE_MESSAGE = inclusive_range_error(1, 65535)
_PORT_NAME_CHARSET_RE = re.compile(r"[-a-z0-9]+")
_HAS_LETTER_RE = re.compile(r"[a-z]")
MAX_INT32 = 2 ** 31 - 1


def is_int(value: Any) -> TypeGuard[int]:
    """A JSON integer (booleans are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_valid_port_num(port: Any) -> list[str]:
    """Upstream's IsValidPortNum."""
    if is_int(port) and 1 <= port <= 65535:
        return []
    return [PORT_RANGE_MESSAGE]


def is_valid_port_name(port: str) -> list[str]:
    """Upstream's IsValidPortName (an IANA_SVC_NAME, RFC 6335)."""
    problems = []
    if len(port) > 15:
        problems.append(max_len_error(15))
    if not _PORT_NAME_CHARSET_RE.fullmatch(port):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _HAS_LETTER_RE.search(port):
        problems.append("must contain at least one letter (a-z)")
    if "--" in port:
        problems.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def is_valid_user_id(uid: Any) -> list[str]:
    """Upstream's IsValidUserID / IsValidGroupID: 0 to MaxInt32."""
    if is_int(uid) and 0 <= uid <= MAX_INT32:
        return []
    return [inclusive_range_error(0, MAX_INT32)]


is_valid_group_id = is_valid_user_id

_PERCENT_RE = re.compile(r"[0-9]+%")


def is_valid_percent(value: str) -> list[str]:
    if _PERCENT_RE.fullmatch(value):
        return []
    return [regex_error("a valid percent string must be a numeric string followed by an ending '%'", "[0-9]+%",
                        "1%", "93%")]


_HTTP_HEADER_RE = re.compile(r"[-A-Za-z0-9]+")


def is_http_header_name(value: str) -> list[str]:
    if _HTTP_HEADER_RE.fullmatch(value):
        return []
    return [regex_error("a valid HTTP header must consist of alphanumeric characters or '-'", "[-A-Za-z0-9]+",
                        "X-Header-Name")]


ENV_VAR_NAME_FMT = "[-._a-zA-Z][-._a-zA-Z0-9]*"
_ENV_VAR_NAME_RE = re.compile(ENV_VAR_NAME_FMT)
RELAXED_ENV_VAR_NAME_MESSAGE = ("a valid environment variable name must consist only of printable ASCII characters "
                                "other than '='")


def _chdir_prefix_problems(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def is_env_var_name(value: str) -> list[str]:
    """The strict rule (kept for callers that need it; 1.32 serves the relaxed one)."""
    problems = []
    if not _ENV_VAR_NAME_RE.fullmatch(value):
        problems.append(regex_error("a valid environment variable name must consist of alphabetic characters, "
                                    "digits, '_', '-', or '.', and must not start with a digit", ENV_VAR_NAME_FMT,
                                    "my.env-name", "MY_ENV.NAME", "MyEnvName1"))
    return problems + _chdir_prefix_problems(value)


def is_relaxed_env_var_name(value: str) -> list[str]:
    """Upstream's IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation is on in 1.32)."""
    problems = []
    if not value:
        problems.append("environment variable name " + EMPTY_ERROR)
    if any(ord(ch) > 0x7F or not ch.isprintable() or ch == "=" for ch in value):
        problems.append(RELAXED_ENV_VAR_NAME_MESSAGE)
    return problems


CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_RE = re.compile(CONFIG_MAP_KEY_FMT)


def is_config_map_key(value: str) -> list[str]:
    """Upstream's IsConfigMapKey (keys of ConfigMaps and Secrets, and key selectors)."""
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _CONFIG_MAP_KEY_RE.fullmatch(value):
        problems.append(regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                    CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    return problems + _chdir_prefix_problems(value)


WILDCARD_DNS1123_SUBDOMAIN_FMT = "\\*\\." + DNS1123_SUBDOMAIN_FMT
_WILDCARD_DNS1123_SUBDOMAIN_RE = re.compile(WILDCARD_DNS1123_SUBDOMAIN_FMT)


def is_wildcard_dns1123_subdomain(value: str) -> list[str]:
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _WILDCARD_DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(regex_error(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
            "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character",
            WILDCARD_DNS1123_SUBDOMAIN_FMT, "*.example.com"))
    return problems


def is_fully_qualified_domain_name(path: str, name: str) -> list[Cause]:
    """Upstream's IsFullyQualifiedDomainName (a trailing dot allowed, at least two labels)."""
    if not name:
        return [errors.field_required(path)]
    if name.endswith("."):
        name = name[:-1]
    problems = is_dns1123_subdomain(name)
    if problems:
        return [errors.field_invalid(path, name, ",".join(problems))]
    labels = name.split(".")
    if len(labels) < 2:
        return [errors.field_invalid(path, name, "should be a domain with at least two segments separated by dots")]
    for label in labels:
        problems = is_dns1123_label(label)
        if problems:
            return [errors.field_invalid(path, label, ",".join(problems))]
    return []


_HTTP_PATH_FMT = "[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"
_HTTP_PATH_RE = re.compile(_HTTP_PATH_FMT)


def is_domain_prefixed_path(path: str, value: str) -> list[Cause]:
    """Upstream's IsDomainPrefixedPath (``acme.io/foo``)."""
    if not value:
        return [errors.field_required(path)]
    host, slash, rest = value.partition("/")
    if not slash or not host or not rest:
        return [errors.field_invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    causes = [errors.field_invalid(path, host, p) for p in is_dns1123_subdomain(host)]
    if not _HTTP_PATH_RE.fullmatch(rest):
        causes.append(errors.field_invalid(path, rest, regex_error("Invalid path", _HTTP_PATH_FMT)))
    return causes


# ---------------------------------------------------------------- IP addresses and CIDRs
#
# Upstream parses with netutils.ParseIPSloppy / ParseCIDRSloppy (Go 1.16's
# parser): IPv4 octets may carry leading zeros (read as decimal), zones are
# not allowed.

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IP_MESSAGE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
CIDR_MESSAGE = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


def _sloppy_ipv4(text: str) -> Optional[ipaddress.IPv4Address]:
    parts = text.split(".")
    if len(parts) != 4:
        return None
    octets = []
    for part in parts:
        if not part or not part.isascii() or not part.isdigit() or len(part) > 10 or int(part) > 255:
            return None
        octets.append(str(int(part)))
    return ipaddress.IPv4Address(".".join(octets))


def parse_ip_sloppy(text: Any) -> Optional[IPAddress]:
    """An IP address as ParseIPSloppy reads it, or None."""
    if not isinstance(text, str) or not text or "%" in text:
        return None
    if ":" not in text:
        return _sloppy_ipv4(text)
    head, sep, tail = text.rpartition(":")
    if "." in tail:  # embedded IPv4 (::ffff:1.2.3.4): normalize its octets
        v4 = _sloppy_ipv4(tail)
        if v4 is None:
            return None
        text = head + sep + str(v4)
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def parse_cidr_sloppy(text: Any) -> Optional[Union[ipaddress.IPv4Network, ipaddress.IPv6Network]]:
    """A CIDR as ParseCIDRSloppy reads it (host bits allowed), or None."""
    if not isinstance(text, str):
        return None
    addr, slash, bits = text.partition("/")
    ip = parse_ip_sloppy(addr)
    if ip is None or not slash or not bits.isascii() or not bits.isdigit() or len(bits) > 3:
        return None
    prefix = int(bits)
    if prefix > ip.max_prefixlen:
        return None
    return ipaddress.ip_network(f"{ip}/{prefix}", strict=False)


def is_valid_ip(path: str, value: Any) -> list[Cause]:
    return [] if parse_ip_sloppy(value) is not None else [errors.field_invalid(path, value, IP_MESSAGE)]


def is_valid_ipv4_address(path: str, value: Any) -> list[Cause]:
    ip = parse_ip_sloppy(value)
    if ip is None or not _is_v4(ip):
        return [errors.field_invalid(path, value, "must be a valid IPv4 address")]
    return []


def is_valid_ipv6_address(path: str, value: Any) -> list[Cause]:
    ip = parse_ip_sloppy(value)
    if ip is None or _is_v4(ip):
        return [errors.field_invalid(path, value, "must be a valid IPv6 address")]
    return []


def _is_v4(ip: IPAddress) -> bool:
    """Go's To4() != nil: IPv4, or IPv4-mapped IPv6."""
    return ip.version == 4 or (ip.version == 6 and ip.ipv4_mapped is not None)


def is_ipv6(ip: IPAddress) -> bool:
    return not _is_v4(ip)


def is_global_unicast(ip: IPAddress) -> bool:
    """Go's net.IP.IsGlobalUnicast (private ranges included): not unspecified, loopback,
    multicast, link-local or the IPv4 broadcast address; an IPv4-mapped IPv6 address is
    judged as its IPv4 address, as Go does."""
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local
                or ip == ipaddress.IPv4Address("255.255.255.255"))


def is_valid_cidr(path: str, value: Any) -> list[Cause]:
    return [] if parse_cidr_sloppy(value) is not None else [errors.field_invalid(path, value, CIDR_MESSAGE)]


def is_dual_stack(values: list[Any]) -> bool:
    """netutils.IsDualStackIPStrings: at least one address of each family."""
    families = {_is_v4(ip) for ip in (parse_ip_sloppy(v) for v in values) if ip is not None}
    return len(families) == 2


# ---------------------------------------------------------------- name functions
#
# Upstream's ValidateNameFunc(name, prefix): ``prefix`` is true for
# generateName, which may end in a dash because a random suffix follows.


def _mask_trailing_dash(name: str) -> str:
    # upstream replaces the last two characters by "a" (not just the dash)
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool = False) -> list[str]:
    return is_path_segment_prefix(name) if prefix else is_path_segment_name(name)


NAME_VALIDATORS: dict[str, Callable[[str, bool], list[str]]] = {
    DNS1123_SUBDOMAIN: name_is_dns_subdomain,
    DNS1123_LABEL: name_is_dns_label,
    DNS1035_LABEL: name_is_dns1035_label,
    PATH_SEGMENT: name_is_path_segment,
}


# ---------------------------------------------------------------- ObjectMeta


def validate_label_name(name: Any, path: str) -> list[Cause]:
    """Upstream's ValidateLabelName: a qualified name."""
    name = "" if name is None else str(name)
    return [errors.field_invalid(path, name, msg) for msg in is_qualified_name(name)]


def validate_labels(labels: Any, path: str) -> list[Cause]:
    """Keys qualified names, values label values; every problem is reported on ``path``."""
    causes: list[Cause] = []
    if not isinstance(labels, dict):
        return causes
    for key, value in labels.items():
        causes.extend(validate_label_name(key, path))
        value = "" if value is None else str(value)
        causes.extend(errors.field_invalid(path, value, msg) for msg in is_valid_label_value(value))
    return causes


SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def validate_label_selector(selector: Any, path: str, allow_invalid_label_values: bool = False) -> list[Cause]:
    """Upstream's ValidateLabelSelector (a nil selector is valid)."""
    if not isinstance(selector, dict):
        return []
    causes = validate_labels(selector.get("matchLabels"), f"{path}.matchLabels")
    exprs = selector.get("matchExpressions")
    for i, expr in enumerate(exprs if isinstance(exprs, list) else ()):
        at = f"{path}.matchExpressions[{i}]"
        expr = expr if isinstance(expr, dict) else {}
        operator, values = expr.get("operator") or "", expr.get("values") or []
        if operator in ("In", "NotIn"):
            if not values:
                causes.append(errors.field_required(f"{at}.values",
                                                    "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                causes.append(errors.field_forbidden(
                    f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(errors.field_invalid(f"{at}.operator", operator, "not a valid selector operator"))
        causes.extend(validate_label_name(expr.get("key") or "", f"{at}.key"))
        if not allow_invalid_label_values:
            for j, value in enumerate(values if isinstance(values, list) else ()):
                value = "" if value is None else str(value)
                causes.extend(errors.field_invalid(f"{at}.values[{j}]", value, msg)
                              for msg in is_valid_label_value(value))
    return causes


def label_selector_has_invalid_value(selector: Any) -> bool:
    """Upstream's LabelSelectorHasInvalidLabelValue (an old object keeps what it was allowed)."""
    if not isinstance(selector, dict):
        return False
    for expr in selector.get("matchExpressions") or ():
        for value in (expr or {}).get("values") or () if isinstance(expr, dict) else ():
            if is_valid_label_value("" if value is None else str(value)):
                return True
    return False


def validate_annotations(annotations: Any, path: str) -> list[Cause]:
    """Keys qualified names (case-insensitively); keys + values at most 256 KiB in all."""
    causes: list[Cause] = []
    if not isinstance(annotations, dict):
        return causes
    total = 0
    for key, value in annotations.items():
        key = str(key)
        causes.extend(errors.field_invalid(path, key, msg) for msg in is_qualified_name(key.lower()))
        total += len(key.encode("utf-8")) + len(("" if value is None else str(value)).encode("utf-8"))
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        causes.append(errors.field_too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return causes


_CONDITION_REASON_FMT = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_CONDITION_REASON_RE = re.compile(_CONDITION_REASON_FMT)
CONDITION_STATUSES = ["False", "True", "Unknown"]


def validate_conditions(conditions: Any, path: str) -> list[Cause]:
    """Upstream's metav1 ValidateConditions (``metav1.Condition`` lists)."""
    causes: list[Cause] = []
    seen: set = set()
    for i, condition in enumerate(conditions if isinstance(conditions, list) else ()):
        condition = condition if isinstance(condition, dict) else {}
        at = f"{path}[{i}]"
        kind = condition.get("type") or ""
        if kind in seen:
            causes.append(errors.field_duplicate(f"{at}.type", kind))
        seen.add(kind)
        causes.extend(validate_label_name(kind, f"{at}.type"))
        status = condition.get("status") or ""
        if status not in CONDITION_STATUSES:
            causes.append(errors.field_not_supported(f"{at}.status", status, CONDITION_STATUSES))
        generation = condition.get("observedGeneration")
        if isinstance(generation, int) and not isinstance(generation, bool) and generation < 0:
            causes.append(errors.field_invalid(f"{at}.observedGeneration", generation,
                                               "must be greater than or equal to zero"))
        if not condition.get("lastTransitionTime"):
            causes.append(errors.field_required(f"{at}.lastTransitionTime", "must be set"))
        reason = str(condition.get("reason") or "")
        if not reason:
            causes.append(errors.field_required(f"{at}.reason", "must be set"))
        else:
            if not _CONDITION_REASON_RE.fullmatch(reason):
                causes.append(errors.field_invalid(f"{at}.reason", reason, regex_error(
                    "a condition reason must start with alphabetic character, optionally followed by a string of "
                    "alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'",
                    _CONDITION_REASON_FMT, "my_name", "MY_NAME", "MyName", "ReasonA,ReasonB", "ReasonA:ReasonB")))
            if len(reason.encode()) > 1024:
                causes.append(errors.field_too_long(f"{at}.reason", 1024))
        if len(str(condition.get("message") or "").encode()) > 32 * 1024:
            causes.append(errors.field_too_long(f"{at}.message", 32 * 1024))
    return causes


BANNED_OWNERS = {("v1", "Event")}


def _go_owner_reference(ref: dict) -> gorepr.GoRepr:
    return gorepr.struct("v1.OwnerReference", (
        ("APIVersion", gorepr.quote(ref.get("apiVersion"))), ("Kind", gorepr.quote(ref.get("kind"))),
        ("Name", gorepr.quote(ref.get("name"))), ("UID", gorepr.quote(ref.get("uid"))),
        ("Controller", gorepr.pointer(ref.get("controller"), "bool")),
        ("BlockOwnerDeletion", gorepr.pointer(ref.get("blockOwnerDeletion"), "bool"))))


def _group_version(api_version: str) -> tuple[str, str]:
    """schema.ParseGroupVersion, lenient: ("", "") when it does not parse."""
    if not api_version:
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", api_version
    if len(parts) == 2:
        return parts[0], parts[1]
    return "", ""


def validate_owner_references(refs: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(refs, list):
        return causes
    first_controller = ""
    for ref in refs:
        if not isinstance(ref, dict):
            continue
        api_version = ref.get("apiVersion") or ""
        group, version = _group_version(api_version)
        if not version:
            causes.append(errors.field_invalid(path + ".apiVersion", api_version, "version must not be empty"))
        for name in ("kind", "name", "uid"):
            if not ref.get(name):
                causes.append(errors.field_invalid(f"{path}.{name}", ref.get(name) or "",
                                                   f"{name} must not be empty"))
        if (api_version, ref.get("kind")) in BANNED_OWNERS:
            causes.append(errors.field_invalid(path, _go_owner_reference(ref),
                                               f"{group}/{version}, Kind={ref.get('kind')} is disallowed from "
                                               "being an owner"))
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if first_controller:
                rendered = gorepr.GoRepr("[]v1.OwnerReference{" + ", ".join(
                    _go_owner_reference(r) for r in refs if isinstance(r, dict)) + "}")
                causes.append(errors.field_invalid(
                    path, rendered, 'Only one reference can have Controller set to true. Found "true" in references '
                    f"for {first_controller} and {current}"))
            else:
                first_controller = current
    return causes


ORPHAN_FINALIZER = "orphan"
FOREGROUND_FINALIZER = "foregroundDeletion"


def _finalizer_causes(finalizers: list, problems: Callable[[str], list[str]], path: str,
                      indexed: bool) -> list[Cause]:
    """A FieldValueInvalid cause per problem of each finalizer, at ``path[i]`` (``indexed``) or
    ``path``. The error bodies of a name are made once however often it repeats: a body of
    400,000 copies of one bad name costs a cause each, not a Go-quoting and a message each."""
    causes: list[Cause] = []
    bodies: dict[str, list[str]] = {}
    for i, finalizer in enumerate(finalizers):
        finalizer = str(finalizer)
        found = bodies.get(finalizer)
        if found is None:
            found = bodies[finalizer] = [errors.field_invalid("", finalizer, m).message for m in problems(finalizer)]
        for body in found:
            causes.append(errors.IndexedCause(errors.INVALID, body, path, i) if indexed
                          else Cause(errors.INVALID, body, path))
    return causes


def validate_finalizers(finalizers: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(finalizers, list):
        return causes
    # apimachinery's ValidateFinalizerName reports at the list's path, not the item's
    causes = _finalizer_causes(finalizers, is_qualified_name, path, indexed=False)
    if ORPHAN_FINALIZER in finalizers and FOREGROUND_FINALIZER in finalizers:
        causes.append(errors.field_invalid(path, gorepr.string_slice(finalizers),
                                           f"finalizer {ORPHAN_FINALIZER} and {FOREGROUND_FINALIZER} cannot be "
                                           "both set"))
    return causes


STANDARD_FINALIZERS = frozenset({"kubernetes", ORPHAN_FINALIZER, FOREGROUND_FINALIZER})


def kube_finalizer_problems(finalizer: str) -> list[str]:
    """core's validateKubeFinalizerName: an unqualified finalizer must be a standard one
    (``kubernetes``, ``orphan``, ``foregroundDeletion``)."""
    if "/" not in finalizer and finalizer not in STANDARD_FINALIZERS:
        return ["name is neither a standard finalizer name nor is it fully qualified"]
    return []


def validate_kube_finalizer_names(finalizers: Any, path: str) -> list[Cause]:
    """What core's ValidateObjectMeta adds for built-in kinds; ``path`` is the list (``metadata.finalizers``)."""
    if not isinstance(finalizers, list):
        return []
    return _finalizer_causes(finalizers, kube_finalizer_problems, path, indexed=True)


def validate_object_meta(meta: dict, namespaced: bool, name_validation: str = DNS1123_SUBDOMAIN,
                         path: str = "metadata") -> list[Cause]:
    """Upstream's ValidateObjectMeta: name, namespace, generation, labels, annotations, owners, finalizers.

    ``name_validation`` is one of the name-validation constants of
    :mod:`kapiserver.registry.resource_type`.  Run it after a ``generateName``
    has been turned into a name.
    """
    name_fn = NAME_VALIDATORS[name_validation]
    causes: list[Cause] = []
    generate_name = meta.get("generateName") or ""
    if generate_name:
        causes.extend(errors.field_invalid(path + ".generateName", generate_name, msg)
                      for msg in name_fn(generate_name, True))
    name = meta.get("name") or ""
    if not name:
        causes.append(errors.field_required(path + ".name", "name or generateName is required"))
    else:
        causes.extend(errors.field_invalid(path + ".name", name, msg) for msg in name_fn(name, False))
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            causes.append(errors.field_required(path + ".namespace"))
        else:
            causes.extend(errors.field_invalid(path + ".namespace", namespace, msg)
                          for msg in is_dns1123_label(namespace))
    elif namespace:
        causes.append(errors.field_forbidden(path + ".namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(errors.field_invalid(path + ".generation", generation, IS_NEGATIVE))
    causes.extend(validate_labels(meta.get("labels"), path + ".labels"))
    causes.extend(validate_annotations(meta.get("annotations"), path + ".annotations"))
    causes.extend(validate_owner_references(meta.get("ownerReferences"), path + ".ownerReferences"))
    causes.extend(validate_finalizers(meta.get("finalizers"), path + ".finalizers"))
    causes.extend(validate_managed_fields(meta.get("managedFields"), path + ".managedFields"))
    return causes


MAX_SUBRESOURCE_NAME_LENGTH = 256


def validate_managed_fields(entries: Any, path: str) -> list[Cause]:
    """Upstream's ValidateManagedFields: what a client may leave in managedFields entries."""
    causes: list[Cause] = []
    for i, entry in enumerate(entries if isinstance(entries, list) else ()):
        if not isinstance(entry, dict):
            continue
        where = f"{path}[{i}]"
        operation = entry.get("operation") or ""
        if operation not in ("Apply", "Update"):
            causes.append(errors.field_invalid(where + ".operation", operation, "must be `Apply` or `Update`"))
        fields_type = entry.get("fieldsType") or ""
        if fields_type and fields_type != "FieldsV1":
            causes.append(errors.field_invalid(where + ".fieldsType", fields_type, "must be `FieldsV1`"))
        manager = entry.get("manager")
        causes.extend(validate_field_manager(manager if isinstance(manager, str) else "", where + ".manager"))
        subresource = entry.get("subresource")
        if isinstance(subresource, str) and len(subresource) > MAX_SUBRESOURCE_NAME_LENGTH:
            causes.append(errors.field_too_long(where + ".subresource", MAX_SUBRESOURCE_NAME_LENGTH))
    return causes


_IMMUTABLE_META = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                   "deletionGracePeriodSeconds")


def validate_object_meta_update(new: dict, old: dict, path: str = "metadata") -> list[Cause]:
    """Upstream's ValidateObjectMetaUpdate: identity fields immutable, no new finalizers while deleting.

    The resourceVersion requirement is the Store's business (it decides
    whether unconditional updates are allowed), so it is not checked here.
    """
    causes: list[Cause] = []
    if old.get("deletionTimestamp"):
        old_finalizers = old.get("finalizers") or []
        added = sorted({f for f in new.get("finalizers") or [] if f not in old_finalizers})
        if added:
            causes.append(errors.field_forbidden(
                path + ".finalizers", "no new finalizers can be added if the object is being deleted, "
                f"found new finalizers {gorepr.string_slice(added)}"))
    new_generation, old_generation = new.get("generation") or 0, old.get("generation") or 0
    if isinstance(new_generation, int) and isinstance(old_generation, int) and new_generation < old_generation:
        causes.append(errors.field_invalid(path + ".generation", new_generation, "must not be decremented"))
    for name in _IMMUTABLE_META:
        new_value, old_value = new.get(name), old.get(name)
        if name in ("name", "namespace", "uid", "creationTimestamp"):  # Go zero value is ""
            new_value, old_value = new_value or "", old_value or ""
        if new_value != old_value:
            shown = _go_time(new_value) if name == "deletionTimestamp" else new_value
            causes.append(errors.field_invalid(f"{path}.{name}", shown, FIELD_IMMUTABLE))
    return causes


def _go_time(value: Any) -> Any:
    """A timestamp as a field error prints a ``*metav1.Time`` (its String(): ``2026-01-02 03:04:05 +0000 UTC``)."""
    if not isinstance(value, str):
        return value
    try:
        moment = meta.parse_rfc3339(value)
    except ValueError:
        return value
    moment = moment.astimezone(datetime.timezone.utc)  # metav1.Time decodes to local time: UTC in a server
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return gorepr.GoRepr(moment.strftime("%Y-%m-%d %H:%M:%S") + fraction + " +0000 UTC")
