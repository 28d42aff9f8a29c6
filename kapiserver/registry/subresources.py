"""Subresources beyond status and scale: ``pods/eviction``, ``pods/log``, ``namespaces/finalize``...

A :class:`Subresource` is part of a resource type's description, so discovery,
OpenAPI and routing read it like everything else.  It is served one of three
ways, as upstream's REST storages are:

* **update** (neither ``create`` nor ``connect``): get/update/patch of the
  parent object through its Store with the subresource's name; the kind's
  strategy (``prepare_for_subresource_update``) decides what may change
  (``pods/ephemeralcontainers``, ``namespaces/finalize``);
* **create**: a POSTed object that names the parent (``pods/eviction``,
  ``pods/binding``); ``create(request)`` returns the code and the answer;
* **connect**: a stream to a kubelet or a backend (``pods/log``, ``exec``,
  ``proxy``...); ``connect(request)`` returns where the stream goes (a
  :class:`Location`, upstream's ``ResourceLocation`` URL and transport), the
  answer's bytes when no backend is needed, or raises.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, NamedTuple, Optional, Protocol, Union

from kapiserver.registry.context import Context
from kapiserver.registry.options import DeleteOptions, ListOptions


class ObjectStore(Protocol):
    """The verbs a subresource's handler calls on a Store in the process (no HTTP): the
    generic :class:`~kapiserver.registry.store.Store` has them.  Declared here, below the
    Store, because a kind declares its subresources and the Store serves the kind."""

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict: ...

    async def list(self, namespace: str, opts: ListOptions, warnings: Optional[list[str]] = None) -> dict: ...

    async def guaranteed_update(self, namespace: str, name: str,
                                mutate: Callable[[Optional[dict]], dict | Awaitable[dict]],
                                subresource: str = "", ctx: Optional[Context] = None,
                                precondition_rv: str = "", create_if_missing: bool = False,
                                force_allow_create: bool = False) -> tuple[dict, bool]: ...

    async def delete(self, namespace: str, name: str, opts: DeleteOptions,
                     ctx: Optional[Context] = None, admission_name: Optional[str] = None) -> tuple[dict, bool]: ...


# The Store of any served resource: ``stores(group, version, plural)``.
StoreLookup = Callable[[str, str, str], ObjectStore]


@dataclass(eq=False, repr=False)
class SubresourceRequest:
    """One request to a subresource, without HTTP: what the registry code needs."""

    store: ObjectStore  # the parent resource's Store
    namespace: str
    name: str
    ctx: Context
    stores: StoreLookup
    body: Any = None  # the decoded request body (create)
    # query parameters (connect options: container, follow, command...)
    options: dict[str, list[str]] = field(default_factory=dict)
    verb: str = ""
    path: str = ""  # connect: what follows the subresource in the URL (proxy paths)

    def option(self, name: str, default: str = "") -> str:
        values = self.options.get(name)
        return values[0] if values else default


class Connected(NamedTuple):
    """What a connect subresource answers with."""

    body: bytes
    content_type: str = "text/plain"
    code: int = 200


class Backend(enum.Enum):
    """Whose transport carries a stream (upstream picks the kubelet's or the proxy transport)."""

    KUBELET = "kubelet"  # the kubelet of ``Location.node``: its address, port and credentials
    DIRECT = "direct"    # ``Location.host``:``port`` itself (a pod or an endpoint), no client certificate


class StreamMode(enum.Enum):
    """How the endpoint serves a location (upstream's LocationStreamer or UpgradeAwareHandler)."""

    STREAM = "stream"    # GET the location and stream its body to the client (pods/log)
    UPGRADE = "upgrade"  # an upgrade (SPDY or WebSocket) is required: exec, attach, portforward
    PROXY = "proxy"      # any method, passed through; upgrades too (pods/, services/, nodes/proxy)


class Location(NamedTuple):
    """Where a connect subresource's stream goes: a path on a kubelet or on a pod/endpoint."""

    backend: Backend
    mode: StreamMode
    path: str
    query: tuple[tuple[str, str], ...] = ()
    node: str = ""        # KUBELET: the node whose kubelet answers
    # DIRECT: http or https.  KUBELET: "" = the kubelet's (https); nodes/proxy may name another
    scheme: str = ""
    host: str = ""        # DIRECT: the address
    # DIRECT: the port (0 = the scheme's default).  KUBELET: 0 = the kubelet's port, reached with
    # the kubelet client's credentials; another port of the node's address is reached without them
    # (upstream's proxy transport), unless it is the kubelet's port
    port: int = 0
    # what a failed backend answer is turned into (upstream's GenericHttpResponseChecker)
    resource: str = ""    # e.g. "pods/log"
    name: str = ""


ConnectResult = Union[Connected, Location]


class Subresource(NamedTuple):
    """A subresource; ``kind`` (with ``group``/``version`` when it belongs to another
    group, e.g. policy/v1 Eviction) is the kind discovery lists for it ('' = the parent's)."""

    name: str
    verbs: tuple[str, ...]
    kind: str = ""
    group: str = ""
    version: str = ""
    create: Optional[Callable[[SubresourceRequest], Awaitable[tuple[int, dict]]]] = None
    connect: Optional[Callable[[SubresourceRequest], Awaitable[ConnectResult]]] = None
    # the schema (definition name) of the body a create takes (OpenAPI)
    body_schema: str = ""
    # a proxy: besides ``verbs``, OPTIONS is routed too (upstream's proxyMethods), as verb "options"
    proxy: bool = False
    description: str = ""
