"""What an object costs against a ResourceQuota (upstream's quota evaluators, ``pkg/quota/v1``).

One evaluator per group-resource: Pods (object count, compute requests and
limits, scopes), Services (node ports, load balancers), PersistentVolumeClaims
(storage, per storage class), and the object count evaluator every other
namespaced resource gets (``count/<resource>.<group>``, and the legacy names
``configmaps``, ``secrets``, ``replicationcontrollers``, ``resourcequotas``).
The admission plugin and the quota controller share them, so admission
charges exactly what the controller later counts.
"""
from __future__ import annotations

import calendar
import time
from typing import Any, Callable, Iterable, Optional

from kapiserver.apis.core.pods import qos_class
from kapiserver.quota import resources as rl
from kapiserver.quota.resources import ResourceList
from kapiserver.registry.admission import CREATE, UPDATE

# resources quota never counts (upstream's DefaultIgnoredResources)
IGNORED = frozenset({
    ("", "bindings"), ("", "componentstatuses"), ("", "events"), ("events.k8s.io", "events"),
    ("authentication.k8s.io", "tokenreviews"), ("authentication.k8s.io", "selfsubjectreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"), ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"), ("authorization.k8s.io", "selfsubjectrulesreviews"),
})
STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io/"
_NATIVE_DOMAIN = "kubernetes.io/"


def count_name(group: str, resource: str) -> str:
    """``count/pods``, ``count/deployments.apps``."""
    return f"count/{resource}.{group}" if group else f"count/{resource}"


def parse_count_name(name: str) -> Optional[tuple[str, str]]:
    """(group, resource) of a ``count/...`` name, None for any other name."""
    if not name.startswith("count/") or len(name) == len("count/"):
        return None
    resource, _, group = name[len("count/"):].partition(".")
    return group, resource


def scope_selectors(quota: dict) -> list[dict]:
    """``spec.scopes`` (as Exists requirements) and ``spec.scopeSelector.matchExpressions``."""
    spec = quota.get("spec") or {}
    out = [{"scopeName": s, "operator": "Exists"} for s in spec.get("scopes") or [] if isinstance(s, str)]
    selector = spec.get("scopeSelector") or {}
    out += [e for e in (selector.get("matchExpressions") or []) if isinstance(e, dict)]
    return out


def scope_text(selector: dict) -> str:
    """A scope requirement as Go's %v prints the struct: ``{PriorityClass In [high]}``."""
    values = " ".join(str(v) for v in selector.get("values") or [])
    return f"{{{selector.get('scopeName', '')} {selector.get('operator', '')} [{values}]}}"


class Evaluator:
    """Upstream's quota.Evaluator for one group-resource; this base counts objects."""

    def __init__(self, group: str, resource: str, alias: str = "") -> None:
        self.group = group
        self.resource = resource
        self.names = [count_name(group, resource)] + ([alias] if alias else [])

    def handles(self, operation: str, subresource: str) -> bool:
        return operation == CREATE and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in self.names]

    def matches_scope(self, selector: dict, obj: dict) -> bool:
        return False

    def matching_scopes(self, obj: dict, selectors: list[dict]) -> list[dict]:
        return [s for s in selectors if self.matches_scope(s, obj)]

    def uncovered_scopes(self, limited: list[dict], matched: list[dict]) -> list[dict]:
        return []

    def constraints(self, required: list[str], obj: dict) -> Optional[str]:
        return None

    def usage(self, obj: dict) -> ResourceList:
        return {name: rl.quantity(1) for name in self.names}

    def matches(self, quota: dict, obj: dict) -> bool:
        """upstream's generic.Matches: the quota tracks one of our resources and every scope matches."""
        hard = ((quota.get("status") or {}).get("hard") or {})
        if not self.matching_resources(hard):
            return False
        return all(self.matches_scope(s, obj) for s in scope_selectors(quota))

    def usage_stats(self, objects: Iterable[dict], quota: dict, names: list[str]) -> ResourceList:
        """upstream's CalculateUsageStats: zero for every tracked name, plus the usage of each
        object that matches the quota's scopes."""
        used: ResourceList = {name: rl.ZERO for name in names}
        selectors = scope_selectors(quota)
        for obj in objects:
            if all(self.matches_scope(s, obj) for s in selectors):
                used = rl.add(used, self.usage(obj))
        return used


# ---------------------------------------------------------------- pods

_POD_RESOURCES = ("count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                  "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods")
_POD_PREFIXES = ("hugepages-", "requests.hugepages-")
_CONSTRAINED = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})


def _is_native(name: str) -> bool:
    return "/" not in name or name.startswith(_NATIVE_DOMAIN)


def _is_extended(name: str) -> bool:
    """upstream's IsExtendedResourceName: outside kubernetes.io/, not requests.-prefixed, a qualified name."""
    return not _is_native(name) and not name.startswith("requests.")


