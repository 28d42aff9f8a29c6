"""The kube (built-in) API link of the delegation chain (kube-apiserver proper).

It owns ``/api``, the built-in groups under ``/apis``, and the server's own
paths (``/healthz``, ``/livez``, ``/readyz``, ``/version``, ``/metrics``,
``/openapi``); everything else goes to the CRD resource.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from twisted.web import resource

from kapiserver.endpoints import discovery_endpoints, static
from kapiserver.endpoints.deps import EndpointDeps
from kapiserver.registry.groups import APIGroupSet
from kapiserver.endpoints.groups_resource import APIGroupsResource


class KubeAPIDeps(NamedTuple):
    # the built-in groups
    groups: APIGroupSet
    endpoints: EndpointDeps
    # the server's own paths by first segment: healthz, livez, readyz, version, metrics, openapi
    server_paths: dict[str, resource.Resource]
    # the paths listed at ``/``
    root_paths: Callable[[], list[str]]


class KubeAPIResource(APIGroupsResource):
    def __init__(self, deps: KubeAPIDeps, delegate: resource.Resource) -> None:
        super().__init__(deps.groups, deps.endpoints, delegate)
        self.server_paths = deps.server_paths
        self.core_root = discovery_endpoints.core_root(deps.groups.types)
        self.core_v1 = discovery_endpoints.resource_list("", "v1", deps.groups.types)
        self.root = static.DocumentEndpoint(lambda request, target: {"paths": deps.root_paths()})

    def own(self, parts: list[str]) -> resource.Resource | None:
        if not parts:
            return self.root
        head = parts[0]
        if head == "api":
            if len(parts) == 1:
                return self.core_root
            if parts[1] != "v1":
                return static.not_found()
            return self.core_v1 if len(parts) == 2 else self.rest
        if head == "apis":
            return self.own_named_group(parts)
        return self.server_paths.get(head)
