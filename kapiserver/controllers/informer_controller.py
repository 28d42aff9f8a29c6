"""The shape most controllers here share: one informer feeding one reconcile queue.

A subclass names its queue (``queue_name``, as upstream's workqueue names),
says which events queue which keys (``on_event``) and does the work
(``reconcile``); starting starts the informer, stopping stops both.
"""
from __future__ import annotations

from typing import Any, Generic

from twisted.internet.interfaces import IReactorTime

from kapiserver.registry.informer import Informer
from kapiserver.registry.queue import Key, ReconcileQueue
from kapiserver.registry.store import Store


class InformerController(Generic[Key]):
    """A controller whose informer queues keys (of type ``Key``) that it reconciles."""

    queue_name: str = ""

    def __init__(self, store: Store, reactor: IReactorTime, **informer_options: Any) -> None:
        self.store = store
        self.reactor = reactor
        self.queue = ReconcileQueue(self.queue_name, self.reconcile, reactor)
        self.informer = Informer(store, self.on_event, reactor, **informer_options)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()
        self.queue.stop()

    def on_event(self, event_type: str, obj: dict) -> None:
        """An informer event: queue the keys it concerns."""
        raise NotImplementedError

    async def reconcile(self, key: Key) -> None:
        raise NotImplementedError
