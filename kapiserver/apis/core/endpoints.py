"""Endpoints (core/v1): addresses and ports per subset, validated as upstream's ValidateEndpoints;
nothing fills them from Services here."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import ports
from kapiserver.apis.core.services import validate_non_special_ip
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.core.v1.Endpoints"
MAX_SHOWN = 3


class EndpointsStrategy(Strategy):
    allow_create_on_update = True  # upstream's AllowCreateOnUpdate: a PUT may create one

    def default(self, rtype: ResourceType, obj: dict) -> None:
        for subset in obj.get("subsets") or ():
            for port in (subset or {}).get("ports") or ():
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateEndpoints."""
        causes = field_checks.kube_object_meta(obj)
        for i, subset in enumerate(obj.get("subsets") or ()):
            subset = subset if isinstance(subset, dict) else {}
            path = f"subsets[{i}]"
            addresses, not_ready = subset.get("addresses") or [], subset.get("notReadyAddresses") or []
            if not addresses and not not_ready:
                causes.append(errors.field_required(path, "must specify `addresses` or `notReadyAddresses`"))
            for key, items in (("addresses", addresses), ("notReadyAddresses", not_ready)):
                for j, addr in enumerate(items):
                    causes.extend(_validate_address(addr if isinstance(addr, dict) else {}, f"{path}.{key}[{j}]"))
            ports = subset.get("ports") or []
            for j, port in enumerate(ports):
                causes.extend(_validate_port(port if isinstance(port, dict) else {}, len(ports) > 1,
                                             f"{path}.ports[{j}]"))
        return causes


def _validate_address(addr: dict, path: str) -> list[errors.Cause]:
    causes = validation.is_valid_ip(f"{path}.ip", addr.get("ip") or "")
    hostname = addr.get("hostname") or ""
    if hostname:
        causes.extend(errors.field_invalid(f"{path}.hostname", hostname, m)
                      for m in validation.is_dns1123_label(hostname))
    node = addr.get("nodeName")
    if node is not None:
        causes.extend(errors.field_invalid(f"{path}.nodeName", node, m)
                      for m in validation.is_dns1123_subdomain(str(node)))
    return causes + validate_non_special_ip(addr.get("ip") or "", f"{path}.ip")


def _validate_port(port: dict, require_name: bool, path: str) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    name = port.get("name") or ""
    if require_name and not name:
        causes.append(errors.field_required(f"{path}.name"))
    elif name:
        causes.extend(errors.field_invalid(f"{path}.name", name, m) for m in validation.is_dns1123_label(name))
    causes.extend(ports.validate_port_number(port.get("port") or 0, f"{path}.port"))
    protocol = port.get("protocol") or ""
    if not protocol:
        causes.append(errors.field_required(f"{path}.protocol"))
    elif protocol not in ports.PROTOCOLS:
        causes.append(errors.field_not_supported(f"{path}.protocol", protocol, ports.PROTOCOLS))
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        causes.extend(errors.field_invalid(f"{path}.appProtocol", app_protocol, m)
                      for m in validation.is_qualified_name(str(app_protocol)))
    return causes


def format_endpoints(obj: dict) -> str:
    """``10.0.0.1:80,10.0.0.2:80 + 1 more...`` as upstream's printer shows ready addresses."""
    shown: list[str] = []
    total = 0
    for subset in obj.get("subsets") or ():
        addresses = [a.get("ip", "") for a in subset.get("addresses") or ()]
        ports = [p.get("port") for p in subset.get("ports") or ()] or [None]
        for port in ports:
            for ip in addresses:
                total += 1
                if len(shown) < MAX_SHOWN:
                    shown.append(ip if port is None else f"{ip}:{port}")
    if not shown:
        return "<none>"
    text = ",".join(shown)
    return text + (f" + {total - MAX_SHOWN} more..." if total > MAX_SHOWN else "")


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Endpoints", plural="endpoints", singular="endpoints", namespaced=True,
        strategy=EndpointsStrategy(), short_names=("ep",), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Endpoints", format_endpoints, desc="Endpoints of the service"),
            columns.age_column(),
        ),
    )
