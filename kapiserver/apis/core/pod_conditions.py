"""Pod conditions as upstream's podutil sets and reads them."""
from __future__ import annotations

from kapiserver.machinery import meta


def update_pod_condition(status: dict, condition: dict) -> bool:
    """upstream's podutil.UpdatePodCondition: set a condition; the transition time
    changes only with the status.  Whether anything changed."""
    condition = dict(condition, lastTransitionTime=meta.now_rfc3339())
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    for i, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == condition["type"]:
            if old.get("status") == condition.get("status"):
                condition["lastTransitionTime"] = old.get("lastTransitionTime")
            same = all(old.get(k) == condition.get(k) for k in
                       ("status", "reason", "message", "lastProbeTime", "lastTransitionTime"))
            conditions[i] = condition
            return not same
    conditions.append(condition)
    return True


def is_pod_ready(pod: dict) -> bool:
    """upstream's podutil.IsPodReady: the Ready condition is True."""
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False
