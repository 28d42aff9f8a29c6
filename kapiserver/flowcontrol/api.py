"""What flow control shares with its API kinds (flowcontrol.apiserver.k8s.io/v1, ``apis/flowcontrol/``).

Upstream's defaulting of the two kinds (``pkg/apis/flowcontrol/v1/defaults.go``),
the order FlowSchemas are matched in and the ``Dangling`` condition.  The
kinds' strategies default what is written and list schemas in matching order;
the configuration consumer (``controller.py``) defaults the objects it
imagines, orders the schemas it matches and writes the condition.  It sits
here, below the kinds, because flow control runs below the API layer.
"""
from __future__ import annotations

DEFAULT_MATCHING_PRECEDENCE = 1000
DEFAULT_HAND_SIZE = 8
DEFAULT_QUEUES = 64
DEFAULT_QUEUE_LENGTH_LIMIT = 50
DEFAULT_NOMINAL_CONCURRENCY_SHARES = 30
# the condition of a FlowSchema whose priority level does not exist
DANGLING = "Dangling"


def default_flow_schema_spec(spec: dict) -> None:
    """SetDefaults_FlowSchemaSpec."""
    if not spec.get("matchingPrecedence"):
        spec["matchingPrecedence"] = DEFAULT_MATCHING_PRECEDENCE


def matching_order(fs: dict) -> tuple:
    """Upstream's FlowSchemaSequence: by matchingPrecedence, then by name."""
    spec = fs.get("spec") or {}
    return (spec.get("matchingPrecedence") or 0, (fs.get("metadata") or {}).get("name") or "")


def default_priority_level_spec(spec: dict) -> None:
    """SetDefaults_ExemptPriorityLevelConfiguration, _LimitedPriorityLevelConfiguration, _QueuingConfiguration."""
    exempt = spec.get("exempt")
    if isinstance(exempt, dict):
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)
    limited = spec.get("limited")
    if isinstance(limited, dict):
        if limited.get("nominalConcurrencyShares") is None:
            limited["nominalConcurrencyShares"] = DEFAULT_NOMINAL_CONCURRENCY_SHARES
        if limited.get("lendablePercent") is None:
            limited["lendablePercent"] = 0
        queuing = (limited.get("limitResponse") or {}).get("queuing")
        if isinstance(queuing, dict):
            for key, value in (("handSize", DEFAULT_HAND_SIZE), ("queues", DEFAULT_QUEUES),
                               ("queueLengthLimit", DEFAULT_QUEUE_LENGTH_LIMIT)):
                if not queuing.get(key):
                    queuing[key] = value
