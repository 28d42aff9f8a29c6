"""EndpointSlices (discovery.k8s.io/v1): addressType required and fixed after
create, every endpoint at least one address of that type; ports default to
TCP.  Nothing maintains them (no endpointslice controller)."""
from __future__ import annotations

import ipaddress
from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.networking.ingresses import port_name_problems
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.discovery.v1.EndpointSlice"
ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 100


def _address_problems(address_type: str, address: str) -> list[str]:
    if address_type == "FQDN":
        return validation.is_dns1123_subdomain(address)
    version = 4 if address_type == "IPv4" else 6
    try:
        if ipaddress.ip_address(address).version == version:
            return []
    except ValueError:
        pass
    return [f"must be a valid {address_type} address"]


def _endpoints(endpoints: Any, address_type: str) -> list[errors.Cause]:
    causes = []
    if len(endpoints) > MAX_ENDPOINTS:
        causes.append(errors.field_too_many("endpoints", len(endpoints), MAX_ENDPOINTS))
    for i, ep in enumerate(endpoints):
        ep = ep if isinstance(ep, dict) else {}
        addresses = ep.get("addresses") or []
        at = f"endpoints[{i}].addresses"
        if not addresses:
            causes.append(errors.field_required(at, "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            causes.append(errors.field_too_many(at, len(addresses), MAX_ADDRESSES))
        if address_type in ADDRESS_TYPES:
            for j, address in enumerate(addresses):
                causes.extend(errors.field_invalid(f"{at}[{j}]", address, p)
                              for p in _address_problems(address_type, str(address)))
    return causes


def _ports(ports: Any) -> list[errors.Cause]:
    causes = []
    if len(ports) > MAX_PORTS:
        causes.append(errors.field_too_many("ports", len(ports), MAX_PORTS))
    seen = set()
    for i, port in enumerate(ports):
        port = port if isinstance(port, dict) else {}
        name = port.get("name") or ""
        if name:
            causes.extend(errors.field_invalid(f"ports[{i}].name", name, p) for p in port_name_problems(name))
        if name in seen:
            causes.append(errors.field_duplicate(f"ports[{i}].name", name))
        seen.add(name)
        causes.extend(field_checks.one_of(port.get("protocol"), f"ports[{i}].protocol", PROTOCOLS, required=True))
    return causes


class EndpointSliceStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        for port in obj.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("name", "")
                if not port.get("protocol"):
                    port["protocol"] = "TCP"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        address_type = obj.get("addressType") or ""
        causes = field_checks.one_of(address_type, "addressType", ADDRESS_TYPES, required=True)
        causes.extend(_endpoints(obj.get("endpoints") or [], address_type))
        causes.extend(_ports(obj.get("ports") or []))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return self.validate(rtype, new) + field_checks.immutable(new.get("addressType"), old.get("addressType"),
                                                                  "addressType")


def _more(items: list[str]) -> str:
    """Upstream's list cells: at most three, then `` + N more...``; ``<unset>`` when empty."""
    if not items:
        return "<unset>"
    text = ",".join(items[:3])
    return text + (f" + {len(items) - 3} more..." if len(items) > 3 else "")


def _port_cell(obj: dict) -> str:
    ports = [str(p["port"]) if isinstance(p, dict) and p.get("port") is not None else "<unset>"
             for p in obj.get("ports") or []]
    return _more(ports)


def _endpoint_cell(obj: dict) -> str:
    return _more([str(a) for ep in obj.get("endpoints") or [] for a in (ep or {}).get("addresses") or []])


def resource_type() -> ResourceType:
    return ResourceType(
        group="discovery.k8s.io", version="v1", kind="EndpointSlice", plural="endpointslices",
        singular="endpointslice", namespaced=True, strategy=EndpointSliceStrategy(), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("AddressType", lambda o: o.get("addressType") or "", SCHEMA, "addressType"),
            columns.column("Ports", _port_cell, SCHEMA, "ports"),
            columns.column("Endpoints", _endpoint_cell, SCHEMA, "endpoints"),
            columns.age_column(),
        ),
    )
