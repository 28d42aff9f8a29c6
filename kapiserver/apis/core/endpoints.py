"""Endpoints (core/v1): addresses and ports per subset; nothing fills them from Services here."""
from __future__ import annotations

import ipaddress

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.Endpoints"
MAX_SHOWN = 3


class EndpointsStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        for subset in obj.get("subsets") or ():
            for port in (subset or {}).get("ports") or ():
                if isinstance(port, dict) and not port.get("protocol"):
                    port["protocol"] = "TCP"

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        causes = []
        for i, subset in enumerate(obj.get("subsets") or ()):
            path = f"subsets[{i}]"
            for key in ("addresses", "notReadyAddresses"):
                for j, addr in enumerate((subset or {}).get(key) or ()):
                    ip = (addr or {}).get("ip")
                    try:
                        ipaddress.ip_address(ip or "")
                    except ValueError:
                        causes.append(errors.field_invalid(f"{path}.{key}[{j}].ip", ip or "",
                                                           "must be a valid IP address"))
            for j, port in enumerate((subset or {}).get("ports") or ()):
                causes.extend(podspec.validate_port_number((port or {}).get("port"), f"{path}.ports[{j}].port"))
                causes.extend(field_checks.one_of((port or {}).get("protocol"), f"{path}.ports[{j}].protocol",
                                                    podspec.PROTOCOLS, required=True))
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
