"""Ingresses (networking.k8s.io/v1): rule, path and backend checks as upstream's
ValidateIngressSpec; status behind its subresource (no ingress controller fills it)."""
from __future__ import annotations

import ipaddress
import re
from typing import Any

from kapiserver.apis import columns
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.networking.v1.Ingress"
SPEC = "io.k8s.api.networking.v1.IngressSpec"
PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
_PORT_NAME_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")
_HAS_LETTER_RE = re.compile(r"[a-z]")


def port_name_problems(name: str) -> list[str]:
    """Upstream's IsValidPortName (an IANA_SVC_NAME)."""
    problems = []
    if len(name) > 15:
        problems.append(validation.max_len_error(15))
    if not _PORT_NAME_RE.fullmatch(name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _HAS_LETTER_RE.search(name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens")
    return problems


def port_number_problems(number: Any) -> list[str]:
    if isinstance(number, int) and 1 <= number <= 65535:
        return []
    return ["must be between 1 and 65535, inclusive"]


def backend(b: Any, path: str) -> list[errors.Cause]:
    """An IngressBackend: exactly one of service (name + port name or number) and resource."""
    b = b if isinstance(b, dict) else {}
    service, resource = b.get("service"), b.get("resource")
    if service is not None and resource is not None:
        return [errors.field_invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        causes = []
        for key in ("kind", "name"):
            if not (resource or {}).get(key):
                causes.append(errors.field_required(f"{path}.resource.{key}"))
        return causes
    if service is None:
        return [errors.field_invalid(path, "", "resource or service backend is required")]
    causes = []
    name = service.get("name") or ""
    if not name:
        causes.append(errors.field_required(f"{path}.service.name"))
    else:
        causes.extend(errors.field_invalid(f"{path}.service.name", name, p) for p in validation.is_dns1035_label(name))
    port = service.get("port") or {}
    port_name, port_number = port.get("name") or "", port.get("number") or 0
    if port_name and port_number:
        causes.append(errors.field_invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        causes.extend(errors.field_invalid(f"{path}.service.port.name", port_name, p)
                      for p in port_name_problems(port_name))
    elif port_number:
        causes.extend(errors.field_invalid(f"{path}.service.port.number", port_number, p)
                      for p in port_number_problems(port_number))
    else:
        causes.append(errors.field_required(path, "port name or number is required"))
    return causes


def _host(host: str, path: str) -> list[errors.Cause]:
    try:
        ipaddress.ip_address(host)
        return [errors.field_invalid(path, host, "must be a DNS name, not an IP address")]
    except ValueError:
        pass
    check = host[2:] if host.startswith("*.") else host
    return [errors.field_invalid(path, host, p) for p in validation.is_dns1123_subdomain(check)]


def _http_path(p: Any, path: str) -> list[errors.Cause]:
    p = p if isinstance(p, dict) else {}
    causes = []
    path_type, value = p.get("pathType"), p.get("path") or ""
    if path_type is None:
        causes.append(errors.field_required(f"{path}.pathType", "pathType must be specified"))
    elif path_type not in PATH_TYPES:
        causes.append(errors.field_not_supported(f"{path}.pathType", path_type, PATH_TYPES))
    elif (path_type != "ImplementationSpecific" or value) and not value.startswith("/"):
        causes.append(errors.field_invalid(f"{path}.path", value, "must be an absolute path"))
    causes.extend(backend(p.get("backend"), f"{path}.backend"))
    return causes


def validate_spec(spec: dict) -> list[errors.Cause]:
    causes = []
    rules = spec.get("rules") or []
    if not rules and spec.get("defaultBackend") is None:
        causes.append(errors.field_invalid("spec", spec.get("rules") or [],
                                           "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        causes.extend(backend(spec["defaultBackend"], "spec.defaultBackend"))
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        at = f"spec.rules[{i}]"
        if rule.get("host"):
            causes.extend(_host(rule["host"], f"{at}.host"))
        http = rule.get("http")
        if isinstance(http, dict):
            paths = http.get("paths") or []
            if not paths:
                causes.append(errors.field_required(f"{at}.http.paths"))
            for j, p in enumerate(paths):
                causes.extend(_http_path(p, f"{at}.http.paths[{j}]"))
    class_name = spec.get("ingressClassName")
    if class_name:
        causes.extend(errors.field_invalid("spec.ingressClassName", class_name, p)
                      for p in validation.is_dns1123_subdomain(class_name))
    return causes


class IngressStrategy(Strategy):
    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return validate_spec(obj.get("spec") if isinstance(obj.get("spec"), dict) else {})


def _hosts(obj: dict) -> str:
    """Upstream's formatHosts: ``*`` for a rule without host, at most 3 then ``+ N more...``."""
    hosts = [(r or {}).get("host") or "*" for r in columns.get_path(obj, "spec", "rules", default=[])]
    if not hosts:
        return "*"
    text = ",".join(hosts[:3])
    return text + (f" + {len(hosts) - 3} more..." if len(hosts) > 3 else "")


def load_balancer_addresses(status: Any) -> str:
    """IPs and hostnames of a load-balancer status, comma separated (upstream's loadBalancerStatusStringer)."""
    ingress = columns.get_path(status or {}, "loadBalancer", "ingress", default=[])
    out = []
    for entry in ingress:
        entry = entry or {}
        if entry.get("ip"):
            out.append(entry["ip"])
        elif entry.get("hostname"):
            out.append(entry["hostname"])
    text = ",".join(out)
    return text[:13] + "..." if len(text) > 16 else text


def _ports(obj: dict) -> str:
    return "80, 443" if columns.get_path(obj, "spec", "tls") else "80"


def resource_type() -> ResourceType:
    return ResourceType(
        group="networking.k8s.io", version="v1", kind="Ingress", plural="ingresses", singular="ingress",
        namespaced=True, strategy=IngressStrategy(), short_names=("ing",), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Class", lambda o: columns.get_path(o, "spec", "ingressClassName", default="<none>"),
                           SPEC, "ingressClassName"),
            columns.column("Hosts", _hosts, desc="Hosts that incoming requests are matched against before the "
                                                 "ingress rule"),
            columns.column("Address", lambda o: load_balancer_addresses(o.get("status")),
                           desc="Address is a list containing ingress points for the load-balancer"),
            columns.column("Ports", _ports, desc="Ports of TLS configurations that open"),
            columns.age_column(),
        ),
    )

