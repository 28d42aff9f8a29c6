"""EndpointSlices (discovery.k8s.io/v1): upstream's ValidateEndpointSlice (addressType fixed after
create, every endpoint at least one address of that type); ports default to
TCP.  Nothing maintains them (no endpointslice controller)."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core.services import validate_non_special_ip
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.discovery.v1.EndpointSlice"
ADDRESS_TYPES = ["FQDN", "IPv4", "IPv6"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
MAX_ENDPOINTS = 1000
MAX_ADDRESSES = 100
MAX_PORTS = 20000
MAX_TOPOLOGY_LABELS = 16
MAX_ZONE_HINTS = 8


def _endpoints(endpoints: list, address_type: str) -> list[errors.Cause]:
    if len(endpoints) > MAX_ENDPOINTS:
        return [errors.field_too_many("endpoints", len(endpoints), MAX_ENDPOINTS)]
    causes = []
    for i, ep in enumerate(endpoints):
        ep = ep if isinstance(ep, dict) else {}
        at = f"endpoints[{i}]"
        addresses = ep.get("addresses") or []
        if not addresses:
            causes.append(errors.field_required(f"{at}.addresses", "must contain at least 1 address"))
        elif len(addresses) > MAX_ADDRESSES:
            causes.append(errors.field_too_many(f"{at}.addresses", len(addresses), MAX_ADDRESSES))
        for j, address in enumerate(addresses):
            address_path = f"{at}.addresses[{j}]"
            if address_type == "IPv4":
                causes += validation.is_valid_ipv4_address(address_path, address)
                causes += validate_non_special_ip(address, address_path)
            elif address_type == "IPv6":
                causes += validation.is_valid_ipv6_address(address_path, address)
                causes += validate_non_special_ip(address, address_path)
            elif address_type == "FQDN":
                causes += validation.is_fully_qualified_domain_name(address_path, str(address))
        node = ep.get("nodeName")
        if node is not None:
            causes.extend(errors.field_invalid(f"{at}.nodeName", node, m)
                          for m in validation.is_dns1123_subdomain(str(node)))
        topology = ep.get("deprecatedTopology")
        if isinstance(topology, dict) and len(topology) > MAX_TOPOLOGY_LABELS:
            causes.append(errors.field_too_many(f"{at}.deprecatedTopology", len(topology), MAX_TOPOLOGY_LABELS))
        causes += validation.validate_labels(topology, f"{at}.deprecatedTopology")
        hostname = ep.get("hostname")
        if hostname is not None:
            causes.extend(errors.field_invalid(f"{at}.hostname", hostname, m)
                          for m in validation.is_dns1123_label(str(hostname)))
        hints = ep.get("hints")
        if isinstance(hints, dict):
            causes += _hints(hints, f"{at}.hints")
    return causes


def _hints(hints: dict, path: str) -> list[errors.Cause]:
    zones = hints.get("forZones") or []
    if len(zones) > MAX_ZONE_HINTS:
        return [errors.field_too_many(f"{path}.forZones", len(zones), MAX_ZONE_HINTS)]
    causes = []
    seen: set = set()
    for i, zone in enumerate(zones):
        name = str((zone or {}).get("name") or "") if isinstance(zone, dict) else ""
        at = f"{path}.forZones[{i}].name"
        if name in seen:
            causes.append(errors.field_duplicate(at, name))
        seen.add(name)
        causes.extend(errors.field_invalid(at, name, m) for m in validation.is_valid_label_value(name))
    return causes


def _ports(ports: list) -> list[errors.Cause]:
    if len(ports) > MAX_PORTS:
        return [errors.field_too_many("ports", len(ports), MAX_PORTS)]
    causes: list[errors.Cause] = []
    seen: set = set()
    for i, port in enumerate(ports):
        port = port if isinstance(port, dict) else {}
        name = port.get("name") or ""
        if name:
            causes.extend(errors.field_invalid(f"ports[{i}].name", name, p) for p in validation.is_dns1123_label(name))
        if name in seen:
            causes.append(errors.field_duplicate(f"ports[{i}].name", name))
        seen.add(name)
        protocol = port.get("protocol")
        if protocol is None:
            causes.append(errors.field_required(f"ports[{i}].protocol"))
        elif protocol not in PROTOCOLS:
            causes.append(errors.field_not_supported(f"ports[{i}].protocol", protocol, PROTOCOLS))
        app_protocol = port.get("appProtocol")
        if app_protocol is not None:
            causes.extend(errors.field_invalid(f"ports[{i}].appProtocol", app_protocol, m)
                          for m in validation.is_qualified_name(str(app_protocol)))
    return causes


class EndpointSliceStrategy(Strategy):
    tracks_generation = True

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        """Labels count too (upstream's endpointSliceStrategy: they pick the slice's Service)."""
        labels_changed = (new.get("metadata") or {}).get("labels") != (old.get("metadata") or {}).get("labels")
        return labels_changed or super().generation_changes(rtype, new, old)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        for port in obj.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("name", "")
                if not port.get("protocol"):
                    port["protocol"] = "TCP"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateEndpointSlice."""
        address_type = obj.get("addressType") or ""
        causes = field_checks.kube_object_meta(obj)
        if not address_type:
            causes.append(errors.field_required("addressType"))
        elif address_type not in ADDRESS_TYPES:
            causes.append(errors.field_not_supported("addressType", address_type, ADDRESS_TYPES))
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
