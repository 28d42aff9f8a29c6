"""TaintNodesByCondition (upstream's admission plugin of that name).

A Node is created with the ``node.kubernetes.io/not-ready:NoSchedule`` taint
(unless it already has a taint with that key and effect), so no pod is
scheduled on it before the node lifecycle controller has seen it Ready and
removed the taint.
"""
from __future__ import annotations

from typing import Any, Optional
from kapiserver.registry.admission import CREATE, AdmissionPlugin, Attributes


PLUGIN_NAME = "TaintNodesByCondition"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


class TaintNodesByCondition(AdmissionPlugin):
    name = PLUGIN_NAME
    mutating = True
    operations = (CREATE,)
    resources = frozenset({("", "nodes")})

    async def admit(self, attrs: Attributes) -> None:
        if (attrs.rtype.group, attrs.rtype.plural) != ("", "nodes") or attrs.subresource:
            return
        node = attrs.obj
        if not isinstance(node, dict):
            return
        spec = node.get("spec")
        if not isinstance(spec, dict):
            spec = node["spec"] = {}
        taints = spec.get("taints")
        if not isinstance(taints, list):
            taints = []
        # upstream's Taint.MatchTaint: the same key and effect
        if any(isinstance(t, dict) and t.get("key") == NOT_READY_TAINT["key"]
               and t.get("effect") == NOT_READY_TAINT["effect"] for t in taints):
            return
        spec["taints"] = taints + [dict(NOT_READY_TAINT)]


def taint_nodes_by_condition(config: Optional[bytes], deps: Any) -> TaintNodesByCondition:
    return TaintNodesByCondition()
