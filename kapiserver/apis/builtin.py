"""The built-in kinds this server serves, as resource type descriptions."""
from __future__ import annotations

from kapiserver.apis.coordination import leases
from kapiserver.apis.core import configmaps, events, namespaces, secrets, serviceaccounts
from kapiserver.apis.events import events as events_v1
from kapiserver.registry.resource_type import ResourceType


def builtin_resource_types() -> list[ResourceType]:
    """Fresh descriptions (callers may adjust them, e.g. the events TTL)."""
    return [
        namespaces.resource_type(),
        configmaps.resource_type(),
        secrets.resource_type(),
        serviceaccounts.resource_type(),
        events.resource_type(),
        events_v1.resource_type(),
        leases.resource_type(),
    ]
