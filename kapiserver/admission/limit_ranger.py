"""LimitRanger (upstream's admission plugin of that name): the namespace's LimitRanges applied.

Mutating, on Pod creation: every container and init container gets the
``default`` limits and ``defaultRequest`` requests of the LimitRanges' ``Container``
items it does not set, and the pod is annotated with what was set
(``kubernetes.io/limit-ranger: LimitRanger plugin set: cpu request for container
web; ...``). Validating, on Pod creation and PersistentVolumeClaim creation and
update: ``min``, ``max`` and ``maxLimitRequestRatio`` of the ``Container``, ``Pod``
(sums as the scheduler counts them) and ``PersistentVolumeClaim`` (storage
requests) items, refused with upstream's 403 and messages. Pod updates are not
checked (containers cannot change; upstream skips them too), nor are objects
being deleted or subresources.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.lister import Lister, ListingPlugin
from kapiserver.machinery.quantity import Quantity
from kapiserver.quota import resources as rl
from kapiserver.quota.evaluators import pod_limits, pod_requests
from kapiserver.registry.admission import CREATE, UPDATE, Attributes

ANNOTATION = "kubernetes.io/limit-ranger"
# upstream's resource.MaxMilliValue: beyond it values are compared in units, not milli-units
_MAX_MILLI = (2 ** 63 - 1) // 1000
_KINDS = {("", "pods"), ("", "persistentvolumeclaims")}


def _comparable(*quantities: Optional[Quantity]) -> list[int]:
    """The values at one precision (milli when none overflows), as upstream compares them."""
    units = [q.int_value() if q is not None else 0 for q in quantities]
    if all(u <= _MAX_MILLI for u in units):
        return [q.milli_value() if q is not None else 0 for q in quantities]
    return units


def _min(kind: str, name: str, enforced: Quantity, requests: rl.ResourceList, limits: rl.ResourceList
         ) -> Optional[str]:
    req, lim = requests.get(name), limits.get(name)
    req_v, lim_v, enf_v = _comparable(req, lim, enforced)
    if req is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    if req_v < enf_v:
        return f"minimum {name} usage per {kind} is {enforced}, but request is {req}"
    if lim is not None and lim_v < enf_v:
        return f"minimum {name} usage per {kind} is {enforced}, but limit is {lim}"
    return None


def _max(kind: str, name: str, enforced: Quantity, requests: rl.ResourceList, limits: rl.ResourceList
         ) -> Optional[str]:
    req, lim = requests.get(name), limits.get(name)
    req_v, lim_v, enf_v = _comparable(req, lim, enforced)
    if lim is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    if lim_v > enf_v:
        return f"maximum {name} usage per {kind} is {enforced}, but limit is {lim}"
    if req is not None and req_v > enf_v:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return None


def _max_request(kind: str, name: str, enforced: Quantity, requests: rl.ResourceList) -> Optional[str]:
    """The max of a kind whose limits mean nothing (claims: their storage request)."""
    req = requests.get(name)
    req_v, _, enf_v = _comparable(req, None, enforced)
    if req is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No request is specified"
    if req_v > enf_v:
        return f"maximum {name} usage per {kind} is {enforced}, but request is {req}"
    return None


def _ratio(kind: str, name: str, enforced: Quantity, requests: rl.ResourceList, limits: rl.ResourceList
           ) -> Optional[str]:
    req, lim = requests.get(name), limits.get(name)
    req_v, lim_v, _ = _comparable(req, lim, enforced)
    if req is None or req_v == 0:
        return (f"{name} max limit to request ratio per {kind} is {enforced}, but no request is specified or "
                f"request is 0")
    if lim is None or lim_v == 0:
        return (f"{name} max limit to request ratio per {kind} is {enforced}, but no limit is specified or "
                f"limit is 0")
    observed = lim_v / req_v
    allowed = enforced.int_value()
    shown = observed
    if allowed <= _MAX_MILLI:
        observed, allowed = observed * 1000, enforced.milli_value()
    if observed > allowed:
        return f"{name} max limit to request ratio per {kind} is {enforced}, but provided ratio is {shown:f}"
    return None


def _check_resources(kind: str, item: dict, requests: rl.ResourceList, limits: rl.ResourceList) -> list[str]:
    problems = []
    for key, check in (("min", _min), ("max", _max), ("maxLimitRequestRatio", _ratio)):
        for name, enforced in sorted(rl.parse_list(item.get(key)).items()):
            problem = check(kind, name, enforced, requests, limits)
            if problem:
                problems.append(problem)
    return problems


def _containers(pod: dict) -> list[tuple[str, dict]]:
    spec = pod.get("spec") or {}
    return ([("container", c) for c in spec.get("containers") or [] if isinstance(c, dict)]
            + [("init container", c) for c in spec.get("initContainers") or [] if isinstance(c, dict)])


def _items(limit_range: dict, kind: str) -> list[dict]:
    return [item for item in (limit_range.get("spec") or {}).get("limits") or []
            if isinstance(item, dict) and item.get("type") == kind]


def apply_defaults(limit_range: dict, pod: dict) -> None:
    """Upstream's PodMutateLimitFunc: the Container items' defaults where a container sets none."""
    default_limits: dict = {}
    default_requests: dict = {}
    for item in _items(limit_range, "Container"):
        default_limits.update(item.get("default") or {})
        default_requests.update(item.get("defaultRequest") or {})
    notes = []
    for label, container in _containers(pod):
        resources = container.get("resources")
        if not isinstance(resources, dict):
            resources = container["resources"] = {}
        for which, defaults, word in (("requests", default_requests, "request"),
                                      ("limits", default_limits, "limit")):
            current = resources.get(which)
            if not isinstance(current, dict):
                current = resources[which] = {}
            added = sorted(name for name in defaults if name not in current)
            for name in added:
                current[name] = defaults[name]
            if added:
                notes.append(f"{', '.join(added)} {word} for {label} {container.get('name', '')}")
            if not current:
                del resources[which]
    if notes:
        md = pod.setdefault("metadata", {})
        if not isinstance(md.get("annotations"), dict):
            md["annotations"] = {}
        md["annotations"][ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def pod_problems(limit_range: dict, pod: dict) -> list[str]:
    """Upstream's PodValidateLimitFunc."""
    problems = []
    for item in _items(limit_range, "Container"):
        for _, container in _containers(pod):
            resources = container.get("resources") or {}
            problems += _check_resources("Container", item, rl.parse_list(resources.get("requests")),
                                         rl.parse_list(resources.get("limits")))
    for item in _items(limit_range, "Pod"):
        problems += _check_resources("Pod", item, pod_requests(pod), pod_limits(pod))
    return problems


