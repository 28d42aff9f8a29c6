"""Ingresses (networking.k8s.io/v1): rule, path and backend checks as upstream's
ValidateIngressSpec; status behind its subresource (no ingress controller fills it)."""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.networking.v1.Ingress"
SPEC = "io.k8s.api.networking.v1.IngressSpec"
PATH_TYPES = ["Exact", "ImplementationSpecific", "Prefix"]
INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
INVALID_PATH_SUFFIXES = ("/..", "/.")
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"


def typed_local_object_reference(ref: dict, path: str) -> list[errors.Cause]:
    """upstream's validateIngressTypedLocalObjectReference (resource backends, IngressClass parameters)."""
    causes: list[errors.Cause] = []
    group = ref.get("apiGroup")
    if group is not None:
        causes.extend(errors.field_invalid(f"{path}.apiGroup", group, m)
                      for m in validation.is_dns1123_subdomain(str(group)))
    for key in ("kind", "name"):
        value = ref.get(key) or ""
        if not value:
            causes.append(errors.field_required(f"{path}.{key}", f"{key} is required"))
        else:
            causes.extend(errors.field_invalid(f"{path}.{key}", value, m)
                          for m in validation.is_path_segment_name(value))
    return causes


def backend(b: Any, path: str) -> list[errors.Cause]:
    """upstream's validateIngressBackend: exactly one of service (name + port name or number) and resource."""
    b = b if isinstance(b, dict) else {}
    service, resource = b.get("service"), b.get("resource")
    if service is not None and resource is not None:
        return [errors.field_invalid(path, "", "cannot set both resource and service backends")]
    if resource is not None:
        return typed_local_object_reference(resource if isinstance(resource, dict) else {}, f"{path}.resource")
    if service is None:
        return [errors.field_invalid(path, "", "resource or service backend is required")]
    service = service if isinstance(service, dict) else {}
    causes = []
    name = service.get("name") or ""
    if not name:
        causes.append(errors.field_required(f"{path}.service.name"))
    else:
        causes.extend(errors.field_invalid(f"{path}.service.name", name, p) for p in validation.is_dns1035_label(name))
    port = as_dict(service.get("port"))
    port_name, port_number = port.get("name") or "", port.get("number") or 0
    if port_name and port_number:
        causes.append(errors.field_invalid(path, "", "cannot set both port name & port number"))
    elif port_name:
        causes.extend(errors.field_invalid(f"{path}.service.port.name", port_name, p)
                      for p in validation.is_valid_port_name(port_name))
    elif port_number:
        causes.extend(errors.field_invalid(f"{path}.service.port.number", port_number, p)
                      for p in validation.is_valid_port_num(port_number))
    else:
        causes.append(errors.field_required(path, "port name or number is required"))
    return causes


def _http_path(p: Any, path: str) -> list[errors.Cause]:
    p = p if isinstance(p, dict) else {}
    path_type, value = p.get("pathType"), p.get("path") or ""
    if path_type is None:
        return [errors.field_required(f"{path}.pathType", "pathType must be specified")]
    causes = []
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            causes.append(errors.field_invalid(f"{path}.path", value, "must be an absolute path"))
        if value:
            causes.extend(errors.field_invalid(f"{path}.path", value, f"must not contain '{seq}'")
                          for seq in INVALID_PATH_SEQUENCES if seq in value)
            causes.extend(errors.field_invalid(f"{path}.path", value, f"cannot end with '{suffix}'")
                          for suffix in INVALID_PATH_SUFFIXES if value.endswith(suffix))
    elif path_type == "ImplementationSpecific":
        if value and not value.startswith("/"):
            causes.append(errors.field_invalid(f"{path}.path", value, "must be an absolute path"))
    else:
        causes.append(errors.field_not_supported(f"{path}.pathType", path_type, PATH_TYPES))
    return causes + backend(p.get("backend"), f"{path}.backend")


def _rule_value_problems(rule: dict, path: str) -> list[errors.Cause]:
    http = rule.get("http")
    if not isinstance(http, dict):
        return []
    paths = http.get("paths") or []
    causes = [] if paths else [errors.field_required(f"{path}.http.paths")]
    for j, p in enumerate(paths):
        causes.extend(_http_path(p, f"{path}.http.paths[{j}]"))
    return causes


