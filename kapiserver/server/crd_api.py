"""The last API link of the delegation chain (apiextensions-apiserver).

It serves the groups of Established CRDs.  Until the CRDs stored at startup
are all installed, a request that may belong to one answers 503 rather than a
misleading 404; past it, everything unmatched is a 404 Status.  It is the
CRD link of the server's delegation chain (``kube_api.py`` is the one before
it), built on the endpoints; what it serves comes from
``apiextensions/server.py``.
"""
from __future__ import annotations

from typing import NamedTuple

from twisted.web import resource

from kapiserver.apiextensions.server import CRDReadiness
from kapiserver.endpoints import static
from kapiserver.endpoints.deps import EndpointDeps
from kapiserver.registry.groups import APIGroupSet
from kapiserver.endpoints.groups_resource import APIGroupsResource
from kapiserver.machinery import errors


class CRDAPIDeps(NamedTuple):
    # the groups of Established CRDs (the apiextensions server keeps it current)
    groups: APIGroupSet
    endpoints: EndpointDeps
    # not ready while the CRDs stored at startup are still being installed
    readiness: CRDReadiness


class CRDResource(APIGroupsResource):
    def __init__(self, deps: CRDAPIDeps) -> None:
        super().__init__(deps.groups, deps.endpoints, static.not_found())
        self.readiness = deps.readiness
        self.unsynced = static.StatusEndpoint(errors.service_unavailable(
            "the server is not ready to serve custom resources yet: the CustomResourceDefinitions "
            "are still being installed"))

    def own(self, parts: list[str]) -> resource.Resource | None:
        owned = self.own_named_group(parts)
        if owned is not None:
            return owned
        if not self.readiness.synced and len(parts) >= 2 and parts[0] == "apis":
            return self.unsynced
        return None
