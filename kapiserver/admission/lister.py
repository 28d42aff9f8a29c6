"""What a plugin reads of other objects: an informer's copy, or a live list until it has synced
(upstream's plugins wait for their informers; reading live keeps the first requests right)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.admission import AdmissionPlugin


class Lister:
    """Every object of one cluster-scoped or namespaced resource, through an informer."""

    def __init__(self, store: Callable[[], Any], reactor: IReactorTime) -> None:
        self._store = store  # lazily: the Store exists once the server has built it
        self.reactor = reactor
        self._informer: Any = None

    def start(self) -> None:
        from kapiserver.registry.informer import Informer
        self._informer = Informer(self._store(), lambda event_type, obj: None, self.reactor)
        self._informer.start()

    def stop(self) -> None:
        if self._informer is not None:
            self._informer.stop()

    async def list(self) -> list[dict]:
        if self._informer is not None and self._informer.synced.called:
            return list(self._informer.objects.values())
        from kapiserver.registry.options import ListOptions
        listed = await self._store().list("", ListOptions(parse_label_selector(""), parse_field_selector("")))
        return list(listed["items"])

    async def get(self, name: str, namespace: str = "") -> Optional[dict]:
        if self._informer is not None and self._informer.synced.called:
            found = self._informer.objects.get((namespace, name))
            if found is not None:
                return found
        return await self.get_live(name, namespace)

    async def get_live(self, name: str, namespace: str = "") -> Optional[dict]:
        """The object as stored now (not the informer's copy); None if there is none."""
        try:
            return await self._store().get(namespace, name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise


class ListingPlugin(AdmissionPlugin):
    """A plugin that reads other objects through listers, which start and stop with it."""

    listers: tuple[Lister, ...] = ()

    async def start(self) -> None:
        for lister in self.listers:
            lister.start()

    async def stop(self) -> None:
        for lister in self.listers:
            lister.stop()