def _validate_rules(rules: list, allow_invalid_wildcard: bool) -> list[errors.Cause]:
    causes = []
    for i, rule in enumerate(rules):
        rule = rule if isinstance(rule, dict) else {}
        at = f"spec.rules[{i}]"
        host = rule.get("host") or ""
        wildcard = False
        if host:
            if validation.parse_ip_sloppy(host) is not None:
                causes.append(errors.field_invalid(f"{at}.host", host, "must be a DNS name, not an IP address"))
            if "*" in host:
                causes.extend(errors.field_invalid(f"{at}.host", host, m)
                              for m in validation.is_wildcard_dns1123_subdomain(host))
                wildcard = True
            else:
                causes.extend(errors.field_invalid(f"{at}.host", host, m)
                              for m in validation.is_dns1123_subdomain(host))
        if not wildcard or not allow_invalid_wildcard:
            causes.extend(_rule_value_problems(rule, at))
    return causes


def _validate_tls(tls: list, allow_invalid_secret: bool) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    for i, item in enumerate(tls):
        item = item if isinstance(item, dict) else {}
        for j, host in enumerate(item.get("hosts") or ()):
            host = str(host)
            check = validation.is_wildcard_dns1123_subdomain if "*" in host else validation.is_dns1123_subdomain
            causes.extend(errors.field_invalid(f"spec.tls[{i}].hosts[{j}]", host, m) for m in check(host))
        secret = item.get("secretName") or ""
        if secret and not allow_invalid_secret:
            causes.extend(errors.field_invalid(f"spec.tls[{i}].secretName", secret, m)
                          for m in validation.is_dns1123_subdomain(secret))
    return causes


def validate_spec(spec: dict, allow_invalid_secret: bool = False,
                  allow_invalid_wildcard: bool = False) -> list[errors.Cause]:
    """upstream's ValidateIngressSpec."""
    causes = []
    rules = spec.get("rules") or []
    if not rules and spec.get("defaultBackend") is None:
        rendered = "[]networking.IngressRule{}" if isinstance(spec.get("rules"), list) else \
            "[]networking.IngressRule(nil)"
        causes.append(errors.field_invalid("spec", gorepr.GoRepr(rendered),
                                           "either `defaultBackend` or `rules` must be specified"))
    if spec.get("defaultBackend") is not None:
        causes.extend(backend(spec["defaultBackend"], "spec.defaultBackend"))
    if rules:
        causes.extend(_validate_rules(rules, allow_invalid_wildcard))
    if spec.get("tls"):
        causes.extend(_validate_tls(spec["tls"], allow_invalid_secret))
    class_name = spec.get("ingressClassName")
    if class_name is not None:
        causes.extend(errors.field_invalid("spec.ingressClassName", class_name, p)
                      for p in validation.is_dns1123_subdomain(str(class_name)))
    return causes


class IngressStrategy(Strategy):
    tracks_generation = True

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateIngressCreate."""
        spec = as_dict(obj.get("spec"))
        causes = field_checks.kube_object_meta(obj) + validate_spec(spec)
        annotation = ((obj.get("metadata") or {}).get("annotations") or {}).get(INGRESS_CLASS_ANNOTATION)
        if annotation is not None and spec.get("ingressClassName") is not None \
                and annotation != spec.get("ingressClassName"):
            causes.append(errors.field_invalid(f"annotations.{INGRESS_CLASS_ANNOTATION}", annotation,
                                               "must match `ingressClassName` when both are specified"))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateIngressUpdate: what the stored object had stays allowed."""
        old_spec = old.get("spec") or {}
        invalid_secret = any(validation.is_dns1123_subdomain(str((t or {}).get("secretName")))
                             for t in old_spec.get("tls") or () if isinstance(t, dict) and t.get("secretName"))
        invalid_wildcard = any("*" in str((r or {}).get("host") or "") and _rule_value_problems(r, "x")
                               for r in old_spec.get("rules") or () if isinstance(r, dict))
        spec = as_dict(new.get("spec"))
        return field_checks.kube_object_meta(new) + validate_spec(spec, invalid_secret, invalid_wildcard)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateIngressStatusUpdate."""
        causes = []
        ingress = ((new.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        for i, entry in enumerate(ingress):
            entry = entry if isinstance(entry, dict) else {}
            at = f"status.loadBalancer.ingress[{i}]"
            if entry.get("ip"):
                causes.extend(validation.is_valid_ip(f"{at}.ip", entry["ip"]))
            host = entry.get("hostname") or ""
            if host:
                causes.extend(errors.field_invalid(f"{at}.hostname", host, m)
                              for m in validation.is_dns1123_subdomain(host))
                if validation.parse_ip_sloppy(host) is not None:
                    causes.append(errors.field_invalid(f"{at}.hostname", host, "must be a DNS name, not an IP address"))
        return causes


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