def claim_problems(limit_range: dict, claim: dict) -> list[str]:
    """Upstream's PersistentVolumeClaimValidateLimitFunc: only the storage requests count."""
    requests = rl.parse_list(((claim.get("spec") or {}).get("resources") or {}).get("requests"))
    problems = []
    for item in _items(limit_range, "PersistentVolumeClaim"):
        for name, enforced in sorted(rl.parse_list(item.get("min")).items()):
            problem = _min("PersistentVolumeClaim", name, enforced, requests, {})
            if problem:
                problems.append(problem)
        for name, enforced in sorted(rl.parse_list(item.get("max")).items()):
            problem = _max_request("PersistentVolumeClaim", name, enforced, requests)
            if problem:
                problems.append(problem)
    return problems


def _aggregate(problems: list[str]) -> str:
    """Go's utilerrors.NewAggregate wording: one error as it is, several in brackets."""
    return problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"


class LimitRanger(ListingPlugin):
    name = "LimitRanger"
    mutating = True
    validating = True
    operations = (CREATE, UPDATE)
    resources = frozenset(_KINDS)

    def __init__(self, limit_ranges: Lister) -> None:
        self.limit_ranges = limit_ranges
        self.listers = (limit_ranges,)

    def _applies(self, attrs: Attributes) -> bool:
        kind = (attrs.rtype.group, attrs.rtype.plural)
        if kind not in _KINDS or attrs.subresource or not isinstance(attrs.obj, dict):
            return False
        if kind == ("", "pods") and attrs.operation != CREATE:
            return False
        old = attrs.old_obj
        return not (isinstance(old, dict) and (old.get("metadata") or {}).get("deletionTimestamp"))

    async def _ranges(self, namespace: str) -> list[dict]:
        return [lr for lr in await self.limit_ranges.list()
                if (lr.get("metadata") or {}).get("namespace") == namespace]

    async def admit(self, attrs: Attributes) -> None:
        if not self._applies(attrs) or attrs.rtype.plural != "pods":
            return
        assert attrs.obj is not None
        for limit_range in await self._ranges(attrs.namespace):
            apply_defaults(limit_range, attrs.obj)

    async def validate(self, attrs: Attributes) -> None:
        if not self._applies(attrs):
            return
        assert attrs.obj is not None
        check = pod_problems if attrs.rtype.plural == "pods" else claim_problems
        for limit_range in await self._ranges(attrs.namespace):
            problems = check(limit_range, attrs.obj)
            if problems:
                raise admission_forbidden(attrs, _aggregate(problems))


def limit_ranger(config: Optional[bytes], deps: Any) -> LimitRanger:
    return LimitRanger(Lister(lambda: deps.store("", "v1", "limitranges"), deps.reactor))
