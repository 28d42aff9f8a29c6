"""DefaultTolerationSeconds (upstream's admission plugin of that name).

Every Pod that does not already tolerate them gets NoExecute tolerations of
the ``node.kubernetes.io/not-ready`` and ``node.kubernetes.io/unreachable``
taints for 300 seconds, so that a pod on a failed node is evicted after five
minutes. A toleration with an empty key or effect counts as tolerating them.
"""
from __future__ import annotations

from typing import Any, Optional
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes


NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_SECONDS = 300


def _tolerates(tolerations: list, key: str) -> bool:
    return any(isinstance(t, dict) and (t.get("key") or "") in (key, "") and (t.get("effect") or "") in ("NoExecute", "")
               for t in tolerations)


class DefaultTolerationSeconds(AdmissionPlugin):
    name = "DefaultTolerationSeconds"
    mutating = True
    operations = (CREATE, UPDATE)
    resources = frozenset({("", "pods")})

    def __init__(self, seconds: int = DEFAULT_SECONDS) -> None:
        self.seconds = seconds

    async def admit(self, attrs: Attributes) -> None:
        if (attrs.rtype.group, attrs.rtype.plural) != ("", "pods") or attrs.subresource:
            return
        spec = (attrs.obj or {}).get("spec")
        if not isinstance(spec, dict):
            return
        found = spec.get("tolerations")
        tolerations: list = found if isinstance(found, list) else []
        added = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": self.seconds}
                 for key in (NOT_READY, UNREACHABLE) if not _tolerates(tolerations, key)]
        if added:
            spec["tolerations"] = tolerations + added


def default_toleration_seconds(config: Optional[bytes], deps: Any) -> DefaultTolerationSeconds:
    return DefaultTolerationSeconds()
