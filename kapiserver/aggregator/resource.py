"""The first link of the delegation chain (kube-aggregator).

It owns the merged ``/apis`` discovery (built-in and CRD groups alike) and
will own apiregistration.k8s.io and APIService proxying; everything else goes
to the kube API resource.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from twisted.web import resource

from kapiserver.endpoints import discovery_endpoints
from kapiserver.endpoints.groups_resource import DelegatingResource
from kapiserver.registry.resource_type import ResourceType


@dataclass(frozen=True)
class AggregatorDeps:
    # every served resource type, built-in and custom, for the merged discovery
    all_types: Callable[[], list[ResourceType]]


class AggregatorResource(DelegatingResource):
    def __init__(self, deps: AggregatorDeps, delegate: resource.Resource) -> None:
        super().__init__(delegate)
        self.apis = discovery_endpoints.groups_root(deps.all_types)

    def own(self, parts: list[str]) -> resource.Resource | None:
        if parts == ["apis"]:
            return self.apis
        return None
