"""The shared shape of the kube and CRD links of the delegation chain.

Each link serves the API groups in its own :class:`APIGroupSet` (group and
version discovery, then REST endpoints) and hands every other request to the
next link, like kube-apiserver's DelegationTarget chain.
"""
from __future__ import annotations

from twisted.web import resource

from kapiserver.endpoints import discovery_endpoints, static
from kapiserver.endpoints.deps import EndpointDeps
from kapiserver.registry.groups import APIGroupSet
from kapiserver.endpoints.request_context import context_of
from kapiserver.endpoints.rest import RESTEndpoint


class DelegatingResource(resource.Resource):
    """Answers what it owns (``own``), delegates the rest."""

    def __init__(self, delegate: resource.Resource) -> None:
        super().__init__()
        self.delegate = delegate

    def own(self, parts: list[str]) -> resource.Resource | None:
        """The resource answering the request for path ``parts`` if this link owns it."""
        raise NotImplementedError

    def getChildWithDefault(self, path: bytes, request) -> resource.Resource:
        owned = self.own(context_of(request).require_info().parts)
        if owned is not None:
            return owned
        if self.delegate.isLeaf:  # the end of the chain answers everything itself
            return self.delegate
        return self.delegate.getChildWithDefault(path, request)

    def render(self, request):  # "/" itself
        return self.getChildWithDefault(b"", request).render(request)


class APIGroupsResource(DelegatingResource):
    def __init__(self, groups: APIGroupSet, endpoints: EndpointDeps, delegate: resource.Resource) -> None:
        super().__init__(delegate)
        self.groups = groups
        self.rest = RESTEndpoint(groups, endpoints)

    def own_named_group(self, parts: list[str]) -> resource.Resource | None:
        """``/apis/<group>[/<version>[/...]]`` for a group in this set."""
        if len(parts) < 2 or parts[0] != "apis" or not self.groups.has_group(parts[1]):
            return None
        name = parts[1]
        if len(parts) == 2:
            return discovery_endpoints.group(name, self.groups.types)
        if not self.groups.has_group_version(name, parts[2]):
            return static.not_found()
        if len(parts) == 3:
            return discovery_endpoints.resource_list(name, parts[2], self.groups.types)
        return self.rest
