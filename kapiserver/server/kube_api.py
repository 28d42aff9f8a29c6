"""The kube (built-in) API link of the delegation chain (kube-apiserver proper).

It owns ``/api``, the built-in groups under ``/apis``, and the server's own
paths (``/healthz``, ``/livez``, ``/readyz``, ``/version``, ``/metrics``,
``/openapi``); everything else goes to the CRD resource.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.web import resource

from kapiserver.endpoints import discovery_endpoints, static
from kapiserver.endpoints.groups import APIGroupSet
from kapiserver.endpoints.groups_resource import APIGroupsResource


class KubeAPIResource(APIGroupsResource):
    def __init__(self, groups: APIGroupSet, state: Any, delegate: resource.Resource,
                 server_paths: dict[str, resource.Resource], root_paths: Callable[[], list[str]]) -> None:
        super().__init__(groups, state, delegate)
        self.server_paths = server_paths
        self.core_root = discovery_endpoints.core_root(groups.types)
        self.core_v1 = discovery_endpoints.resource_list("", "v1", groups.types)
        self.root = static.DocumentEndpoint(lambda request, target: {"paths": root_paths()})

    def own(self, request) -> resource.Resource | None:
        parts = request.request_info.parts
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
