"""``pods/{name}/ephemeralcontainers``: adding debug containers to a running pod (``kubectl debug``).

Only ``spec.ephemeralContainers`` changes through it (upstream's
podEphemeralContainersStrategy); containers may be added, never changed or
removed (``pods.validate_ephemeral_containers_update``), and may not carry what
the pod's own containers rely on (ports, probes, lifecycle hooks, resources:
``podspec``'s ephemeral container checks).  The pod's kubelet runs them and
reports their status (``kubectl debug`` with a real node: docs/nodes.md).
"""
from __future__ import annotations

import copy

from kapiserver.registry.subresources import Subresource

SUBRESOURCE = "ephemeralcontainers"


def keep_only_ephemeral_containers(new: dict, old: dict) -> None:
    """Make ``new`` the stored pod with ``new``'s ephemeral containers (in place)."""
    wanted = copy.deepcopy((new.get("spec") or {}).get("ephemeralContainers"))
    md = new.get("metadata") or {}
    kept = copy.deepcopy(old)
    for key in ("name", "namespace", "resourceVersion", "uid"):
        if key in md:
            kept["metadata"][key] = md[key]
    spec = kept.setdefault("spec", {})
    if wanted:
        spec["ephemeralContainers"] = wanted
    else:
        spec.pop("ephemeralContainers", None)
    new.clear()
    new.update(kept)


def ephemeral_containers_subresource() -> Subresource:
    """get, update and patch through the pods Store (PodStrategy applies the rules above)."""
    return Subresource(SUBRESOURCE, ("get", "patch", "update"), description="ephemeralcontainers of the Pod")
