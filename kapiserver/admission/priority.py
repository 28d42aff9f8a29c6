"""Priority (upstream's admission plugin of that name).

A Pod created with ``spec.priorityClassName`` gets that PriorityClass's value
as ``spec.priority`` and its ``preemptionPolicy``; a Pod without one gets the
``globalDefault`` class (the lowest value when several are marked, as
upstream's getDefaultPriorityClass picks) and its name, or priority 0 and
``PreemptLowerPriority`` when there is no default class.  An unknown class, or
a priority / preemptionPolicy the client set that differs from the computed
one, is Forbidden with upstream's messages.  On update, a body without the
priority fields keeps the stored ones (validation forbids changing them).

The validating half refuses a second ``globalDefault`` PriorityClass.

Deviation: the two built-in ``system-`` classes are resolved by their known
values when they are not stored yet, so a pod naming one is admitted before
the bootstrap controller created them (upstream waits for them before it is
ready).
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.lister import Lister, ListingPlugin
from kapiserver.apis.scheduling.priorityclasses import SYSTEM_CLASSES
from kapiserver.registry.admission import CREATE, UPDATE, Attributes

PLUGIN_NAME = "Priority"
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
# upstream's scheduling.DefaultPriorityWhenNoDefaultClassExists
DEFAULT_PRIORITY = 0


def default_priority_class(classes: list[dict]) -> Optional[dict]:
    """The globalDefault class with the lowest value (ties: by name), None without one."""
    defaults = [c for c in classes if c.get("globalDefault") is True]
    if not defaults:
        return None
    return min(defaults, key=lambda c: (c.get("value") or 0, (c.get("metadata") or {}).get("name") or ""))


class Priority(ListingPlugin):
    name = PLUGIN_NAME
    mutating = True
    validating = True
    operations = (CREATE, UPDATE)
    resources = frozenset({("", "pods"), ("scheduling.k8s.io", "priorityclasses")})

    def __init__(self, classes: Lister) -> None:
        self.classes = classes
        self.listers = (classes,)

    async def _class(self, name: str) -> Optional[dict]:
        found = await self.classes.get(name)
        if found is None and name in SYSTEM_CLASSES:
            found = {"metadata": {"name": name}, "value": SYSTEM_CLASSES[name],
                     "preemptionPolicy": PREEMPT_LOWER_PRIORITY}
        return found

    async def admit(self, attrs: Attributes) -> None:
        if (attrs.rtype.group, attrs.rtype.plural) != ("", "pods") or attrs.subresource:
            return
        spec = (attrs.obj or {}).get("spec")
        if not isinstance(spec, dict):
            return
        if attrs.operation == UPDATE:
            # the plugin set them on create; keep them when an update leaves them out
            old_spec = (attrs.old_obj or {}).get("spec")
            if isinstance(old_spec, dict):
                for key in ("priority", "preemptionPolicy"):
                    if spec.get(key) is None and old_spec.get(key) is not None:
                        spec[key] = old_spec[key]
            return
        class_name = spec.get("priorityClassName")
        policy: Optional[str]
        if not class_name:
            chosen = default_priority_class(await self.classes.list())
            if chosen is not None:
                spec["priorityClassName"] = chosen["metadata"]["name"]
                priority, policy = chosen.get("value") or 0, chosen.get("preemptionPolicy")
            else:
                spec.pop("priorityClassName", None)
                priority, policy = DEFAULT_PRIORITY, PREEMPT_LOWER_PRIORITY
        else:
            pc = await self._class(class_name)
            if pc is None:
                raise admission_forbidden(attrs, f"no PriorityClass with name {class_name} was found")
            priority, policy = pc.get("value") or 0, pc.get("preemptionPolicy")
        given = spec.get("priority")
        if given is not None and given != priority:
            raise admission_forbidden(
                attrs, f"the integer value of priority ({given}) must not be provided in pod spec; "
                       f"priority admission controller computed {priority} from the given PriorityClass name")
        spec["priority"] = priority
        if policy:
            given_policy = spec.get("preemptionPolicy")
            if given_policy is not None and given_policy != policy:
                raise admission_forbidden(
                    attrs, f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod "
                           f"spec; priority admission controller computed {policy} from the given PriorityClass name")
            spec["preemptionPolicy"] = policy

    async def validate(self, attrs: Attributes) -> None:
        """Only one PriorityClass may be the global default."""
        if (attrs.rtype.group, attrs.rtype.plural) != ("scheduling.k8s.io", "priorityclasses") or attrs.subresource:
            return
        pc = attrs.obj
        if not isinstance(pc, dict) or pc.get("globalDefault") is not True:
            return
        current = default_priority_class(await self.classes.list())
        if current is None:
            return
        current_name = current["metadata"]["name"]
        if attrs.operation == CREATE or current_name != (pc.get("metadata") or {}).get("name"):
            raise admission_forbidden(
                attrs, f"PriorityClass {current_name} is already marked as default. Only one default can exist")


def priority(config: Optional[bytes], deps: Any) -> Priority:
    return Priority(Lister(lambda: deps.store("scheduling.k8s.io", "v1", "priorityclasses"), deps.reactor))
