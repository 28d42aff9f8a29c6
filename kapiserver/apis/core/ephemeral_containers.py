"""``pods/{name}/ephemeralcontainers``: adding debug containers to a running pod (``kubectl debug``).

Only ``spec.ephemeralContainers`` changes through it (upstream's
podEphemeralContainersStrategy); containers may be added, never changed or
removed, and may not carry what the pod's own containers rely on (ports,
probes, lifecycle hooks, resources).  Nothing runs them here: no kubelet
reports their status.
"""
from __future__ import annotations

import copy
from typing import Any

from kapiserver.apis.core import podspec
from kapiserver.machinery import errors
from kapiserver.registry.subresources import Subresource

SUBRESOURCE = "ephemeralcontainers"
NOT_FOR_EPHEMERAL = "cannot be set for an Ephemeral Container"
# EphemeralContainerCommon's fields in struct order that an ephemeral container may not set
_FORBIDDEN_FIELDS = ("ports", "resources", "resizePolicy", "restartPolicy", "livenessProbe", "readinessProbe",
                     "startupProbe", "lifecycle")


def _is_zero(value: Any) -> bool:
    return value is None or value == {} or value == [] or value == "" or value is False or value == 0


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


def validate_ephemeral_containers(spec: dict, path: str) -> list[errors.Cause]:
    """The checks upstream makes of ephemeral containers beyond those of every container."""
    causes: list[errors.Cause] = []
    targets = {c.get("name") for key, _, c in podspec.all_containers(spec) if key != "ephemeralContainers"}
    for i, c in enumerate(spec.get("ephemeralContainers") or ()):
        if not isinstance(c, dict):
            continue
        at = f"{path}.ephemeralContainers[{i}]"
        target = c.get("targetContainerName")
        if target and target not in targets:
            causes.append(podspec.field_not_found(f"{at}.targetContainerName", target))
        for name in _FORBIDDEN_FIELDS:
            if not _is_zero(c.get(name)):
                causes.append(errors.field_forbidden(f"{at}.{name}", NOT_FOR_EPHEMERAL))
        for j, mount in enumerate(c.get("volumeMounts") or ()):
            for key in ("subPath", "subPathExpr"):
                if isinstance(mount, dict) and mount.get(key):
                    causes.append(errors.field_forbidden(f"{at}.volumeMounts[{j}].{key}", NOT_FOR_EPHEMERAL))
    return causes


def validate_update(new: dict, old: dict) -> list[errors.Cause]:
    """upstream's ValidatePodEphemeralContainersUpdate."""
    spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
    causes = podspec.validate_pod_spec(spec, "spec") + validate_ephemeral_containers(spec, "spec")
    if "kubernetes.io/config.mirror" in ((old.get("metadata") or {}).get("annotations") or {}):
        return [errors.field_forbidden("", "static pods do not support ephemeral containers")]
    by_name = {c.get("name"): c for c in spec.get("ephemeralContainers") or () if isinstance(c, dict)}
    for existing in (old.get("spec") or {}).get("ephemeralContainers") or ():
        name = existing.get("name")
        if name not in by_name:
            causes.append(errors.field_forbidden("spec.ephemeralContainers",
                                                 f'existing ephemeral containers "{name}" may not be removed\n'))
        elif by_name[name] != existing:
            causes.append(errors.field_forbidden(f"spec.ephemeralContainers[{name}]",
                                                 f'existing ephemeral containers "{name}" may not be changed\n'))
    return causes


def ephemeral_containers_subresource() -> Subresource:
    """get, update and patch through the pods Store (PodStrategy applies the rules above)."""
    return Subresource(SUBRESOURCE, ("get", "patch", "update"), description="ephemeralcontainers of the Pod")
