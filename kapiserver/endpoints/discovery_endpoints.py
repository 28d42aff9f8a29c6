"""Discovery endpoints over sets of served types (documents built by endpoints.discovery)."""
from __future__ import annotations

from typing import Callable

from kapiserver.endpoints import discovery
from kapiserver.endpoints.static import DocumentEndpoint
from kapiserver.registry.resource_type import ResourceType

AGGREGATED_SHAPES = (("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2"),
                     ("APIGroupDiscoveryList", "apidiscovery.k8s.io", "v2beta1"))

TypesFn = Callable[[], list[ResourceType]]


def _aggregated_or(types: TypesFn, legacy: bool, plain: Callable[[object], dict]):
    def produce(request, target):
        if target.as_kind == "APIGroupDiscoveryList":
            return discovery.aggregated_discovery(types(), legacy=legacy, version=target.version)
        return plain(request)
    return produce


def _server_address(request) -> str:
    host = request.getHost()
    return f"{host.host}:{host.port}"


def core_root(types: TypesFn) -> DocumentEndpoint:
    """``/api``: APIVersions, or the aggregated discovery of the core group."""
    core = lambda: [t for t in types() if t.group == ""]  # noqa: E731
    return DocumentEndpoint(_aggregated_or(core, True, lambda request: discovery.api_versions(_server_address(request))),
                            AGGREGATED_SHAPES)


def groups_root(types: TypesFn) -> DocumentEndpoint:
    """``/apis``: APIGroupList, or the aggregated discovery of every named group."""
    named = lambda: [t for t in types() if t.group != ""]  # noqa: E731
    return DocumentEndpoint(_aggregated_or(named, False, lambda request: discovery.api_group_list(named())),
                            AGGREGATED_SHAPES)


def group(name: str, types: TypesFn) -> DocumentEndpoint:
    return DocumentEndpoint(lambda request, target: discovery.api_group(name, types()))


def resource_list(group_name: str, version: str, types: TypesFn) -> DocumentEndpoint:
    return DocumentEndpoint(lambda request, target: discovery.api_resource_list(group_name, version, types()))
