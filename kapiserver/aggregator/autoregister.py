"""Local APIServices for what this server serves (upstream's autoregister controller).

Runs on every server, as upstream's.  Two sources say what should exist:

* the built-in group versions, registered once at start
  (label ``kube-aggregator.kubernetes.io/automanaged: onstart``) with the
  priorities of ``priorities.py``;
* the served versions of every CRD (``crd_registration.py``), kept in step
  continuously (``automanaged: "true"``).

Upstream's sync table decides, per APIService name:

===================================  ===============  ================  ===============
current \\ desired                    absent           sync on start     sync always
===================================  ===============  ================  ===============
absent                               -                create once       create
not automanaged (someone else's)     -                -                 -
onstart, absent at start             -                -                 -
onstart, present at start            delete once      update once       update once
"true"                               delete           update once       update
===================================  ===============  ================  ===============
"""
from __future__ import annotations

from typing import Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.apiregistration import apiservices
from kapiserver.machinery import errors
from kapiserver.registry.context import Context
from kapiserver.machinery.meta import without_metadata
from kapiserver.registry.informer import Informer
from kapiserver.registry.options import DeleteOptions
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()
AUTOMANAGED_LABEL = "kube-aggregator.kubernetes.io/automanaged"
MANAGE_ON_START = "onstart"
MANAGE_CONTINUOUSLY = "true"
FIELD_MANAGER = "kube-apiserver"


def local_apiservice(group: str, version: str, group_priority: int, version_priority: int) -> dict:
    return {"apiVersion": f"{apiservices.GROUP}/{apiservices.VERSION}", "kind": "APIService",
            "metadata": {"name": apiservices.name_for(group, version)},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority,
                     "versionPriority": version_priority}}


def _managed(obj: Optional[dict]) -> str:
    if obj is None:
        return ""
    return ((obj.get("metadata") or {}).get("labels") or {}).get(AUTOMANAGED_LABEL, "")


class AutoRegisterController:
    def __init__(self, store: Store, reactor: IReactorTime) -> None:
        self.store = store
        self.desired: dict[str, dict] = {}
        self.synced_once: set[str] = set()
        self.at_start: Optional[set[str]] = None  # onstart APIServices that existed when we started
        self.queue = ReconcileQueue("autoregister", self.reconcile, reactor)
        # (it writes what it wants, read from ``desired``, never what it read)
        self.informer = Informer(store, self._on_event, reactor, after_list=self._after_list,
                                 keep=without_metadata)

    # ------------------------------------------------------------ what should exist

    def add_on_start(self, apiservice: dict) -> None:
        self._add(apiservice, MANAGE_ON_START)

    def add_always(self, apiservice: dict) -> None:
        self._add(apiservice, MANAGE_CONTINUOUSLY)

    def _add(self, apiservice: dict, how: str) -> None:
        apiservice["metadata"].setdefault("labels", {})[AUTOMANAGED_LABEL] = how
        name = apiservice["metadata"]["name"]
        self.desired[name] = apiservice
        self.queue.add(name)

    def remove(self, name: str) -> None:
        if self.desired.pop(name, None) is not None:
            self.queue.add(name)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()
        self.queue.stop()

    @property
    def synced(self):
        return self.informer.synced

    def _on_event(self, event_type: str, obj: dict) -> None:
        if self.at_start is not None:
            self.queue.add(obj["metadata"]["name"])

    def _after_list(self) -> None:
        if self.at_start is None:
            self.at_start = {name for (_, name), obj in self.informer.objects.items()
                             if _managed(obj) == MANAGE_ON_START}
        for _, name in list(self.informer.objects):
            self.queue.add(name)
        for name in list(self.desired):
            self.queue.add(name)

    # ------------------------------------------------------------ sync

    async def reconcile(self, name: str) -> None:
        if self.at_start is None:
            return  # the first list is not in yet; _after_list queues everything
        desired = self.desired.get(name)
        current = self.informer.objects.get(("", name))
        has_synced = name in self.synced_once
        await self._check(name, desired, current, has_synced)
        self.synced_once.add(name)

    async def _check(self, name: str, desired: Optional[dict], current: Optional[dict], has_synced: bool) -> None:
        if current is None and desired is None:
            return
        if _managed(desired) == MANAGE_ON_START and has_synced:
            return
        if current is None:
            try:
                await self.store.create("", _fresh(desired), ctx=Context(field_manager=FIELD_MANAGER))
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
            return
        how = _managed(current)
        if how not in (MANAGE_ON_START, MANAGE_CONTINUOUSLY):
            return  # not ours: someone else manages it
        assert self.at_start is not None
        if how == MANAGE_ON_START and (name not in self.at_start or has_synced):
            return
        if desired is None:
            try:
                await self.store.delete("", name, DeleteOptions(precondition_uid=current["metadata"].get("uid", "")))
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    raise
            return
        if current.get("spec") == desired.get("spec") and _managed(current) == _managed(desired):
            return
        want = desired

        def mutate(obj: Optional[dict]) -> dict:
            if obj is None:
                raise errors.not_found(apiservices.PLURAL, apiservices.GROUP, name)
            obj["spec"] = dict(want["spec"])
            obj["metadata"].setdefault("labels", {})[AUTOMANAGED_LABEL] = _managed(want)
            return obj
        try:
            await self.store.guaranteed_update("", name, mutate, ctx=Context(field_manager=FIELD_MANAGER))
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise


def _fresh(apiservice: Optional[dict]) -> dict:
    assert apiservice is not None
    return {**apiservice, "metadata": {**apiservice["metadata"],
                                       "labels": dict(apiservice["metadata"].get("labels") or {})}}
