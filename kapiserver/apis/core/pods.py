"""Pods (core/v1): pod-spec defaults and checks, the spec's update rules, and
the printer columns kubectl shows.

Nothing runs a pod here (the envtest contract): a new pod's status is what
upstream's strategy gives it, ``phase: Pending`` and its QoS class, and stays so
until a client writes ``/status``.  What upstream's default admission plugins
add on create is added too: ``serviceAccountName: default`` (ServiceAccount),
``priority: 0`` (Priority) and the two 300 s NoExecute tolerations
(DefaultTolerationSeconds); the projected service-account token volume is not.
"""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.apis import columns
from kapiserver.apis.core import bindings, ephemeral_containers, evictions, node_connections, podspec
from kapiserver.machinery import errors, quantity
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.strategy import Strategy

SCHEMA = "io.k8s.api.core.v1.Pod"
SPEC = "io.k8s.api.core.v1.PodSpec"
STATUS = "io.k8s.api.core.v1.PodStatus"
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
UPDATE_FORBIDDEN = ("pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)")
_QOS_RESOURCES = ("cpu", "memory")


def qos_class(spec: dict) -> str:
    """upstream's GetPodQOS over init and regular containers (cpu and memory only)."""
    requested = limited = False
    guaranteed = True
    for key, _, c in podspec.all_containers(spec):
        if key == "ephemeralContainers":
            continue
        res = c.get("resources") or {}
        req = {k: v for k, v in (res.get("requests") or {}).items() if k in _QOS_RESOURCES}
        lim = {k: v for k, v in (res.get("limits") or {}).items() if k in _QOS_RESOURCES}
        requested |= bool(req)
        limited |= bool(lim)
        if set(lim) != set(_QOS_RESOURCES) or any(
                quantity.parse(req.get(k, lim[k])) != quantity.parse(lim[k]) for k in lim):
            guaranteed = False
    if not requested and not limited:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_requests_from_limits(spec: dict) -> None:
    """SetDefaults_Pod: a limit without a request makes the request equal to it."""
    for key, _, c in podspec.all_containers(spec):
        if key == "ephemeralContainers":
            continue
        res = c.get("resources")
        if isinstance(res, dict) and isinstance(res.get("limits"), dict) and res["limits"]:
            requests = res.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in res["limits"].items():
                    requests.setdefault(name, value)


class PodStrategy(Strategy):
    status_fixed_metadata = ("ownerReferences",)  # upstream's podStatusStrategy

    def prepare_for_status_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_status_update(rtype, new, old)
        status = new.get("status")
        old_qos = (old.get("status") or {}).get("qosClass")
        if isinstance(status, dict) and not status.get("qosClass") and old_qos:
            status["qosClass"] = old_qos

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        # what upstream's default admission plugins add
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = spec.get("serviceAccount") or "default"
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = spec.setdefault("tolerations", [])
        if isinstance(tolerations, list):
            present = {(t.get("key"), t.get("effect")) for t in tolerations if isinstance(t, dict)}
            tolerations.extend(copy.deepcopy(t) for t in DEFAULT_TOLERATIONS
                               if (t["key"], "NoExecute") not in present and (t["key"], None) not in present)

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        podspec.default_pod_spec(spec)
        _default_requests_from_limits(spec)
        spec.setdefault("enableServiceLinks", True)
        if spec.get("serviceAccountName"):
            spec["serviceAccount"] = spec["serviceAccountName"]  # the deprecated alias, as v1 conversion sets it
        if "status" not in obj:
            obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        causes = self._validate_spec(obj)
        if (obj.get("spec") or {}).get("ephemeralContainers"):
            causes.append(errors.field_forbidden("spec.ephemeralContainers", "cannot be set on create"))
        return causes

    @staticmethod
    def _validate_spec(obj: dict) -> list[errors.Cause]:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [errors.field_required("spec.containers")]
        return (podspec.validate_pod_spec(spec, "spec")
                + ephemeral_containers.validate_ephemeral_containers(spec, "spec"))

    def prepare_for_subresource_update(self, rtype: ResourceType, subresource: str, new: dict, old: dict) -> None:
        if subresource == ephemeral_containers.SUBRESOURCE:
            ephemeral_containers.keep_only_ephemeral_containers(new, old)
        elif subresource != bindings.SUBRESOURCE:  # a binding's change is made by the binding itself
            super().prepare_for_subresource_update(rtype, subresource, new, old)

    def validate_subresource_update(self, rtype: ResourceType, subresource: str, new: dict,
                                    old: dict) -> list[errors.Cause]:
        if subresource == ephemeral_containers.SUBRESOURCE:
            return ephemeral_containers.validate_update(new, old)
        if subresource == bindings.SUBRESOURCE:
            return []  # upstream's BindingREST writes the pod without pod validation
        return super().validate_subresource_update(rtype, subresource, new, old)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        causes = self._validate_spec(new)
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if not _only_mutable_changes(new_spec, old_spec):
            causes.append(errors.field_forbidden("spec", UPDATE_FORBIDDEN))
        deadline, old_deadline = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
        if old_deadline is not None and (deadline is None or (isinstance(deadline, int) and deadline > old_deadline)):
            causes.append(errors.field_invalid("spec.activeDeadlineSeconds", deadline,
                                               "must be less than or equal to previous value"))
        return causes

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        return new.get("spec") != old.get("spec")


