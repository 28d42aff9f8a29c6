"""The last API link of the delegation chain (apiextensions-apiserver).

It serves the groups of Established CRDs.  Until the CRDs stored at startup
are all installed, a request that may belong to one answers 503 rather than a
misleading 404; past it, everything unmatched is a 404 Status.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.web import resource

from kapiserver.endpoints import static
from kapiserver.endpoints.groups import APIGroupSet
from kapiserver.endpoints.groups_resource import APIGroupsResource
from kapiserver.machinery import errors


class CRDResource(APIGroupsResource):
    def __init__(self, groups: APIGroupSet, state: Any, synced: Callable[[], bool]) -> None:
        super().__init__(groups, state, static.not_found())
        self.synced = synced
        self.unsynced = static.StatusEndpoint(errors.service_unavailable(
            "the server is not ready to serve custom resources yet: the CustomResourceDefinitions "
            "are still being installed"))

    def own(self, request) -> resource.Resource | None:
        parts = request.request_info.parts
        owned = self.own_named_group(parts)
        if owned is not None:
            return owned
        if not self.synced() and len(parts) >= 2 and parts[0] == "apis":
            return self.unsynced
        return None
