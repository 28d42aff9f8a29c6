"""Services (core/v1): defaults, cluster IP and node port allocation,
upstream's ValidateService / ValidateServiceUpdate, and kubectl's columns.

The cluster IP range is the ``service_cluster_ip_range`` setting (upstream's
``--service-cluster-ip-range``, default ``10.0.0.0/24`` as kube-apiserver's).
Allocation (``service_allocator.py``) is a transaction around the Store's
write, through the begin_create / begin_update / after_delete hooks; as in
upstream (whose beginCreate/beginUpdate allocate before BeforeCreate/BeforeUpdate
validate), the Service is validated once its addresses and ports are known,
and a refused Service gives back what was taken for it.  The ``kubernetes``
Service of ``default`` is kept by ``controllers/kubernetes_service.py``.
"""
from __future__ import annotations

import copy
import ipaddress
from typing import Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import node_connections, ports
from kapiserver.apis.core.service_allocator import ServiceAllocator
from kapiserver.apis.core.service_cluster_ips import is_headless, validate_cluster_ips_related_fields
from kapiserver.apis.core.service_ranges import DEFAULT_SERVICE_CIDR
from kapiserver.machinery import errors, gorepr, labels, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.jsonvalues import as_dict, as_list
from kapiserver.machinery.validation import DNS1035_LABEL
from kapiserver.registry.resource_type import FinishFunc, ResourceType, ServerSettings, Strategy

SCHEMA = "io.k8s.api.core.v1.Service"
SPEC = "io.k8s.api.core.v1.ServiceSpec"
TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
AFFINITIES = ["ClientIP", "None"]
TRAFFIC_POLICIES = ["Cluster", "Local"]
IP_MODES = ["Proxy", "VIP"]
KUBELET_PORT = 10250
MAX_AFFINITY_SECONDS = 86400
DEFAULT_AFFINITY_SECONDS = 10800
# fields the server allocated: an update that leaves them out keeps them (upstream's patchAllocatedValues)
ALLOCATED = ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy")
LOAD_BALANCER_SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"
TOPOLOGY_MODE_ANNOTATION = "service.kubernetes.io/topology-mode"
TOPOLOGY_HINTS_ANNOTATION = "service.kubernetes.io/topology-aware-hints"


def _spec(svc: Optional[dict]) -> dict:
    spec = (svc or {}).get("spec")
    return spec if isinstance(spec, dict) else {}


def _spec_ports(spec: dict) -> list[dict]:
    return [p for p in spec.get("ports") or () if isinstance(p, dict)] if isinstance(spec.get("ports"), list) else []


def needs_cluster_ip(spec: dict) -> bool:
    return (spec.get("type") or "ClusterIP") != "ExternalName"


def needs_node_port(spec: dict) -> bool:
    kind = spec.get("type")
    return kind == "NodePort" or (kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)


def needs_health_check_node_port(spec: dict) -> bool:
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def externally_accessible(spec: dict) -> bool:
    kind = spec.get("type")
    return kind in ("LoadBalancer", "NodePort") or (kind == "ClusterIP" and bool(spec.get("externalIPs")))


