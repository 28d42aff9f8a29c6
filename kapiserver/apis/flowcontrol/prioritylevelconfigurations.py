"""PriorityLevelConfigurations (flowcontrol.apiserver.k8s.io/v1, cluster-scoped, status subresource).

Defaults, validation and printing as upstream's.  ``exempt`` is the only
level of type Exempt; the mandatory ``exempt`` and ``catch-all`` keep
upstream's fixed spec (``exempt`` may change its ``spec.exempt``).
"""
from __future__ import annotations

import math

from kapiserver.apis import columns, field_checks
from kapiserver.apis.flowcontrol.flowschemas import validate_status
from kapiserver.apis.flowcontrol.semantic import semantically_equal
from kapiserver.flowcontrol import bootstrap
from kapiserver.flowcontrol.api import default_priority_level_spec
from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

SCHEMA = "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration"
SPEC = "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationSpec"
LIMITED = "io.k8s.api.flowcontrol.v1.LimitedPriorityLevelConfiguration"
QUEUING = "io.k8s.api.flowcontrol.v1.QueuingConfiguration"
MAX_QUEUES = 10 * 1000 * 1000
MAX_HASH_BITS = 60
TYPES = ["Exempt", "Limited"]
LIMIT_RESPONSE_TYPES = ["Queue", "Reject"]
PRESERVE_ZERO_SHARES = "flowcontrol.k8s.io/v1beta3-preserve-zero-concurrency-shares"


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    """shufflesharding.RequiredEntropyBits."""
    return int(math.ceil(math.log2(deck_size) * hand_size))


