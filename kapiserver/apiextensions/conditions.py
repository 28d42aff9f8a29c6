"""CustomResourceDefinition status conditions: read and set them the way upstream's helpers do.

``lastTransitionTime`` changes only when the status of a condition changes,
so a controller re-asserting the same state does not rewrite the CRD.
"""
from __future__ import annotations

from typing import Optional

from kapiserver.machinery.meta import now_rfc3339

ESTABLISHED = "Established"
NAMES_ACCEPTED = "NamesAccepted"
NON_STRUCTURAL_SCHEMA = "NonStructuralSchema"
TERMINATING = "Terminating"
API_APPROVAL = "KubernetesAPIApprovalPolicyConformant"


def get_condition(crd: dict, ctype: str) -> Optional[dict]:
    for cond in (crd.get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return cond
    return None


def is_true(crd: dict, ctype: str) -> bool:
    cond = get_condition(crd, ctype)
    return cond is not None and cond.get("status") == "True"


def set_condition(crd: dict, ctype: str, status: str, reason: str, message: str) -> None:
    """Add or replace condition ``ctype`` (in place)."""
    st = crd.get("status")
    if not isinstance(st, dict):
        st = crd["status"] = {}
    conditions = st.get("conditions")
    if not isinstance(conditions, list):
        conditions = st["conditions"] = []
    for cond in conditions:
        if cond.get("type") == ctype:
            if cond.get("status") != status or not cond.get("lastTransitionTime"):
                cond["lastTransitionTime"] = now_rfc3339()
            cond.update(status=status, reason=reason, message=message)
            return
    conditions.append({"type": ctype, "status": status, "lastTransitionTime": now_rfc3339(),
                       "reason": reason, "message": message})


def remove_condition(crd: dict, ctype: str) -> None:
    st = crd.get("status") or {}
    if isinstance(st.get("conditions"), list):
        st["conditions"] = [c for c in st["conditions"] if c.get("type") != ctype]
