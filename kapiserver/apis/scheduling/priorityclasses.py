"""PriorityClasses (scheduling.k8s.io/v1, cluster-scoped): the ``system-``
prefix is reserved, user values stop at one billion, value and
preemptionPolicy never change."""
from __future__ import annotations

from kapiserver.apis import columns, field_checks
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.scheduling.v1.PriorityClass"
SYSTEM_PREFIX = "system-"
HIGHEST_USER_PRIORITY = 1000000000
# upstream's built-in classes: the only names allowed to carry the prefix
SYSTEM_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
PREEMPTION_POLICIES = ["PreemptLowerPriority", "Never"]


class PriorityClassStrategy(Strategy):
    tracks_generation = True

    def generation_changes(self, rtype: ResourceType, new: dict, old: dict) -> bool:
        """Upstream sets it on create only (value is immutable; a description does not count)."""
        return False

    def default(self, rtype: ResourceType, obj: dict) -> None:
        if not obj.get("preemptionPolicy"):
            obj["preemptionPolicy"] = "PreemptLowerPriority"
        if obj.get("value") is None:
            obj["value"] = 0  # an int32 without omitempty, as upstream serializes it

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidatePriorityClass."""
        name = columns.get_path(obj, "metadata", "name", default="")
        value = obj.get("value")
        causes = field_checks.kube_object_meta(obj)
        if name.startswith(SYSTEM_PREFIX):
            if name not in SYSTEM_CLASSES:
                why = f"{name} is not a known system priority class"
            elif value != SYSTEM_CLASSES[name]:
                why = f"value of {name} PriorityClass must be {SYSTEM_CLASSES[name]}"
            elif obj.get("globalDefault"):
                why = f"globalDefault of {name} PriorityClass must be false"
            else:
                why = ""
            if why:
                causes.append(errors.field_forbidden(
                    "metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system "
                                     f"use only. error: {why}"))
        elif isinstance(value, int) and value > HIGHEST_USER_PRIORITY:
            causes.append(errors.field_forbidden(
                "value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"))
        if obj.get("preemptionPolicy") is not None:
            causes.extend(field_checks.one_of(obj.get("preemptionPolicy"), "preemptionPolicy", PREEMPTION_POLICIES,
                                              required=True))
        return causes

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePriorityClassUpdate: value and preemptionPolicy are fixed."""
        causes = field_checks.kube_object_meta(new)
        if new.get("value") != old.get("value"):
            causes.append(errors.field_forbidden("value", "may not be changed in an update."))
        causes.extend(field_checks.immutable(new.get("preemptionPolicy"), old.get("preemptionPolicy"),
                                             "preemptionPolicy"))
        return causes


def resource_type() -> ResourceType:
    return ResourceType(
        group="scheduling.k8s.io", version="v1", kind="PriorityClass", plural="priorityclasses",
        singular="priorityclass", namespaced=False, strategy=PriorityClassStrategy(), short_names=("pc",),
        schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Value", lambda o: o.get("value") or 0, SCHEMA, "value", type="integer"),
            columns.column("Global-Default", lambda o: bool(o.get("globalDefault")), SCHEMA, "globalDefault",
                           type="boolean"),
            columns.age_column(),
            columns.column("PreemptionPolicy", lambda o: o.get("preemptionPolicy") or "", SCHEMA,
                           "preemptionPolicy"),
        ),
    )