def _container_usage(requests: ResourceList, limits: ResourceList) -> ResourceList:
    """upstream's podComputeUsageHelper."""
    result: ResourceList = {"pods": rl.quantity(1)}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            result[name] = requests[name]
            result[f"requests.{name}"] = requests[name]
        if name in limits:
            result[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            result[name] = value
            result[f"requests.{name}"] = value
        if _is_extended(name):
            result[f"requests.{name}"] = value
    return result


def _resources(container: dict, which: str) -> ResourceList:
    return rl.parse_list(((container.get("resources") or {}).get(which)))


def _aggregate(spec: dict, which: str) -> ResourceList:
    """upstream's AggregateContainerRequests/Limits: containers and sidecars add up, plain init
    containers count by their largest (with the sidecars started before them)."""
    total: ResourceList = {}
    for c in spec.get("containers") or []:
        if isinstance(c, dict):
            total = rl.add(total, _resources(c, which))
    sidecars: ResourceList = {}
    init: ResourceList = {}
    for c in spec.get("initContainers") or []:
        if not isinstance(c, dict):
            continue
        own = _resources(c, which)
        if c.get("restartPolicy") == "Always":
            total = rl.add(total, own)
            sidecars = rl.add(sidecars, own)
            own = sidecars
        else:
            own = rl.add(own, sidecars)
        init = rl.maximum(init, own)
    return rl.maximum(total, init)


def pod_requests(pod: dict) -> ResourceList:
    spec = pod.get("spec") or {}
    return rl.add(_aggregate(spec, "requests"), rl.parse_list(spec.get("overhead")))


def pod_limits(pod: dict) -> ResourceList:
    spec = pod.get("spec") or {}
    limits = _aggregate(spec, "limits")
    for name, value in rl.parse_list(spec.get("overhead")).items():
        if name in limits and not limits[name].is_zero():
            limits[name] = rl.add({name: limits[name]}, {name: value})[name]
    return limits


def _rfc3339_seconds(text: Any) -> Optional[float]:
    try:
        return float(calendar.timegm(time.strptime(str(text)[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def pod_counts_compute(pod: dict, now: Optional[float] = None) -> bool:
    """upstream's QuotaV1Pod: finished pods, and pods past their deletion grace, use no compute."""
    if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
        return False
    md = pod.get("metadata") or {}
    grace = md.get("deletionGracePeriodSeconds")
    if md.get("deletionTimestamp") and isinstance(grace, int):
        deleted = _rfc3339_seconds(md["deletionTimestamp"])
        if deleted is not None and (time.time() if now is None else now) > deleted + grace:
            return False
    return True


def _cross_namespace_affinity(pod: dict) -> bool:
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [(w or {}).get("podAffinityTerm") or {}
                     for w in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        for term in list(required) + preferred:
            if isinstance(term, dict) and (term.get("namespaces") or term.get("namespaceSelector") is not None):
                return True
    return False


class PodEvaluator(Evaluator):
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        super().__init__("", "pods")
        self.clock = clock

    def handles(self, operation: str, subresource: str) -> bool:
        return operation == CREATE and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in _POD_RESOURCES or n.startswith(_POD_PREFIXES)
                or (not _is_native(n) and n.startswith("requests."))]

    def matches_scope(self, selector: dict, obj: dict) -> bool:
        spec = obj.get("spec") or {}
        scope = selector.get("scopeName")
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and deadline >= 0
        if scope == "Terminating":
            return terminating
        if scope == "NotTerminating":
            return not terminating
        if scope == "BestEffort":
            return qos_class(spec) == "BestEffort"
        if scope == "NotBestEffort":
            return qos_class(spec) != "BestEffort"
        if scope == "PriorityClass":
            name = spec.get("priorityClassName") or ""
            op, values = selector.get("operator"), selector.get("values") or []
            if op == "Exists":
                return bool(name)
            if op == "DoesNotExist":
                return not name
            if op == "In":
                return bool(name) and name in values
            if op == "NotIn":
                return not name or name not in values
            return False
        if scope == "CrossNamespacePodAffinity":
            return _cross_namespace_affinity(obj)
        return False

    def uncovered_scopes(self, limited: list[dict], matched: list[dict]) -> list[dict]:
        names = {m.get("scopeName") for m in matched}
        return [s for s in limited if s.get("scopeName") not in names]

    def constraints(self, required: list[str], obj: dict) -> Optional[str]:
        """The "must specify" rule: a quota tracking cpu/memory requests or limits needs them on
        every container (upstream's podEvaluator.Constraints)."""
        wanted = set(required) & _CONSTRAINED
        if not wanted:
            return None
        spec = obj.get("spec") or {}
        missing: dict[str, set[str]] = {}
        for key in ("containers", "initContainers"):
            for c in spec.get(key) or []:
                if not isinstance(c, dict):
                    continue
                has = set(_container_usage(_resources(c, "requests"), _resources(c, "limits")))
                for name in wanted - has:
                    missing.setdefault(name, set()).add(str(c.get("name") or ""))
        if not missing:
            return None
        return "must specify " + "; ".join(f"{name} for: {','.join(sorted(missing[name]))}"
                                           for name in sorted(missing))

    def usage(self, obj: dict) -> ResourceList:
        result: ResourceList = {"count/pods": rl.quantity(1)}
        if not pod_counts_compute(obj, self.clock()):
            return result
        return rl.add(result, _container_usage(pod_requests(obj), pod_limits(obj)))


# ---------------------------------------------------------------- services

_SERVICE_RESOURCES = ("count/services", "services", "services.nodeports", "services.loadbalancers")


class ServiceEvaluator(Evaluator):
    def __init__(self) -> None:
        super().__init__("", "services")

    def handles(self, operation: str, subresource: str) -> bool:
        return operation in (CREATE, UPDATE) and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in _SERVICE_RESOURCES]

    def usage(self, obj: dict) -> ResourceList:
        spec = obj.get("spec") or {}
        ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
        node_ports = load_balancers = 0
        if spec.get("type") == "NodePort":
            node_ports = len(ports)
        elif spec.get("type") == "LoadBalancer":
            load_balancers = 1
            if spec.get("allocateLoadBalancerNodePorts") is False:
                node_ports = sum(1 for p in ports if p.get("nodePort"))
            else:
                node_ports = len(ports)
        return {"count/services": rl.quantity(1), "services": rl.quantity(1),
                "services.loadbalancers": rl.quantity(load_balancers), "services.nodeports": rl.quantity(node_ports)}


# ---------------------------------------------------------------- persistent volume claims

_PVC_RESOURCES = ("persistentvolumeclaims", "requests.storage")


def claim_class(pvc: dict) -> str:
    """upstream's GetPersistentVolumeClaimClass: the beta annotation, then spec.storageClassName."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    if "volume.beta.kubernetes.io/storage-class" in annotations:
        return str(annotations["volume.beta.kubernetes.io/storage-class"])
    return str((pvc.get("spec") or {}).get("storageClassName") or "")


class PersistentVolumeClaimEvaluator(Evaluator):
    def __init__(self) -> None:
        super().__init__("", "persistentvolumeclaims")

    def handles(self, operation: str, subresource: str) -> bool:
        return operation in (CREATE, UPDATE) and not subresource

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        out = []
        for n in names:
            if n == "count/persistentvolumeclaims" or n in _PVC_RESOURCES or \
                    any(n.endswith(STORAGE_CLASS_SUFFIX + r) for r in _PVC_RESOURCES):
                out.append(n)
        return out

    def usage(self, obj: dict) -> ResourceList:
        result: ResourceList = {"persistentvolumeclaims": rl.quantity(1),
                                "count/persistentvolumeclaims": rl.quantity(1)}
        klass = claim_class(obj)
        if klass:
            result[klass + STORAGE_CLASS_SUFFIX + "persistentvolumeclaims"] = rl.quantity(1)
        requested = rl.parse_list((((obj.get("spec") or {}).get("resources") or {}).get("requests"))).get("storage")
        if requested is not None:
            result["requests.storage"] = requested
            if klass:
                result[klass + STORAGE_CLASS_SUFFIX + "requests.storage"] = requested
        return result


# ---------------------------------------------------------------- the registry

_LEGACY_ALIASES = {"configmaps": "configmaps", "resourcequotas": "resourcequotas",
                   "replicationcontrollers": "replicationcontrollers", "secrets": "secrets"}


class Registry:
    """The evaluators by (group, resource): the built-in ones, and object counters made on demand."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._evaluators: dict[tuple[str, str], Evaluator] = {}
        for evaluator in (PodEvaluator(clock), ServiceEvaluator(), PersistentVolumeClaimEvaluator()):
            self._evaluators[(evaluator.group, evaluator.resource)] = evaluator
        for resource, alias in _LEGACY_ALIASES.items():
            self._evaluators[("", resource)] = Evaluator("", resource, alias)

    def get(self, group: str, resource: str) -> Optional[Evaluator]:
        """The evaluator of a group-resource; an object counter for any resource quota does not ignore."""
        if (group, resource) in IGNORED:
            return None
        found = self._evaluators.get((group, resource))
        if found is None:
            found = self._evaluators[(group, resource)] = Evaluator(group, resource)
        return found

    def for_names(self, names: Iterable[str]) -> list[Evaluator]:
        """The evaluators that track any of ``names`` (``count/...`` names get object counters)."""
        names = list(names)
        for name in names:
            parsed = parse_count_name(name)
            if parsed is not None and parsed not in IGNORED:
                self.get(*parsed)
        return [e for e in self._evaluators.values() if e.matching_resources(names)]
