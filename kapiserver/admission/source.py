"""Admission configuration read from informers (memory), never from storage per request.

A :class:`ConfigurationSource` lists and watches one resource (webhook
configurations, policies, bindings) through its Store; what the plugin
derives from the objects (compiled webhooks, policies) is rebuilt on the
first request after a change.  Until the first list is in, requests wait for
it (up to a bound), then are refused, as upstream's ``not yet ready to handle
request``.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Optional, TypeVar

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from kapiserver.registry.informer import Informer


T = TypeVar("T")
READY_WAIT_SECONDS = 10.0


class ConfigurationSource(Generic[T]):
    def __init__(self, store: Callable[[], Any], reactor: IReactorTime, build: Callable[[list[dict]], T]) -> None:
        self._store = store
        self._reactor = reactor
        self._build = build
        self._informer: Optional[Informer] = None
        self._current: Optional[T] = None
        self._dirty = True
        self.generation = 0

    def start(self) -> None:
        self._informer = Informer(self._store(), self._changed, self._reactor, after_list=self._listed)
        self._informer.start()

    def stop(self) -> None:
        if self._informer is not None:
            self._informer.stop()

    def _changed(self, event_type: str, obj: dict) -> None:
        self._dirty = True
        self.generation += 1

    def _listed(self) -> None:
        self._dirty = True
        self.generation += 1

    def invalidate(self) -> None:
        """Rebuild on the next request though no object changed (what the build reads did)."""
        self._dirty = True
        self.generation += 1

    @property
    def started(self) -> bool:
        """Whether the plugin was started (a chain used without a running server never is)."""
        return self._informer is not None

    @property
    def synced(self) -> bool:
        return self._informer is not None and self._informer.synced.called

    async def wait_synced(self) -> bool:
        """Whether the first list is in (waiting for it up to READY_WAIT_SECONDS)."""
        if self.synced:
            return True
        if self._informer is None:
            return False
        d: defer.Deferred = defer.Deferred()
        def answer(synced: bool) -> None:
            if not d.called:
                d.callback(synced)

        def listed(result: object) -> object:
            answer(True)
            return result

        self._informer.synced.addBoth(listed)
        timer = self._reactor.callLater(READY_WAIT_SECONDS, answer, False)
        ready = await d
        if timer.active():
            timer.cancel()
        return bool(ready)

    def objects(self) -> list[dict]:
        """The current objects, sorted by name (upstream's order of configurations)."""
        if self._informer is None:
            return []
        return [obj for _, obj in sorted(self._informer.objects.items(), key=lambda kv: kv[0])]

    def current(self) -> T:
        if self._dirty or self._current is None:
            self._current = self._build(self.objects())
            self._dirty = False
        return self._current
