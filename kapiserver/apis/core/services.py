"""Services (core/v1): defaults, cluster IP and node port allocation, the
checks users hit most, and kubectl's columns.

The cluster IP range is the ``service_cluster_ip_range`` setting (upstream's
``--service-cluster-ip-range``, default ``10.0.0.0/24`` as kube-apiserver's).
Allocation (``service_allocator.py``) is a transaction around the Store's
write, through the begin_create / begin_update / after_delete hooks.  The
``kubernetes`` Service of ``default`` is kept by ``controllers/kubernetes_service.py``.
"""
from __future__ import annotations

import ipaddress
from typing import Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import podspec
from kapiserver.apis.core.service_allocator import ServiceAllocator
from kapiserver.apis.core.service_ranges import DEFAULT_SERVICE_CIDR
from kapiserver.machinery import errors, labels, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import DNS1123_LABEL, FinishFunc, Strategy

SCHEMA = "io.k8s.api.core.v1.Service"
SPEC = "io.k8s.api.core.v1.ServiceSpec"
TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
AFFINITIES = ["ClientIP", "None"]
TRAFFIC_POLICIES = ["Cluster", "Local"]
IP_FAMILY_POLICIES = ["PreferDualStack", "RequireDualStack", "SingleStack"]
IP_MESSAGE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
# fields the server allocated: an update that leaves them out keeps them (upstream's patchAllocatedValues)
ALLOCATED = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
        return True
    except ValueError:
        return False


class ServiceStrategy(Strategy):
    name_validation = DNS1123_LABEL  # tightened to a DNS-1035 label in validate()

    allocator: Optional[ServiceAllocator] = None  # set by bind(): the ranges live in the Store's storage

    def bind(self, rtype: ResourceType, store: Any, config: Any) -> None:
        cidr = getattr(config, "service_cluster_ip_range", None) or DEFAULT_SERVICE_CIDR
        self.allocator = ServiceAllocator(store.storage, cidr)

    def bound_allocator(self) -> ServiceAllocator:
        if self.allocator is None:
            raise errors.internal_error("the Service allocator is not bound to a storage")
        return self.allocator

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_update(rtype, new, old)
        spec, old_spec = new.get("spec"), old.get("spec") or {}
        if not isinstance(spec, dict) or (spec.get("type") or "ClusterIP") == "ExternalName":
            return
        if not spec.get("clusterIP") and not spec.get("clusterIPs"):
            for key in ALLOCATED:
                if key in old_spec and key not in spec:
                    spec[key] = old_spec[key]
        if (spec.get("type") or "ClusterIP") in ("NodePort", "LoadBalancer"):
            old_ports = {(p.get("port"), p.get("protocol") or "TCP"): p.get("nodePort")
                         for p in old_spec.get("ports") or () if isinstance(p, dict)}
            for port in spec.get("ports") or ():
                if isinstance(port, dict) and not port.get("nodePort"):
                    kept = old_ports.get((port.get("port"), port.get("protocol") or "TCP"))
                    if kept:
                        port["nodePort"] = kept

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if not spec.get("type"):
            spec["type"] = "ClusterIP"
        kind = spec["type"]
        if not spec.get("sessionAffinity"):
            spec["sessionAffinity"] = "None"
        if spec["sessionAffinity"] == "ClientIP":
            config = spec.setdefault("sessionAffinityConfig", {})
            if isinstance(config, dict):
                client = config.setdefault("clientIP", {})
                if isinstance(client, dict):
                    client.setdefault("timeoutSeconds", 10800)
        for port in spec.get("ports") or ():
            if not isinstance(port, dict):
                continue
            if not port.get("protocol"):
                port["protocol"] = "TCP"
            if port.get("targetPort") in (None, 0, ""):
                port["targetPort"] = port.get("port")
        if kind in ("NodePort", "LoadBalancer") and not spec.get("externalTrafficPolicy"):
            spec["externalTrafficPolicy"] = "Cluster"
        if kind != "ExternalName" and not spec.get("internalTrafficPolicy"):
            spec["internalTrafficPolicy"] = "Cluster"
        if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
            spec["allocateLoadBalancerNodePorts"] = True

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.field_required("spec.ports")]
        causes = []
        name = (obj.get("metadata") or {}).get("name") or ""
        if name[:1].isdigit():
            causes.extend(errors.field_invalid("metadata.name", name, m) for m in validation.is_dns1035_label(name))
        causes += field_checks.one_of(spec.get("type"), "spec.type", TYPES, required=True)
        kind = spec.get("type")
        causes += field_checks.one_of(spec.get("sessionAffinity"), "spec.sessionAffinity", AFFINITIES, required=True)
        causes += field_checks.one_of(spec.get("ipFamilyPolicy"), "spec.ipFamilyPolicy", IP_FAMILY_POLICIES,
                                        required=False)
        for key in ("externalTrafficPolicy", "internalTrafficPolicy"):
            causes += field_checks.one_of(spec.get(key), f"spec.{key}", TRAFFIC_POLICIES, required=False)
        if kind == "ExternalName":
            name = spec.get("externalName")
            if not name:
                causes.append(errors.field_required("spec.externalName"))
            else:
                causes.extend(errors.field_invalid("spec.externalName", name, m)
                              for m in validation.is_dns1123_subdomain(name.rstrip(".")))
            if spec.get("clusterIP"):
                causes.append(errors.field_forbidden("spec.clusterIP", "may not be set for ExternalName services"))
        elif not spec.get("ports"):
            causes.append(errors.field_required("spec.ports"))
        for i, ip in enumerate(spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])):
            if ip != "None" and not _is_ip(ip):
                causes.append(errors.field_invalid(f"spec.clusterIPs[{i}]", ip, IP_MESSAGE))
        causes += self._validate_ports(spec, kind)
        causes += validation.validate_labels(spec.get("selector"), "spec.selector")
        for i, ip in enumerate(spec.get("externalIPs") or ()):
            if not _is_ip(ip):
                causes.append(errors.field_invalid(f"spec.externalIPs[{i}]", ip, IP_MESSAGE))
        return causes

    @staticmethod
    def _validate_ports(spec: dict, kind: Any) -> list[errors.Cause]:
        causes: list[errors.Cause] = []
        ports = spec.get("ports") or []
        names: set[str] = set()
        seen: set[tuple] = set()
        for i, port in enumerate(ports):
            if not isinstance(port, dict):
                continue
            p = f"spec.ports[{i}]"
            name = port.get("name")
            if not name:
                if len(ports) > 1:
                    causes.append(errors.field_required(p + ".name"))
            else:
                causes.extend(errors.field_invalid(p + ".name", name, m) for m in validation.is_dns1123_label(name))
                if name in names:
                    causes.append(errors.field_duplicate(p + ".name", name))
                names.add(name)
            causes.extend(podspec.validate_port_number(port.get("port"), p + ".port"))
            causes.extend(field_checks.one_of(port.get("protocol"), p + ".protocol", podspec.PROTOCOLS, required=True))
            target = port.get("targetPort")
            if isinstance(target, str):
                causes.extend(errors.field_invalid(p + ".targetPort", target, m)
                              for m in podspec.is_valid_port_name(target))
            elif target is not None:
                causes.extend(podspec.validate_port_number(target, p + ".targetPort"))
            if port.get("nodePort") and kind in ("ClusterIP", "ExternalName"):
                causes.append(errors.field_forbidden(p + ".nodePort", f"may not be used when `type` is '{kind}'"))
            key = (port.get("port"), port.get("protocol"))
            if key in seen:
                causes.append(errors.field_duplicate(p, {"port": key[0], "protocol": key[1]}))
            seen.add(key)
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self.validate(rtype, new)
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        old_ip = old_spec.get("clusterIP")
        if (old_ip and spec.get("type") != "ExternalName" and old_spec.get("type") != "ExternalName"
                and spec.get("clusterIP") != old_ip):
            causes.append(errors.field_invalid("spec.clusterIPs[0]", spec.get("clusterIP") or "",
                                               "may not change once set"))
        return causes

    async def begin_create(self, rtype: ResourceType, obj: dict, dry_run: bool) -> Optional[FinishFunc]:
        return await self.bound_allocator().begin_create(obj, dry_run)

    async def begin_update(self, rtype: ResourceType, new: dict, old: dict, dry_run: bool) -> Optional[FinishFunc]:
        return await self.bound_allocator().begin_update(new, old, dry_run)

    async def after_delete(self, rtype: ResourceType, obj: dict) -> None:
        await self.bound_allocator().release(obj)

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        return new.get("spec") != old.get("spec")