def default_service(obj: dict) -> None:
    """Upstream's SetDefaults_Service (core/v1)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if not spec.get("sessionAffinity"):
        spec["sessionAffinity"] = "None"
    if spec["sessionAffinity"] == "None":
        spec.pop("sessionAffinityConfig", None)
    if spec["sessionAffinity"] == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client, dict) or client.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": DEFAULT_AFFINITY_SECONDS}}
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    for port in _spec_ports(spec):
        if not port.get("protocol"):
            port["protocol"] = "TCP"
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
        spec["externalTrafficPolicy"] = "Cluster"
    if spec.get("internalTrafficPolicy") is None and spec["type"] in ("NodePort", "LoadBalancer", "ClusterIP"):
        spec["internalTrafficPolicy"] = "Cluster"
    if spec["type"] == "LoadBalancer":
        if spec.get("allocateLoadBalancerNodePorts") is None:
            spec["allocateLoadBalancerNodePorts"] = True
        ingress = ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")
        for entry in ingress if isinstance(ingress, list) else ():
            if isinstance(entry, dict) and entry.get("ip") and entry.get("ipMode") is None:
                entry["ipMode"] = "VIP"


def normalize_cluster_ips(spec: dict, old_spec: Optional[dict]) -> None:
    """upstream's normalizeClusterIPs: keep clusterIP and clusterIPs in step for clients that set one."""
    ip, ips = spec.get("clusterIP") or "", spec.get("clusterIPs") or []
    if old_spec is None:
        if ip and not ips:
            spec["clusterIPs"] = [ip]
        return
    old_ip, old_ips = old_spec.get("clusterIP") or "", old_spec.get("clusterIPs") or []
    if old_ips and not ips and old_ip == ip:
        spec["clusterIPs"] = ips = list(old_ips)
    if old_ip != ip:
        same = ips == old_ips
        if old_ip and not ip:
            if same:
                spec.pop("clusterIPs", None)
        elif same:
            if not ip:
                spec.pop("clusterIPs", None)
            else:
                spec["clusterIPs"] = [ip] + list(old_ips[1:]) if old_ips else [ip]


def patch_allocated_values(spec: dict, old_spec: dict) -> None:
    """upstream's patchAllocatedValues: values the server allocated survive an update that omits them."""
    if needs_cluster_ip(old_spec) and needs_cluster_ip(spec):
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
        if not spec.get("clusterIP") and not spec.get("clusterIPs"):
            for key in ("ipFamilies", "ipFamilyPolicy"):
                if key in old_spec and key not in spec:
                    spec[key] = copy.deepcopy(old_spec[key])
    if needs_node_port(old_spec) and needs_node_port(spec):
        used = {p.get("nodePort") for p in _spec_ports(old_spec) if p.get("nodePort")} & \
            {p.get("nodePort") for p in _spec_ports(spec) if p.get("nodePort")}
        by_name = {p.get("name") or "": p.get("nodePort") for p in _spec_ports(old_spec)}
        for port in _spec_ports(spec):
            if not port.get("nodePort"):
                kept = by_name.get(port.get("name") or "")
                if kept and kept not in used:
                    port["nodePort"] = kept
    if needs_health_check_node_port(old_spec) and needs_health_check_node_port(spec):
        if not spec.get("healthCheckNodePort") and old_spec.get("healthCheckNodePort"):
            spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]


def drop_type_dependent_fields(spec: dict, old_spec: dict) -> None:
    """upstream's dropTypeDependentFields: what a type change makes obsolete (and the user did not touch)."""
    if needs_cluster_ip(old_spec) and not needs_cluster_ip(spec):
        if spec.get("clusterIP") == old_spec.get("clusterIP") and spec.get("clusterIPs") == old_spec.get("clusterIPs"):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for key in ("ipFamilies", "ipFamilyPolicy"):
            if spec.get(key) == old_spec.get(key):
                spec.pop(key, None)
    if needs_node_port(old_spec) and not needs_node_port(spec):
        if [p.get("nodePort") for p in _spec_ports(spec)] == [p.get("nodePort") for p in _spec_ports(old_spec)]:
            for port in _spec_ports(spec):
                port.pop("nodePort", None)
    if needs_health_check_node_port(old_spec) and not needs_health_check_node_port(spec) and \
            spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
        spec.pop("healthCheckNodePort", None)
    if old_spec.get("type") == "LoadBalancer" and spec.get("type") != "LoadBalancer":
        for key in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
            if spec.get(key) is not None and spec.get(key) == old_spec.get(key):
                spec.pop(key, None)
    if externally_accessible(old_spec) and not externally_accessible(spec) and \
            spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)


