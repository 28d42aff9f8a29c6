"""The first link of the delegation chain (kube-aggregator).

It owns the merged ``/apis`` discovery (built-in and CRD groups, and the
groups of extension API servers), serves ``apiregistration.k8s.io``
(APIServices), and forwards every request for a group version whose
APIService names a Service to that extension server (``proxy.py``);
everything else goes to the kube API resource.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Protocol

from twisted.web import resource

from kapiserver.aggregator import discovery as merged
from kapiserver.aggregator.discovery import RemoteResources
from kapiserver.endpoints import discovery_endpoints
from kapiserver.endpoints.deps import EndpointDeps
from kapiserver.registry.groups import APIGroupSet
from kapiserver.endpoints.groups_resource import APIGroupsResource
from kapiserver.endpoints.static import DocumentEndpoint
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType


class Routing(Protocol):
    """What the aggregator routes by (its APIService registration implements it)."""

    def target(self, group: str, version: str) -> object: ...

    def has_remote_group(self, group: str) -> bool: ...

    def all(self) -> list[dict]: ...


class AggregatorDeps(NamedTuple):
    # every resource type served here, built-in and custom, for the merged discovery
    all_types: Callable[[], list[ResourceType]]
    # apiregistration.k8s.io (APIServices)
    groups: APIGroupSet
    endpoints: EndpointDeps
    # the APIServices this server knows, and which group versions are proxied
    routing: Routing
    # the leaf forwarding requests to extension servers
    proxy: resource.Resource
    # the extension servers' resource lists (for aggregated discovery)
    remote_resources: Callable[[], RemoteResources]


class AggregatorResource(APIGroupsResource):
    def __init__(self, deps: AggregatorDeps, delegate: resource.Resource) -> None:
        super().__init__(deps.groups, deps.endpoints, delegate)
        self.deps = deps
        self.apis = DocumentEndpoint(self._apis, discovery_endpoints.AGGREGATED_SHAPES)

    def _apis(self, request, target) -> dict:
        types = self.deps.all_types()
        apiservices = self.deps.routing.all()
        if target.as_kind == "APIGroupDiscoveryList":
            return merged.aggregated_discovery(types, apiservices, self.deps.remote_resources(), target.version)
        return merged.api_group_list(types, apiservices)

    def _group(self, name: str) -> DocumentEndpoint:
        def produce(request, target) -> dict:
            found = merged.api_group_document(name, self.deps.all_types(), self.deps.routing.all())
            if found is None:
                raise errors.resource_not_found()
            return found
        return DocumentEndpoint(produce)

    def own(self, parts: list[str]) -> resource.Resource | None:
        if parts == ["apis"]:
            return self.apis
        owned = self.own_named_group(parts)
        if owned is not None:
            return owned
        if len(parts) >= 3 and parts[0] == "apis" and self.deps.routing.target(parts[1], parts[2]) is not None:
            return self.deps.proxy
        if len(parts) == 2 and parts[0] == "apis" and self.deps.routing.has_remote_group(parts[1]):
            return self._group(parts[1])
        return None