# ------------------------------------------------------------------ printer

def _external_ip(svc: dict) -> str:
    spec = svc.get("spec") or {}
    kind = spec.get("type")
    external = list(spec.get("externalIPs") or ())
    if kind == "ExternalName":
        return spec.get("externalName") or "<none>"
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in
                   ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or ()]
        found = [x for x in ingress if x] + external
        return ",".join(found) if found else "<pending>"
    return ",".join(external) if external else "<none>"


def _ports(svc: dict) -> str:
    out = []
    for p in (svc.get("spec") or {}).get("ports") or ():
        text = str(p.get("port"))
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        out.append(f"{text}/{p.get('protocol') or 'TCP'}")
    return ",".join(out) if out else "<none>"


def _selector(svc: dict) -> str:
    return labels.selector_string((svc.get("spec") or {}).get("selector")) or "<none>"


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Service", plural="services", singular="service", namespaced=True,
        strategy=ServiceStrategy(), short_names=("svc",), categories=("all",), has_status=True,
        return_deleted_object=True,
        schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Type", lambda o: columns.get_path(o, "spec", "type", default=""), SPEC, "type"),
            columns.column("Cluster-IP", lambda o: columns.get_path(o, "spec", "clusterIP", default="") or "<none>",
                           SPEC, "clusterIP"),
            columns.column("External-IP", _external_ip, SPEC, "externalIPs"),
            columns.column("Port(s)", _ports, SPEC, "ports"),
            columns.age_column(),
            columns.column("Selector", _selector, SPEC, "selector", priority=1),
        ),
    )