class ServiceStrategy(Strategy):
    """Allocation comes before validation, as upstream's beginCreate/beginUpdate do:
    both run in :meth:`begin_create` / :meth:`begin_update`."""

    name_validation = DNS1035_LABEL
    allow_create_on_update = True  # upstream's AllowCreateOnUpdate: a PUT may create one

    allocator: Optional[ServiceAllocator] = None  # set by bind(): the ranges live in the Store's storage

    def bind(self, rtype: ResourceType, store: Any, config: Optional[ServerSettings]) -> None:
        cidr = (config.service_cluster_ip_range if config is not None else "") or DEFAULT_SERVICE_CIDR
        self.allocator = ServiceAllocator(store.storage, cidr)

    def bound_allocator(self) -> ServiceAllocator:
        if self.allocator is None:
            raise errors.internal_error("the Service allocator is not bound to a storage")
        return self.allocator

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        if isinstance(obj.get("spec"), dict):
            normalize_cluster_ips(obj["spec"], None)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_update(rtype, new, old)
        spec, old_spec = new.get("spec"), _spec(old)
        if not isinstance(spec, dict):
            return
        patch_allocated_values(spec, old_spec)
        normalize_cluster_ips(spec, old_spec)
        drop_type_dependent_fields(spec, old_spec)
        if spec.get("type") != "LoadBalancer" and isinstance(new.get("status"), dict):
            new["status"]["loadBalancer"] = {}

    def default(self, rtype: ResourceType, obj: dict) -> None:
        default_service(obj)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        return field_checks.kube_object_meta(obj)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return field_checks.kube_object_meta(new)

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidateServiceStatusUpdate."""
        return validate_load_balancer_status((new.get("status") or {}).get("loadBalancer"), "status.loadBalancer",
                                             _spec(new))

    async def begin_create(self, rtype: ResourceType, obj: dict, dry_run: bool) -> Optional[FinishFunc]:
        finish = await self.bound_allocator().begin_create(obj, dry_run)
        await self._refuse_if_invalid(obj, validate_service(obj), finish)
        return finish

    async def begin_update(self, rtype: ResourceType, new: dict, old: dict, dry_run: bool) -> Optional[FinishFunc]:
        if new.get("spec") == _spec(old):  # a status or metadata write: nothing to allocate
            await self._refuse_if_invalid(new, validate_service(new), None)
            return None
        finish = await self.bound_allocator().begin_update(new, old, dry_run)
        await self._refuse_if_invalid(new, validate_service_update(new, old) + validate_service(new), finish)
        return finish

    @staticmethod
    async def _refuse_if_invalid(svc: dict, causes: list[errors.Cause], finish: Optional[FinishFunc]) -> None:
        if causes:
            if finish is not None:
                await finish(False)  # give back what was allocated for it
            raise errors.invalid("Service", "", (svc.get("metadata") or {}).get("name") or "", causes)

    async def after_delete(self, rtype: ResourceType, obj: dict) -> None:
        await self.bound_allocator().release(obj)


# ------------------------------------------------------------------ validation

def _go_service_port(port: dict) -> gorepr.GoRepr:
    """The (protocol, port) key upstream reports duplicates with: a core.ServicePort."""
    return gorepr.struct("core.ServicePort", (
        ("Name", '""'), ("Protocol", gorepr.quote(port.get("protocol"))), ("AppProtocol", "(*string)(nil)"),
        ("Port", str(port.get("port") or 0)),
        ("TargetPort", 'intstr.IntOrString{Type:0, IntVal:0, StrVal:""}'), ("NodePort", "0")))


def _validate_service_port(port: dict, require_name: bool, names: set[str], path: str) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    name = port.get("name") or ""
    if require_name and not name:
        causes.append(errors.field_required(f"{path}.name"))
    elif name:
        causes.extend(errors.field_invalid(f"{path}.name", name, m) for m in validation.is_dns1123_label(name))
        if name in names:
            causes.append(errors.field_duplicate(f"{path}.name", name))
        else:
            names.add(name)
    causes.extend(ports.validate_port_number(port.get("port") or 0, f"{path}.port"))
    protocol = port.get("protocol") or ""
    if not protocol:
        causes.append(errors.field_required(f"{path}.protocol"))
    elif protocol not in ports.PROTOCOLS:
        causes.append(errors.field_not_supported(f"{path}.protocol", protocol, ports.PROTOCOLS))
    causes.extend(ports.validate_port_num_or_name(port.get("targetPort"), f"{path}.targetPort"))
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        causes.extend(errors.field_invalid(f"{path}.appProtocol", app_protocol, m)
                      for m in validation.is_qualified_name(str(app_protocol)))
    return causes


def validate_non_special_ip(ip: Any, path: str) -> list[errors.Cause]:
    """upstream's ValidateNonSpecialIP (external IPs, endpoints)."""
    addr = validation.parse_ip_sloppy(ip)
    if addr is None:
        return [errors.field_invalid(path, ip, "must be a valid IP address")]
    if addr.version == 6 and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    causes = []
    if addr.is_unspecified:
        causes.append(errors.field_invalid(path, ip, f"may not be unspecified ({ip})"))
    if addr.is_loopback:
        causes.append(errors.field_invalid(path, ip, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
    link_local_multicast = (addr.version == 4 and addr in ipaddress.ip_network("224.0.0.0/24")) or \
        (addr.version == 6 and addr.is_multicast and (int(addr) >> 112) & 0xF == 2)
    if addr.is_link_local and not addr.is_multicast:
        causes.append(errors.field_invalid(path, ip, "may not be in the link-local range (169.254.0.0/16, "
                                                     "fe80::/10)"))
    if link_local_multicast:
        causes.append(errors.field_invalid(path, ip, "may not be in the link-local multicast range "
                                                     "(224.0.0.0/24, ff02::/10)"))
    return causes


def validate_service(svc: dict) -> list[errors.Cause]:
    """upstream's ValidateService, after the ObjectMeta checks the Store runs."""
    md = as_dict(svc.get("metadata"))
    annotations = as_dict(md.get("annotations"))
    spec = _spec(svc)
    causes = field_checks.kube_object_meta(svc)
    if TOPOLOGY_MODE_ANNOTATION in annotations and TOPOLOGY_HINTS_ANNOTATION in annotations and \
            annotations[TOPOLOGY_MODE_ANNOTATION] != annotations[TOPOLOGY_HINTS_ANNOTATION]:
        causes.append(errors.field_invalid(f"metadata.annotations[{TOPOLOGY_MODE_ANNOTATION}]",
                                           annotations[TOPOLOGY_MODE_ANNOTATION],
                                           f"must match annotations[{TOPOLOGY_HINTS_ANNOTATION}] when both are "
                                           "specified"))
    kind = spec.get("type") or ""
    ports = _spec_ports(spec)
    headless = is_headless(spec)
    if not ports and not headless and kind != "ExternalName":
        causes.append(errors.field_required("spec.ports"))
    cluster_ips = as_list(spec.get("clusterIPs"))
    if kind == "LoadBalancer":
        for i, port in enumerate(ports):
            if port.get("port") == KUBELET_PORT:
                causes.append(errors.field_invalid(f"spec.ports[{i}]", port.get("port"),
                                                   f"may not expose port {KUBELET_PORT} externally since it is used "
                                                   "by kubelet"))
        if headless:
            causes.append(errors.field_invalid("spec.clusterIPs[0]", cluster_ips[0],
                                               "may not be set to 'None' for LoadBalancer services"))
    elif kind == "NodePort":
        if headless:
            causes.append(errors.field_invalid("spec.clusterIPs[0]", cluster_ips[0],
                                               "may not be set to 'None' for NodePort services"))
    elif kind == "ExternalName":
        if cluster_ips:
            causes.append(errors.field_forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
        if spec.get("ipFamilies"):
            causes.append(errors.field_forbidden("spec.ipFamilies", "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            causes.append(errors.field_forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
        cname = str(spec.get("externalName") or "")
        cname = cname[:-1] if cname.endswith(".") else cname
        if cname:
            causes.extend(errors.field_invalid("spec.externalName", cname, m)
                          for m in validation.is_dns1123_subdomain(cname))
        else:
            causes.append(errors.field_required("spec.externalName"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        causes.extend(_validate_service_port(port, len(ports) > 1, names, f"spec.ports[{i}]"))
    if spec.get("selector") is not None:
        causes.extend(validation.validate_labels(spec["selector"], "spec.selector"))
    affinity = spec.get("sessionAffinity") or ""
    if not affinity:
        causes.append(errors.field_required("spec.sessionAffinity"))
    elif affinity not in AFFINITIES:
        causes.append(errors.field_not_supported("spec.sessionAffinity", affinity, AFFINITIES))
    if affinity == "ClientIP":
        causes.extend(_validate_client_ip_affinity(spec.get("sessionAffinityConfig")))
    elif affinity == "None" and spec.get("sessionAffinityConfig") is not None:
        causes.append(errors.field_forbidden("spec.sessionAffinityConfig",
                                             "must not be set when session affinity is None"))
    causes.extend(validate_cluster_ips_related_fields(spec))
    for i, ip in enumerate(spec.get("externalIPs") or ()):
        problems = validation.is_valid_ip(f"spec.externalIPs[{i}]", ip)
        causes.extend(problems or validate_non_special_ip(ip, f"spec.externalIPs[{i}]"))
    if not kind:
        causes.append(errors.field_required("spec.type"))
    elif kind not in TYPES:
        causes.append(errors.field_not_supported("spec.type", kind, TYPES))
    if kind == "ClusterIP":
        for i, port in enumerate(ports):
            if port.get("nodePort"):
                causes.append(errors.field_forbidden(f"spec.ports[{i}].nodePort",
                                                     "may not be used when `type` is 'ClusterIP'"))
    node_ports: set = set()
    for i, port in enumerate(ports):
        if not port.get("nodePort"):
            continue
        key = (port.get("protocol"), port.get("nodePort"))
        if key in node_ports:
            causes.append(errors.field_duplicate(f"spec.ports[{i}].nodePort", port.get("nodePort")))
        node_ports.add(key)
    seen: set = set()
    for i, port in enumerate(ports):
        key = (port.get("protocol"), port.get("port"))
        if key in seen:
            causes.append(errors.field_duplicate(f"spec.ports[{i}]", _go_service_port(port)))
        seen.add(key)
    causes.extend(_validate_source_ranges(spec, annotations))
    if spec.get("allocateLoadBalancerNodePorts") is not None and kind != "LoadBalancer":
        causes.append(errors.field_forbidden("spec.allocateLoadBalancerNodePorts",
                                             "may only be used when `type` is 'LoadBalancer'"))
    if kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
        causes.append(errors.field_required("allocateLoadBalancerNodePorts"))  # sic: upstream's path
    causes.extend(_validate_load_balancer_class(spec, None))
    causes.extend(_validate_external_traffic_policy(spec))
    internal = spec.get("internalTrafficPolicy")
    if internal is None:
        if kind in ("NodePort", "LoadBalancer", "ClusterIP"):
            causes.append(errors.field_required("spec.internalTrafficPolicy"))
    elif internal not in TRAFFIC_POLICIES:
        causes.append(errors.field_not_supported("spec.internalTrafficPolicy", internal, TRAFFIC_POLICIES))
    distribution = spec.get("trafficDistribution")
    if distribution is not None and distribution != "PreferClose":
        causes.append(errors.field_not_supported("spec.trafficDistribution", distribution, ["PreferClose"]))
    return causes


def _validate_client_ip_affinity(config: Any) -> list[errors.Cause]:
    detail = "when session affinity type is ClientIP"
    if not isinstance(config, dict):
        return [errors.field_required("spec.sessionAffinityConfig", detail)]
    client = config.get("clientIP")
    if not isinstance(client, dict):
        return [errors.field_required("spec.sessionAffinityConfig.clientIP", detail)]
    timeout = client.get("timeoutSeconds")
    if timeout is None:
        return [errors.field_required("spec.sessionAffinityConfig.clientIP.timeoutSeconds", detail)]
    if not isinstance(timeout, int) or timeout <= 0 or timeout > MAX_AFFINITY_SECONDS:
        return [errors.field_invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                                     f"must be greater than 0 and less than {MAX_AFFINITY_SECONDS}")]
    return []


def _validate_source_ranges(spec: dict, annotations: dict) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    ranges = spec.get("loadBalancerSourceRanges") or []
    kind = spec.get("type")
    if ranges:
        path = "spec.LoadBalancerSourceRanges"  # sic: upstream's path
        if kind != "LoadBalancer":
            causes.append(errors.field_forbidden(path, "may only be used when `type` is 'LoadBalancer'"))
        for i, value in enumerate(ranges):
            causes.extend(validation.is_valid_cidr(f"{path}[{i}]", str(value).strip()))
    elif LOAD_BALANCER_SOURCE_RANGES_ANNOTATION in annotations:
        path = f"metadata.annotations[{LOAD_BALANCER_SOURCE_RANGES_ANNOTATION}]"
        if kind != "LoadBalancer":
            causes.append(errors.field_forbidden(path, "may only be used when `type` is 'LoadBalancer'"))
        value = str(annotations[LOAD_BALANCER_SOURCE_RANGES_ANNOTATION]).strip()
        if value:
            for cidr in value.split(","):
                causes.extend(validation.is_valid_cidr(path, cidr.strip()))
    return causes


def _validate_load_balancer_class(spec: dict, old_spec: Optional[dict]) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    klass = spec.get("loadBalancerClass")
    if old_spec is not None and old_spec.get("type") == "LoadBalancer" and spec.get("type") == "LoadBalancer" \
            and old_spec.get("loadBalancerClass") != klass:
        causes.append(errors.field_invalid("spec.loadBalancerClass", klass, "may not change once set"))
    if spec.get("type") == "LoadBalancer":
        if klass is not None:
            causes.extend(errors.field_invalid("spec.loadBalancerClass", klass, m)
                          for m in validation.is_qualified_name(str(klass)))
    elif klass is not None:
        causes.append(errors.field_forbidden("spec.loadBalancerClass",
                                             "may only be used when `type` is 'LoadBalancer'"))
    return causes


def _validate_external_traffic_policy(spec: dict) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    policy = spec.get("externalTrafficPolicy") or ""
    if not externally_accessible(spec):
        if policy:
            causes.append(errors.field_invalid("spec.externalTrafficPolicy", policy,
                                               "may only be set for externally-accessible services"))
    elif not policy:
        causes.append(errors.field_required("spec.externalTrafficPolicy"))
    elif policy not in TRAFFIC_POLICIES:
        causes.append(errors.field_not_supported("spec.externalTrafficPolicy", policy, TRAFFIC_POLICIES))
    health = spec.get("healthCheckNodePort") or 0
    if not needs_health_check_node_port(spec):
        if health:
            causes.append(errors.field_invalid("spec.healthCheckNodePort", health, "may only be set when `type` is "
                                               "'LoadBalancer' and `externalTrafficPolicy` is 'Local'"))
    elif not health:
        causes.append(errors.field_required("spec.healthCheckNodePort"))
    else:
        causes.extend(ports.validate_port_number(health, "spec.healthCheckNodePort"))
    return causes


def validate_service_update(svc: dict, old: dict) -> list[errors.Cause]:
    """upstream's ValidateServiceUpdate, less the metadata and the ValidateService it ends with."""
    spec, old_spec = _spec(svc), _spec(old)
    causes: list[errors.Cause] = []
    if spec.get("type") != "ExternalName" and old_spec.get("type") != "ExternalName":
        causes += _upgrade_downgrade_cluster_ips(spec, old_spec)
        causes += _upgrade_downgrade_families(spec, old_spec)
    causes += [c for c in _validate_load_balancer_class(spec, old_spec) if "may not change once set" in c.message]
    if needs_health_check_node_port(old_spec) and needs_health_check_node_port(spec) and \
            spec.get("healthCheckNodePort") != old_spec.get("healthCheckNodePort"):
        causes.append(errors.field_forbidden("spec.healthCheckNodePort", "field is immutable"))
    return causes


def _upgrade_downgrade_cluster_ips(spec: dict, old_spec: dict) -> list[errors.Cause]:
    if is_headless(spec) and is_headless(old_spec):
        return []
    ips, old_ips = list(spec.get("clusterIPs") or []), list(old_spec.get("clusterIPs") or [])
    rendered = gorepr.string_slice(spec.get("clusterIPs"))
    causes = []
    if len(ips) == len(old_ips):
        for i, value in enumerate(old_ips):
            if value != ips[i]:
                causes.append(errors.field_invalid(f"spec.clusterIPs[{i}]", rendered, "may not change once set"))
    elif len(old_ips) > len(ips):
        if not ips:
            causes.append(errors.field_invalid("spec.clusterIPs[0]", rendered, "primary clusterIP can not be unset"))
        if old_ips and ips and ips[0] != old_ips[0]:
            causes.append(errors.field_invalid("spec.clusterIPs[0]", rendered, "may not change once set"))
        if len(ips) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            causes.append(errors.field_invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                               "must be set to 'SingleStack' when releasing the secondary clusterIP"))
    elif old_ips and ips[0] != old_ips[0]:
        causes.append(errors.field_invalid("spec.clusterIPs[0]", rendered, "may not change once set"))
    return causes


def _upgrade_downgrade_families(spec: dict, old_spec: dict) -> list[errors.Cause]:
    if is_headless(spec) != is_headless(old_spec) or is_headless(spec):
        return []
    families, old_families = list(spec.get("ipFamilies") or []), list(old_spec.get("ipFamilies") or [])
    rendered = gorepr.string_slice(spec.get("ipFamilies"), "core.IPFamily")
    ips_rendered = gorepr.string_slice(spec.get("clusterIPs"))
    causes = []
    if len(families) == len(old_families):
        for i, family in enumerate(old_families):
            if family != families[i]:
                causes.append(errors.field_invalid("spec.ipFamilies[0]", rendered, "may not change once set"))
    elif len(old_families) > len(families):
        if not spec.get("clusterIPs"):
            causes.append(errors.field_invalid("spec.ipFamilies[0]", rendered, "primary ipFamily can not be unset"))
        if families and families[0] != old_families[0]:
            causes.append(errors.field_invalid("spec.ipFamilies[0]", ips_rendered, "may not change once set"))
        if len(families) == 1 and spec.get("ipFamilyPolicy") != "SingleStack":
            causes.append(errors.field_invalid("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"),
                                               "must be set to 'SingleStack' when releasing the secondary ipFamily"))
    elif old_families and families and families[0] != old_families[0]:
        causes.append(errors.field_invalid("spec.ipFamilies[0]", ips_rendered, "may not change once set"))
    return causes


def validate_load_balancer_status(status: Any, path: str, spec: dict) -> list[errors.Cause]:
    """upstream's ValidateLoadBalancerStatus (LoadBalancerIPMode is on in 1.32)."""
    ingress = (status or {}).get("ingress") if isinstance(status, dict) else None
    ingress = ingress if isinstance(ingress, list) else []
    if spec.get("type") != "LoadBalancer" and ingress:
        return [errors.field_forbidden(f"{path}.ingress", "may only be used when `spec.type` is 'LoadBalancer'")]
    causes: list[errors.Cause] = []
    for i, entry in enumerate(ingress):
        entry = entry if isinstance(entry, dict) else {}
        at = f"{path}.ingress[{i}]"
        ip, mode, host = entry.get("ip") or "", entry.get("ipMode"), entry.get("hostname") or ""
        if ip:
            causes.extend(validation.is_valid_ip(f"{at}.ip", ip))
        if mode is None:
            if ip:
                causes.append(errors.field_required(f"{at}.ipMode", "must be specified when `ip` is set"))
        elif not ip:
            causes.append(errors.field_forbidden(f"{at}.ipMode", "may not be specified when `ip` is not set"))
        elif mode not in IP_MODES:
            causes.append(errors.field_not_supported(f"{at}.ipMode", mode, IP_MODES))
        if host:
            causes.extend(errors.field_invalid(f"{at}.hostname", host, m)
                          for m in validation.is_dns1123_subdomain(host))
            if validation.parse_ip_sloppy(host) is not None:
                causes.append(errors.field_invalid(f"{at}.hostname", host, "must be a DNS name, not an IP address"))
    return causes


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
        extra_subresources=(node_connections.service_proxy(),),
        selectable_fields={"spec.clusterIP": columns.text_at("spec", "clusterIP"),
                           "spec.type": columns.text_at("spec", "type")},
        field_labels=FieldLabelConversion(("metadata.namespace", "metadata.name", "spec.clusterIP", "spec.type")),
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
