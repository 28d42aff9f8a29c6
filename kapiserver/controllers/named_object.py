"""A controller that keeps one named object right (a ConfigMap the API server publishes).

The informer watches just that object (a field selector on namespace and
name) and every change to it queues one reconcile, as upstream's
single-object controllers do; ``reconcile`` reads the object (None when it
is missing) and hands it to ``sync``.
"""
from __future__ import annotations

from typing import Any, Hashable, Optional

from kapiserver.controllers.informer import Informer
from kapiserver.controllers.queue import ReconcileQueue
from kapiserver.machinery import errors
from kapiserver.registry.store import Store


class NamedObjectController:
    """Subclasses say which object (``namespace``, ``name``) and what to do with it (``sync``)."""
    namespace: str
    name: str
    queue_name: str

    def __init__(self, store: Store, reactor: Any) -> None:
        self.store = store
        self.reactor = reactor
        self.queue = ReconcileQueue(self.queue_name, self.reconcile, reactor)
        self.informer = Informer(store, lambda _type, _obj: self.queue.add(self.name), reactor,
                                 field_selector=f"metadata.namespace={self.namespace},metadata.name={self.name}")

    def start(self) -> None:
        self.informer.start()
        self.queue.add(self.name)

    def stop(self) -> None:
        self.informer.stop()
        self.queue.stop()

    async def reconcile(self, key: Hashable) -> None:
        try:
            current: Optional[dict] = await self.store.get(self.namespace, self.name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            current = None
        await self.sync(current)

    async def sync(self, current: Optional[dict]) -> None:
        """Bring the object (None: missing) to what it should be."""
        raise NotImplementedError
