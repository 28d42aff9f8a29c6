"""The first link of the delegation chain (kube-aggregator).

It owns the merged ``/apis`` discovery (built-in and CRD groups alike) and
will own apiregistration.k8s.io and APIService proxying; everything else goes
to the kube API resource.
"""
from __future__ import annotations

from typing import Callable

from twisted.web import resource

from kapiserver.endpoints import discovery_endpoints
from kapiserver.endpoints.groups_resource import DelegatingResource
from kapiserver.registry.resource_type import ResourceType


class AggregatorResource(DelegatingResource):
    def __init__(self, all_types: Callable[[], list[ResourceType]], delegate: resource.Resource) -> None:
        super().__init__(delegate)
        self.apis = discovery_endpoints.groups_root(all_types)

    def own(self, request) -> resource.Resource | None:
        if request.request_info.parts == ["apis"]:
            return self.apis
        return None