def _only_mutable_changes(new: dict, old: dict) -> bool:
    """Whether ``new`` differs from ``old`` only where upstream's ValidatePodUpdate allows."""
    a, b = copy.deepcopy(new), copy.deepcopy(old)
    for spec in (a, b):
        for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates"):
            spec.pop(key, None)
        for key in ("containers", "initContainers"):
            for c in spec.get(key) or ():
                if isinstance(c, dict):
                    c.pop("image", None)
    if len(a.get("containers") or ()) != len(b.get("containers") or ()):
        return False
    old_tolerations = old.get("tolerations") or []
    new_tolerations = new.get("tolerations") or []
    if any(t not in new_tolerations for t in old_tolerations):
        return False
    if old.get("terminationGracePeriodSeconds", 0) < 0 and new.get("terminationGracePeriodSeconds") == 1:
        a["terminationGracePeriodSeconds"] = b.get("terminationGracePeriodSeconds")
    return a == b


# ------------------------------------------------------------------ printer

def _status_reason(pod: dict) -> tuple[str, int, int, int]:
    """(STATUS, ready containers, total containers, restarts) as upstream's pod printer computes them."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or ())
    ready = restarts = 0
    reason = status.get("reason") or status.get("phase") or ""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = spec.get("initContainers") or ()
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or ()):
        restarts += cs.get("restartCount") or 0
        state = cs.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            reason = "Init:" + (term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal")
                                                       else f"ExitCode:{term.get('exitCode', 0)}"))
        elif wait and wait.get("reason") and wait.get("reason") != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or ()):
            restarts += cs.get("restartCount") or 0
            state = cs.get("state") or {}
            wait, term = state.get("waiting"), state.get("terminated")
            if wait and wait.get("reason"):
                reason = wait["reason"]
            elif term and term.get("reason"):
                reason = term["reason"]
            elif term:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            elif "running" in state and cs.get("ready"):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason, ready, total, restarts


def _readiness_gates(pod: dict) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    true = {c.get("type") for c in (pod.get("status") or {}).get("conditions") or () if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _or_none(value: Any) -> str:
    return value if value else "<none>"


def resource_type() -> ResourceType:
    def get(*path: str):
        return lambda o: columns.get_path(o, *path, default="")
    return ResourceType(
        group="", version="v1", kind="Pod", plural="pods", singular="pod", namespaced=True,
        strategy=PodStrategy(), short_names=("po",), categories=("all",), has_status=True,
        schema_name=SCHEMA, return_deleted_object=True,
        extra_subresources=(bindings.binding_subresource(), ephemeral_containers.ephemeral_containers_subresource(),
                            evictions.eviction_subresource(), *node_connections.pod_subresources()),
        table_columns=(
            columns.name_column(),
            columns.column("Ready", lambda o: "{1}/{2}".format(*_status_reason(o)), desc=(
                "The aggregate readiness state of this pod for accepting traffic.")),
            columns.column("Status", lambda o: _status_reason(o)[0], desc=(
                "The aggregate status of the containers in this pod.")),
            columns.column("Restarts", lambda o: str(_status_reason(o)[3]), desc=(
                "The number of times the containers in this pod have been restarted and when the last "
                "container in this pod has restarted.")),
            columns.age_column(),
            columns.column("IP", lambda o: _or_none(columns.get_path(o, "status", "podIP")), STATUS, "podIP",
                           priority=1),
            columns.column("Node", lambda o: _or_none(columns.get_path(o, "spec", "nodeName")), SPEC, "nodeName",
                           priority=1),
            columns.column("Nominated Node", lambda o: _or_none(columns.get_path(o, "status", "nominatedNodeName")),
                           STATUS, "nominatedNodeName", priority=1),
            columns.column("Readiness Gates", _readiness_gates, SPEC, "readinessGates", priority=1),
        ),
        selectable_fields={
            "spec.nodeName": get("spec", "nodeName"),
            "spec.restartPolicy": get("spec", "restartPolicy"),
            "spec.schedulerName": get("spec", "schedulerName"),
            "spec.serviceAccountName": get("spec", "serviceAccountName"),
            "spec.hostNetwork": lambda o: "true" if columns.get_path(o, "spec", "hostNetwork") else "false",
            "status.phase": get("status", "phase"),
            "status.podIP": get("status", "podIP"),
            "status.nominatedNodeName": get("status", "nominatedNodeName"),
        },
    )