class PriorityLevelConfigurationStrategy(Strategy):
    tracks_generation = True
    status_fixed_metadata = None

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        obj["status"] = {}

    def default(self, rtype: ResourceType, obj: dict) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_priority_level_spec(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        name = columns.get_path(obj, "metadata", "name", default="")
        spec = as_dict(obj.get("spec"))
        causes = field_checks.kube_object_meta(obj)
        if PRESERVE_ZERO_SHARES in (columns.get_path(obj, "metadata", "annotations") or {}):
            causes.append(errors.field_forbidden("metadata.annotations",
                                                 f"annotation '{PRESERVE_ZERO_SHARES}' is forbidden"))
        causes += validate_spec(name, spec, "spec")
        causes += _validate_mandatory(name, spec)
        causes += validate_status(obj.get("status"), "status")
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        return validate_status(new.get("status"), "status")


def _validate_mandatory(name: str, spec: dict) -> list[errors.Cause]:
    """ValidateIfMandatoryPriorityLevelConfigurationObject."""
    mandatory = next((p for p in bootstrap.MANDATORY_PRIORITY_LEVELS if p["metadata"]["name"] == name), None)
    if mandatory is None:
        return []
    fixed = bootstrap.mandatory_priority_level(name)["spec"]
    default_priority_level_spec(fixed)
    have = dict(spec)
    if name == bootstrap.EXEMPT:
        have["exempt"] = fixed.get("exempt")
        if not semantically_equal(have, fixed):
            return [errors.field_invalid("spec", gorepr.GoRepr("flowcontrol.PriorityLevelConfigurationSpec{...}"),
                                         f"spec of '{name}' except the 'spec.exempt' field must equal the fixed "
                                         f"value")]
        return []
    if not semantically_equal(have, fixed):
        return [errors.field_invalid("spec", gorepr.GoRepr("flowcontrol.PriorityLevelConfigurationSpec{...}"),
                                     f"spec of '{name}' must equal the fixed value")]
    return []


def validate_spec(name: str, spec: dict, path: str) -> list[errors.Cause]:
    """ValidatePriorityLevelConfigurationSpec."""
    causes: list[errors.Cause] = []
    kind = spec.get("type") or ""
    if (name == bootstrap.EXEMPT) != (kind == "Exempt"):
        causes.append(errors.field_invalid(f"{path}.type", kind, "type must be 'Exempt' if and only if name is "
                                                                 "'exempt'"))
    if kind == "Exempt":
        if spec.get("limited") is not None:
            causes.append(errors.field_forbidden(f"{path}.limited", "must be nil if the type is not Limited"))
        exempt = spec.get("exempt")
        if isinstance(exempt, dict):
            causes += _non_negative(exempt.get("nominalConcurrencyShares"), f"{path}.exempt.nominalConcurrencyShares")
            causes += _percent(exempt.get("lendablePercent"), f"{path}.exempt.lendablePercent")
    elif kind == "Limited":
        if spec.get("exempt") is not None:
            causes.append(errors.field_forbidden(f"{path}.exempt", "must be nil if the type is Limited"))
        limited = spec.get("limited")
        if not isinstance(limited, dict):
            causes.append(errors.field_required(f"{path}.limited", "must not be empty when type is Limited"))
        else:
            causes += _validate_limited(limited, f"{path}.limited")
    else:
        causes.append(errors.field_not_supported(f"{path}.type", kind, TYPES))
    return causes


def _non_negative(value, path: str) -> list[errors.Cause]:
    if validation.is_int(value) and value < 0:
        return [errors.field_invalid(path, value, "must be a non-negative integer")]
    return []


def _percent(value, path: str) -> list[errors.Cause]:
    if validation.is_int(value) and not 0 <= value <= 100:
        return [errors.field_invalid(path, value, "must be between 0 and 100, inclusive")]
    return []


def _validate_limited(limited: dict, path: str) -> list[errors.Cause]:
    causes = _non_negative(limited.get("nominalConcurrencyShares"), f"{path}.nominalConcurrencyShares")
    response = as_dict(limited.get("limitResponse"))
    rpath = f"{path}.limitResponse"
    kind = response.get("type") or ""
    queuing = response.get("queuing")
    if kind == "Reject":
        if queuing is not None:
            causes.append(errors.field_forbidden(f"{rpath}.queuing",
                                                 "must be nil if limited.limitResponse.type is not Limited"))
    elif kind == "Queue":
        if not isinstance(queuing, dict):
            causes.append(errors.field_required(f"{rpath}.queuing",
                                                "must not be empty if limited.limitResponse.type is Limited"))
        else:
            causes += _validate_queuing(queuing, f"{rpath}.queuing")
    else:
        causes.append(errors.field_not_supported(f"{rpath}.type", kind, LIMIT_RESPONSE_TYPES))
    causes += _percent(limited.get("lendablePercent"), f"{path}.lendablePercent")
    borrowing = limited.get("borrowingLimitPercent")
    if validation.is_int(borrowing) and borrowing < 0:
        causes.append(errors.field_invalid(f"{path}.borrowingLimitPercent", borrowing,
                                           "if specified, must be a non-negative integer"))
    return causes


def _validate_queuing(queuing: dict, path: str) -> list[errors.Cause]:
    causes: list[errors.Cause] = []
    length, queues, hand = (queuing.get(k) or 0 for k in ("queueLengthLimit", "queues", "handSize"))
    if length <= 0:
        causes.append(errors.field_invalid(f"{path}.queueLengthLimit", length, "must be positive"))
    if queues <= 0:
        causes.append(errors.field_invalid(f"{path}.queues", queues, "must be positive"))
    elif queues > MAX_QUEUES:
        causes.append(errors.field_invalid(f"{path}.queues", queues, f"must not be greater than {MAX_QUEUES}"))
    if hand <= 0:
        causes.append(errors.field_invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        causes.append(errors.field_invalid(f"{path}.handSize", hand, f"should not be greater than queues ({queues})"))
    elif required_entropy_bits(queues, hand) > MAX_HASH_BITS:
        causes.append(errors.field_invalid(f"{path}.handSize", hand,
                                           f"required entropy bits of deckSize {queues} and handSize {hand} should "
                                           f"not be greater than {MAX_HASH_BITS}"))
    return causes


def _limited(obj: dict, *path: str):
    limited = columns.get_path(obj, "spec", "limited")
    if not isinstance(limited, dict):
        return "<none>"
    if path[0] == "nominalConcurrencyShares":
        return limited.get("nominalConcurrencyShares")
    queuing = (limited.get("limitResponse") or {}).get("queuing")
    if not isinstance(queuing, dict):
        return "<none>"
    return queuing.get(path[0]) or 0


def resource_type() -> ResourceType:
    return ResourceType(
        group=bootstrap.GROUP, version=bootstrap.VERSION, kind="PriorityLevelConfiguration",
        plural="prioritylevelconfigurations", singular="prioritylevelconfiguration", namespaced=False,
        strategy=PriorityLevelConfigurationStrategy(), has_status=True, schema_name=SCHEMA,
        table_columns=(
            columns.name_column(),
            columns.column("Type", lambda o: columns.get_path(o, "spec", "type", default=""), SPEC, "type"),
            columns.column("NominalConcurrencyShares", lambda o: _limited(o, "nominalConcurrencyShares"), LIMITED,
                           "nominalConcurrencyShares"),
            columns.column("Queues", lambda o: _limited(o, "queues"), QUEUING, "queues"),
            columns.column("HandSize", lambda o: _limited(o, "handSize"), QUEUING, "handSize"),
            columns.column("QueueLengthLimit", lambda o: _limited(o, "queueLengthLimit"), QUEUING,
                           "queueLengthLimit"),
            columns.age_column(),
        ),
    )
