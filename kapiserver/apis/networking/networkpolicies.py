"""NetworkPolicies (networking.k8s.io/v1): policyTypes and port protocols
defaulted as upstream; selectors, peers and ports validated.  Stored only:
nothing enforces them (no CNI), as in envtest."""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.apis.networking.ingresses import port_name_problems, port_number_problems
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.networking.v1.NetworkPolicy"
SPEC = "io.k8s.api.networking.v1.NetworkPolicySpec"
POLICY_TYPES = ["Ingress", "Egress"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _ports(port_list: Any, path: str) -> list[errors.Cause]:
    causes = []
    for i, port in enumerate(port_list or []):
        port = port if isinstance(port, dict) else {}
        at = f"{path}[{i}]"
        causes.extend(field_checks.one_of(port.get("protocol"), f"{at}.protocol", PROTOCOLS))
        value = port.get("port")
        if isinstance(value, int):
            causes.extend(errors.field_invalid(f"{at}.port", value, p) for p in port_number_problems(value))
        elif isinstance(value, str):
            causes.extend(errors.field_invalid(f"{at}.port", value, p) for p in port_name_problems(value))
        end = port.get("endPort")
        if end is not None:
            if value is None:
                causes.append(errors.field_required(f"{at}.port", "must be specified when endPort is specified"))
            elif isinstance(value, str):
                causes.append(errors.field_forbidden(f"{at}.endPort", "may not be specified when port is non-numeric"))
            elif isinstance(end, int) and end < value:
                causes.append(errors.field_invalid(f"{at}.endPort", end,
                                                   "must be greater than or equal to `port`"))
    return causes


def _peers(peers: Any, path: str) -> list[errors.Cause]:
    causes = []
    for i, peer in enumerate(peers or []):
        peer = peer if isinstance(peer, dict) else {}
        at = f"{path}[{i}]"
        selectors = [k for k in ("podSelector", "namespaceSelector") if peer.get(k) is not None]
        if peer.get("ipBlock") is not None:
            if selectors:
                causes.append(errors.field_forbidden(at, "may not specify both ipBlock and another peer"))
            if not peer["ipBlock"].get("cidr"):
                causes.append(errors.field_required(f"{at}.ipBlock.cidr"))
        elif not selectors:
            causes.append(errors.field_required(at, "must specify a peer"))
        for key in selectors:
            causes.extend(field_checks.label_selector(peer[key], f"{at}.{key}"))
    return causes


class NetworkPolicyStrategy(Strategy):
    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        for direction in ("ingress", "egress"):
            for rule in spec.get(direction) or []:
                for port in (rule or {}).get("ports") or []:
                    if isinstance(port, dict) and not port.get("protocol"):
                        port["protocol"] = "TCP"
        if not spec.get("policyTypes"):
            spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        causes = field_checks.label_selector(spec.get("podSelector"), "spec.podSelector")
        for i, rule in enumerate(spec.get("ingress") or []):
            causes.extend(_ports((rule or {}).get("ports"), f"spec.ingress[{i}].ports"))
            causes.extend(_peers((rule or {}).get("from"), f"spec.ingress[{i}].from"))
        for i, rule in enumerate(spec.get("egress") or []):
            causes.extend(_ports((rule or {}).get("ports"), f"spec.egress[{i}].ports"))
            causes.extend(_peers((rule or {}).get("to"), f"spec.egress[{i}].to"))
        types = spec.get("policyTypes") or []
        for i, t in enumerate(types):
            causes.extend(field_checks.one_of(t, f"spec.policyTypes[{i}]", POLICY_TYPES, required=True))
        if len(types) > len(POLICY_TYPES):
            causes.append(errors.field_invalid("spec.policyTypes", types, "may not have more than 2 policyTypes"))
        return causes


def resource_type() -> ResourceType:
    return ResourceType(
        group="networking.k8s.io", version="v1", kind="NetworkPolicy", plural="networkpolicies",
        singular="networkpolicy", namespaced=True, strategy=NetworkPolicyStrategy(), short_names=("netpol",),
        schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Pod-Selector", lambda o: field_checks.selector_text(columns.get_path(o, "spec", "podSelector")),
                           SPEC, "podSelector"),
            columns.age_column(),
        ),
    )

