"""NetworkPolicies (networking.k8s.io/v1): policyTypes and port protocols
defaulted as upstream; selectors, peers and ports validated.  Stored only:
nothing enforces them (no CNI), as in envtest."""
from __future__ import annotations

from typing import Any

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.networking.v1.NetworkPolicy"
SPEC = "io.k8s.api.networking.v1.NetworkPolicySpec"
POLICY_TYPES = ["Ingress", "Egress"]
PROTOCOLS = ["TCP", "UDP", "SCTP"]


def _ports(port_list: Any, path: str) -> list[errors.Cause]:
    """upstream's ValidateNetworkPolicyPort for each port."""
    causes = []
    for i, port in enumerate(port_list or []):
        port = port if isinstance(port, dict) else {}
        at = f"{path}[{i}]"
        protocol = port.get("protocol")
        if protocol is not None and protocol not in PROTOCOLS:
            causes.append(errors.field_not_supported(f"{at}.protocol", protocol, PROTOCOLS))
        value, end = port.get("port"), port.get("endPort")
        if value is not None:
            if not isinstance(value, str):
                causes.extend(errors.field_invalid(f"{at}.port", value, p) for p in validation.is_valid_port_num(value))
                if end is not None:
                    if validation.is_int(end) and validation.is_int(value) and end < value:
                        causes.append(errors.field_invalid(f"{at}.endPort", value,
                                                           "must be greater than or equal to `port`"))
                    causes.extend(errors.field_invalid(f"{at}.endPort", end, p)
                                  for p in validation.is_valid_port_num(end))
            else:
                if end is not None:
                    causes.append(errors.field_invalid(f"{at}.endPort", end,
                                                       "may not be specified when `port` is non-numeric"))
                causes.extend(errors.field_invalid(f"{at}.port", value, p)
                              for p in validation.is_valid_port_name(value))
        elif end is not None:
            causes.append(errors.field_invalid(f"{at}.endPort", end,
                                               "may not be specified when `port` is not specified"))
    return causes


def _ip_block(block: dict, path: str) -> list[errors.Cause]:
    cidr = block.get("cidr") or ""
    if not cidr:
        return [errors.field_required(f"{path}.cidr")]
    causes = validation.is_valid_cidr(f"{path}.cidr", cidr)
    network = validation.parse_cidr_sloppy(cidr)
    if network is None:
        return causes
    for i, except_cidr in enumerate(block.get("except") or ()):
        at = f"{path}.except[{i}]"
        causes += validation.is_valid_cidr(at, except_cidr)
        excepted = validation.parse_cidr_sloppy(except_cidr)
        if excepted is None:
            continue
        contained = excepted.version == network.version and excepted.network_address in network
        if not contained or network.prefixlen >= excepted.prefixlen:
            causes.append(errors.field_invalid(at, except_cidr, "must be a strict subset of `cidr`"))
    return causes


def _peers(peers: Any, path: str, allow_invalid: bool) -> list[errors.Cause]:
    causes = []
    for i, peer in enumerate(peers or []):
        peer = peer if isinstance(peer, dict) else {}
        at = f"{path}[{i}]"
        count = 0
        for key in ("podSelector", "namespaceSelector"):
            if peer.get(key) is not None:
                count += 1
                causes.extend(validation.validate_label_selector(peer[key], f"{at}.{key}", allow_invalid))
        if peer.get("ipBlock") is not None:
            count += 1
            causes.extend(_ip_block(peer["ipBlock"] if isinstance(peer["ipBlock"], dict) else {}, f"{at}.ipBlock"))
        if count == 0:
            causes.append(errors.field_required(at, "must specify a peer"))
        elif count > 1 and peer.get("ipBlock") is not None:
            causes.append(errors.field_forbidden(at, "may not specify both ipBlock and another peer"))
    return causes


def validate_spec(spec: dict, allow_invalid: bool = False) -> list[errors.Cause]:
    """upstream's ValidateNetworkPolicySpec."""
    causes = validation.validate_label_selector(spec.get("podSelector"), "spec.podSelector", allow_invalid)
    for i, rule in enumerate(spec.get("ingress") or []):
        rule = rule if isinstance(rule, dict) else {}
        causes.extend(_ports(rule.get("ports"), f"spec.ingress[{i}].ports"))
        causes.extend(_peers(rule.get("from"), f"spec.ingress[{i}].from", allow_invalid))
    for i, rule in enumerate(spec.get("egress") or []):
        rule = rule if isinstance(rule, dict) else {}
        causes.extend(_ports(rule.get("ports"), f"spec.egress[{i}].ports"))
        causes.extend(_peers(rule.get("to"), f"spec.egress[{i}].to", allow_invalid))
    types = spec.get("policyTypes") or []
    if len(types) > len(POLICY_TYPES):
        return causes + [errors.field_invalid("spec.policyTypes",
                                              gorepr.string_slice(types, "networking.PolicyType"),
                                              "may not specify more than two policyTypes")]
    for i, kind in enumerate(types):
        if kind not in POLICY_TYPES:
            causes.append(errors.field_not_supported(f"spec.policyTypes[{i}]", kind, POLICY_TYPES))
    return causes


class NetworkPolicyStrategy(Strategy):
    tracks_generation = True

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
        """upstream's ValidateNetworkPolicy."""
        spec = as_dict(obj.get("spec"))
        return field_checks.kube_object_meta(obj) + validate_spec(spec)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        spec = as_dict(new.get("spec"))
        allow = bool(validation.validate_label_selector((old.get("spec") or {}).get("podSelector"), "x"))
        return field_checks.kube_object_meta(new) + validate_spec(spec, allow)


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

