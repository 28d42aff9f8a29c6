"""Leases (coordination.k8s.io/v1): spec checks as upstream's ValidateLeaseSpec.

PUT may create a lease (leader election does), and every update must carry
``resourceVersion`` (upstream's AllowUnconditionalUpdate is false here).
"""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.machinery import errors, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.coordination.v1.Lease"
SPEC = "io.k8s.api.coordination.v1.LeaseSpec"
OLDEST_EMULATION_VERSION = "OldestEmulationVersion"


class LeaseStrategy(Strategy):
    allow_create_on_update = True
    allow_unconditional_update = False

    # upstream's CoordinatedLeaderElection gate is off in v1.32: its fields are dropped, not validated
    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        super().prepare_for_create(rtype, obj)
        spec = obj.get("spec")
        if isinstance(spec, dict):
            spec.pop("strategy", None)
            spec.pop("preferredHolder", None)

    def prepare_for_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        """An update keeps the fields only where the old Lease had them."""
        super().prepare_for_update(rtype, new, old)
        spec, old_spec = new.get("spec"), as_dict(old.get("spec"))
        if isinstance(spec, dict):
            for name in ("strategy", "preferredHolder"):
                if old_spec.get(name) is None:
                    spec.pop(name, None)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidateLeaseSpec (Leases use the generic metadata checks only)."""
        spec = obj.get("spec") or {}
        causes = []
        duration = spec.get("leaseDurationSeconds")
        if validation.is_int(duration) and duration <= 0:
            causes.append(errors.field_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
        transitions = spec.get("leaseTransitions")
        if validation.is_int(transitions) and transitions < 0:
            causes.append(errors.field_invalid("spec.leaseTransitions", transitions, validation.IS_NEGATIVE))
        strategy = spec.get("strategy")
        if strategy is not None:
            causes.extend(validate_strategy(str(strategy), "spec.strategy"))
        if spec.get("preferredHolder") and not strategy:
            causes.append(errors.field_forbidden("spec.preferredHolder",
                                                 "may only be specified if `strategy` is defined"))
        return causes


def validate_strategy(strategy: str, path: str) -> list[errors.Cause]:
    """upstream's ValidateCoordinatedLeaseStrategy (which reports at ``<path>.strategy``)."""
    at = f"{path}.strategy"
    if "/" not in strategy:
        if strategy != OLDEST_EMULATION_VERSION:
            return [errors.field_not_supported(at, strategy, [OLDEST_EMULATION_VERSION])]
        return []
    return [errors.field_invalid(at, strategy, p) for p in validation.is_qualified_name(strategy)]


def resource_type() -> ResourceType:
    return ResourceType(
        group="coordination.k8s.io", version="v1", kind="Lease", plural="leases", singular="lease",
        namespaced=True, strategy=LeaseStrategy(), schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Holder", lambda o: columns.get_path(o, "spec", "holderIdentity", default=""),
                           SPEC, "holderIdentity"),
            columns.age_column(),
        ),
    )
