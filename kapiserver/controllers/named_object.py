"""A controller that keeps one named object right (a ConfigMap the API server publishes).

The informer watches just that object (a field selector on namespace and
name) and every change to it queues one reconcile, as upstream's
single-object controllers do; ``reconcile`` reads the object (None when it
is missing) and hands it to ``sync``.
"""
from __future__ import annotations

from typing import Any, Hashable, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.controllers.informer_controller import InformerController
from kapiserver.machinery import errors
from kapiserver.registry.store import Store


class NamedObjectController(InformerController):
    """Subclasses say which object (``namespace``, ``name``) and what to do with it (``sync``)."""
    namespace: str
    name: str

    def __init__(self, store: Store, reactor: IReactorTime) -> None:
        super().__init__(store, reactor,
                         field_selector=f"metadata.namespace={self.namespace},metadata.name={self.name}")

    def start(self) -> None:
        super().start()
        self.queue.add(self.name)

    def on_event(self, event_type: str, obj: dict) -> None:
        self.queue.add(self.name)

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
