"""The namespace controller: empties a Terminating namespace, then lets it go.

A delete of a namespace whose ``spec.finalizers`` holds ``kubernetes`` only
marks it (phase Terminating).  This controller deletes every namespaced
object inside it, built-in and custom, and once nothing is left removes the
``kubernetes`` finalizer, which removes the namespace.
"""
from __future__ import annotations

from typing import Callable, Iterable

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.controllers.informer_controller import InformerController
from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.store import Store

log = Logger()
FINALIZER = "kubernetes"
# While objects with finalizers of their own remain, look again this often.
RECHECK_SECONDS = 1.0


class NamespaceController(InformerController):
    queue_name = "namespace-controller"

    def __init__(self, namespaces: Store, namespaced_stores: Callable[[], Iterable[Store]], reactor: IReactorTime) -> None:
        super().__init__(namespaces, reactor)
        self.namespaces = namespaces
        self.namespaced_stores = namespaced_stores

    def on_event(self, event_type: str, obj: dict) -> None:
        if event_type != "DELETED" and obj["metadata"].get("deletionTimestamp"):
            self.queue.add(obj["metadata"]["name"])

    def _stores(self) -> list[Store]:
        seen, stores = set(), []
        for store in self.namespaced_stores():
            rtype = store.rtype  # create-only reviews store nothing to empty
            if rtype.namespaced and "deletecollection" in rtype.verbs and rtype.storage_resource not in seen:
                seen.add(rtype.storage_resource)
                stores.append(store)
        return stores

    async def reconcile(self, name: str) -> None:
        try:
            ns = await self.namespaces.get("", name)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        if not ns["metadata"].get("deletionTimestamp"):
            return
        everything = ListOptions(parse_label_selector(""), parse_field_selector(""))
        remaining = 0
        for store in self._stores():
            await store.delete_collection(name, everything, DeleteOptions())
            left = await store.list(name, everything)
            remaining += len(left["items"])
        if remaining:
            log.info("namespace {name}: waiting for {n} objects with finalizers", name=name, n=remaining)
            self.queue.add(name, RECHECK_SECONDS)
            return

        def drop_finalizer(current):
            spec = current.setdefault("spec", {})
            spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
            return current
        try:
            await self.namespaces.guaranteed_update("", name, drop_finalizer, subresource="finalize",
                                                    ctx=Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code != 404:
                raise
