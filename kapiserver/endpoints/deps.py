"""What the REST endpoints of a delegation link need from the server, and nothing more."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.endpoints.streaming.interfaces import ConnectStreams
from kapiserver.registry.resource_type import ResourceType

WatchCounter = Callable[[ResourceType, int], None]


class WatchRegistry:
    """The open watches, so shutdown can end each one cleanly; ``counted(rtype, +1/-1)`` sees each change."""

    def __init__(self, counted: WatchCounter = lambda rtype, delta: None) -> None:
        self.watches: set = set()
        self.counted = counted
        # set by stop_all: a watch that starts afterwards (on a connection still draining)
        # ends right after its start, cleanly, like the others
        self.stopped = False

    def register(self, watch: Any) -> Callable[[], None]:
        self.watches.add(watch)
        self.counted(watch.rtype, 1)
        if self.stopped:  # once the handler has sent the headers
            watch.reactor.callLater(0, watch.stop)

        def unregister() -> None:
            if watch in self.watches:
                self.watches.discard(watch)
                self.counted(watch.rtype, -1)
        return unregister

    def stop_all(self) -> None:
        self.stopped = True
        for watch in list(self.watches):
            watch.stop()

    def stop_serving(self, rtypes: list[ResourceType]) -> None:
        """End the watches of resource types no longer served as they were (a CRD deleted or
        changed), as upstream tears down a custom resource's storage: clients watch again."""
        gone = {id(rtype) for rtype in rtypes}
        for watch in [w for w in self.watches if id(w.rtype) in gone]:
            watch.stop()


class EndpointDeps(NamedTuple):
    reactor: IReactorTime
    # seconds between BOOKMARK events on watches that asked for them
    bookmark_interval: float
    # ``$ref`` -> schema, for strict field validation and strategic merge patch of built-in kinds
    schema_resolver: Callable[[str], dict]
    # the open watches (the server's, which counts them for /metrics)
    watches: WatchRegistry
    # any served resource's Store, ``stores(group, version, plural)``: subresources that touch
    # other kinds (an eviction reads PodDisruptionBudgets)
    stores: Optional[Callable[[str, str, str], Any]] = None
    # serves connect subresources that reach kubelets, pods and endpoints (logs, exec, proxy...)
    streams: Optional[ConnectStreams] = None
