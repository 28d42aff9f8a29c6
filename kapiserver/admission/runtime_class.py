"""RuntimeClass (upstream's admission plugin of that name).

A Pod created with ``spec.runtimeClassName`` must name an existing
RuntimeClass (node.k8s.io/v1); it gets the class's ``overhead.podFixed`` as
``spec.overhead``, the class's ``scheduling.nodeSelector`` merged into its own
node selector and the class's ``scheduling.tolerations`` merged into its own
(a toleration another one already covers is dropped, as upstream's
MergeTolerations).  An overhead the client set that differs from the class's,
or a node selector key with another value, is Forbidden.

The validating half refuses a pod whose overhead is not the class's, and a pod
with an overhead but no class (or a class without overhead), as upstream's
validateOverhead.
"""
from __future__ import annotations

import copy
from typing import Any, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.lister import Lister, ListingPlugin
from kapiserver.machinery import quantity
from kapiserver.registry.admission import CREATE, Attributes

PLUGIN_NAME = "RuntimeClass"
OVERHEAD_MISMATCH = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
OVERHEAD_WITHOUT_CLASS = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"


def same_resources(a: Any, b: Any) -> bool:
    """Semantic equality of two ResourceLists: the same names and equal quantities (nil == empty)."""
    a = a if isinstance(a, dict) else {}
    b = b if isinstance(b, dict) else {}
    if set(a) != set(b):
        return False
    for name, value in a.items():
        x, y = quantity.parse(value), quantity.parse(b[name])
        if x is None or y is None:
            if value != b[name]:
                return False
        elif x != y:
            return False
    return True


def _toleration_key(t: dict) -> tuple:
    return (t.get("key") or "", t.get("operator") or "", t.get("value") or "", t.get("effect") or "",
            t.get("tolerationSeconds"))


def is_superset(ss: dict, t: dict) -> bool:
    """Whether toleration ``ss`` tolerates everything ``t`` does (upstream's tolerations.isSuperset)."""
    if _toleration_key(ss) == _toleration_key(t):
        return True
    ss_key, ss_op, ss_effect = ss.get("key") or "", ss.get("operator") or "", ss.get("effect") or ""
    if (t.get("key") or "") != ss_key and (ss_key != "" or ss_op != "Exists"):
        return False
    if (t.get("effect") or "") != ss_effect and ss_effect != "":
        return False
    if ss_effect == "NoExecute" and ss.get("tolerationSeconds") is not None:
        if t.get("tolerationSeconds") is None or t["tolerationSeconds"] > ss["tolerationSeconds"]:
            return False
    if ss_op in ("Equal", ""):
        return (t.get("operator") or "") == "Equal" and (t.get("value") or "") == (ss.get("value") or "")
    return ss_op == "Exists"


def merge_tolerations(first: list, second: list) -> list:
    """Upstream's tolerations.MergeTolerations: both lists, without the tolerations another one covers
    (of two equal ones, the first is kept)."""
    every = [t for t in list(first) + list(second) if isinstance(t, dict)]
    merged: list[dict] = []
    for i, t in enumerate(every):
        if any(is_superset(kept, t) for kept in merged):
            continue
        if any(_toleration_key(t) != _toleration_key(later) and is_superset(later, t) for later in every[i + 1:]):
            continue
        merged.append(t)
    return merged


def _pod_spec(attrs: Attributes) -> Optional[dict]:
    if (attrs.rtype.group, attrs.rtype.plural) != ("", "pods") or attrs.subresource:
        return None
    spec = (attrs.obj or {}).get("spec") if isinstance(attrs.obj, dict) else None
    return spec if isinstance(spec, dict) else None


class RuntimeClass(ListingPlugin):
    name = PLUGIN_NAME
    mutating = True
    validating = True
    operations = (CREATE,)
    resources = frozenset({("", "pods")})

    def __init__(self, classes: Lister) -> None:
        self.classes = classes
        self.listers = (classes,)

    async def _runtime_class(self, attrs: Attributes, spec: dict) -> Optional[dict]:
        name = spec.get("runtimeClassName")
        if name is None:
            return None
        found = await self.classes.get(name)
        if found is None:
            raise admission_forbidden(attrs, f'pod rejected: RuntimeClass "{name}" not found')
        return found

    async def admit(self, attrs: Attributes) -> None:
        spec = _pod_spec(attrs)
        if spec is None:
            return
        rc = await self._runtime_class(attrs, spec)
        if rc is None:
            return
        overhead = rc.get("overhead")
        if isinstance(overhead, dict):
            pod_fixed = overhead.get("podFixed")
            if spec.get("overhead") and not same_resources(pod_fixed, spec["overhead"]):
                raise admission_forbidden(attrs, OVERHEAD_MISMATCH)
            if pod_fixed:
                spec["overhead"] = copy.deepcopy(pod_fixed)
            else:
                spec.pop("overhead", None)
        rules = rc.get("scheduling")
        if not isinstance(rules, dict):
            return
        selector = spec.get("nodeSelector")
        wanted = rules.get("nodeSelector")
        if not isinstance(wanted, dict):
            wanted = {}
        if not isinstance(selector, dict):
            selector = dict(wanted) if wanted else selector
        else:
            for key, value in wanted.items():
                if key in selector and selector[key] != value:
                    raise admission_forbidden(attrs, f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = "
                                                     f"{value}; pod.spec.nodeSelector[{key}] = {selector[key]}")
                selector[key] = value
        if selector is not None:
            spec["nodeSelector"] = selector
        own = spec.get("tolerations")
        if not isinstance(own, list):
            own = []
        extra = rules.get("tolerations")
        merged = merge_tolerations(own, copy.deepcopy(extra) if isinstance(extra, list) else [])
        if merged:
            spec["tolerations"] = merged
        else:
            spec.pop("tolerations", None)

    async def validate(self, attrs: Attributes) -> None:
        spec = _pod_spec(attrs)
        if spec is None:
            return
        rc = await self._runtime_class(attrs, spec)
        overhead = rc.get("overhead") if rc is not None else None
        if isinstance(overhead, dict):
            if not same_resources(overhead.get("podFixed"), spec.get("overhead")):
                raise admission_forbidden(attrs, OVERHEAD_MISMATCH)
        elif spec.get("overhead"):
            raise admission_forbidden(attrs, OVERHEAD_WITHOUT_CLASS)


def runtime_class(config: Optional[bytes], deps: Any) -> RuntimeClass:
    return RuntimeClass(Lister(lambda: deps.store("node.k8s.io", "v1", "runtimeclasses"), deps.reactor))
