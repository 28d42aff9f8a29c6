"""The resource quota controller (kube-controller-manager's ``resourcequota-controller``).

It keeps each ResourceQuota's status true: ``status.hard`` is ``spec.hard``,
and ``status.used`` is what the namespace's objects use of each tracked
resource, counted by the evaluators admission charges with
(``quota/evaluators.py``).  A quota is recalculated in full when it is
created or its ``spec.hard`` changes (a status written by someone else
stands until the resync, as upstream's), every ``RESYNC_SECONDS`` (upstream's
``--resource-quota-sync-period``, 5 minutes), and when an object it tracks is
deleted or changes what it uses (a pod that finished, a Service that changed
type): admission charges creates as they happen, this controller gives back
what is gone.

Upstream watches every quotable resource; this one watches the resources
some quota tracks (one informer each, started when the first quota naming
them appears), which sees the same deletes for less memory.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from twisted.internet import task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.machinery import codec, errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.quota import resources as rl
from kapiserver.quota.evaluators import Evaluator, Registry
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.informer import Informer
from kapiserver.registry.options import ListOptions
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()
RESYNC_SECONDS = 300.0
CONFLICT_RETRY_SECONDS = 0.05


def _everything() -> ListOptions:
    return ListOptions(parse_label_selector(""), parse_field_selector(""))


class _Monitor:
    """Watches one tracked resource; tells the controller where usage went down."""

    def __init__(self, controller: "ResourceQuotaController", evaluator: Evaluator, store: Store) -> None:
        self.controller = controller
        self.evaluator = evaluator
        self.usage: dict[tuple[str, str], rl.ResourceList] = {}
        self.informer = Informer(store, self._on_event, controller.reactor, after_list=self._after_list)

    def _on_event(self, event_type: str, obj: dict) -> None:
        md = obj.get("metadata") or {}
        key = (md.get("namespace", ""), md.get("name", ""))
        if event_type == "DELETED":
            self.usage.pop(key, None)
            self.controller.replenish(self.evaluator, key[0])
            return
        usage = self.evaluator.usage(obj)
        before = self.usage.get(key)
        self.usage[key] = usage
        if event_type == "MODIFIED" and before is not None and not rl.equals(before, usage):
            self.controller.replenish(self.evaluator, key[0])

    def _after_list(self) -> None:
        """A re-list after a broken watch: what vanished meanwhile was deleted."""
        gone = set(self.usage) - set(self.informer.objects)
        for key in gone:
            self.usage.pop(key, None)
        for namespace in {ns for ns, _ in gone}:
            self.controller.replenish(self.evaluator, namespace)


class ResourceQuotaController:
    def __init__(self, quotas: Store, all_stores: Callable[[], Iterable[Store]], reactor: IReactorTime,
                 resync_seconds: float = RESYNC_SECONDS) -> None:
        self.quotas = quotas
        self.all_stores = all_stores
        self.reactor = reactor
        self.resync_seconds = resync_seconds
        self.registry = Registry()
        self.queue = ReconcileQueue("resourcequota", self.reconcile, reactor)
        self.informer = Informer(quotas, self._on_quota, reactor)
        self.monitors: dict[tuple[str, str], _Monitor] = {}
        self._spec_hard: dict[tuple[str, str], rl.ResourceList] = {}
        self._resync: Optional[task.LoopingCall] = None

    def start(self) -> None:
        self.informer.start()
        self._resync = task.LoopingCall(self.enqueue_all)
        self._resync.clock = self.reactor
        self._resync.start(self.resync_seconds, now=False)

    def stop(self) -> None:
        if self._resync is not None and self._resync.running:
            self._resync.stop()
        self.informer.stop()
        for monitor in self.monitors.values():
            monitor.informer.stop()
        self.queue.stop()

    # ------------------------------------------------------------ what to recalculate

    def enqueue_all(self) -> None:
        for key in list(self.informer.objects):
            self.queue.add(key)

    def _on_quota(self, event_type: str, quota: dict) -> None:
        md = quota.get("metadata") or {}
        key = (md.get("namespace", ""), md.get("name", ""))
        if event_type == "DELETED":
            self._spec_hard.pop(key, None)
            return
        spec_hard = rl.parse_list((quota.get("spec") or {}).get("hard"))
        before = self._spec_hard.get(key)
        self._spec_hard[key] = spec_hard
        self._ensure_monitors(spec_hard)
        # as upstream: a new quota is counted, an update only when spec.hard changed (a status
        # someone else wrote stands until the periodic resync)
        if event_type == "ADDED" or before is None or not rl.equals(before, spec_hard):
            self.queue.add(key)

    def replenish(self, evaluator: Evaluator, namespace: str) -> None:
        """Recalculate the namespace's quotas that track ``evaluator``'s resource."""
        for (ns, name), quota in list(self.informer.objects.items()):
            if ns == namespace and evaluator.matching_resources(((quota.get("status") or {}).get("hard") or {})):
                self.queue.add((ns, name))

    def _store_for(self, group: str, resource: str) -> Optional[Store]:
        for store in self.all_stores():
            rtype = store.rtype
            if rtype.group == group and rtype.plural == resource and rtype.namespaced:
                return store
        return None

    def _ensure_monitors(self, hard: Iterable[str]) -> None:
        for evaluator in self.registry.for_names(hard):
            gr = (evaluator.group, evaluator.resource)
            if gr in self.monitors:
                continue
            store = self._store_for(*gr)
            if store is None:  # not served (yet): a later event or the resync tries again
                continue
            monitor = self.monitors[gr] = _Monitor(self, evaluator, store)
            monitor.informer.start()

    # ------------------------------------------------------------ recalculation

    async def usage(self, quota: dict, hard_names: list[str]) -> rl.ResourceList:
        """upstream's CalculateUsage: the usage of every tracked resource with an evaluator."""
        namespace = quota["metadata"]["namespace"]
        total: rl.ResourceList = {}
        for evaluator in self.registry.for_names(hard_names):
            store = self._store_for(evaluator.group, evaluator.resource)
            if store is None:
                continue
            names = evaluator.matching_resources(hard_names)
            items = (await store.list(namespace, _everything()))["items"]
            total = rl.add(total, evaluator.usage_stats(items, quota, names))
        return rl.mask(total, hard_names)

    async def reconcile(self, key: Any) -> None:
        namespace, name = key
        if key not in self.informer.objects:
            return
        try:
            quota = await self.quotas.get(namespace, name)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        spec_hard = rl.parse_list((quota.get("spec") or {}).get("hard"))
        self._ensure_monitors(spec_hard)
        status = quota.get("status") or {}
        hard_names = list(spec_hard)
        used = rl.mask({**rl.parse_list(status.get("used")), **await self.usage(quota, hard_names)}, hard_names)
        dirty = (status.get("hard") is None or status.get("used") is None
                 or not rl.equals(spec_hard, rl.parse_list(status.get("hard")))
                 or not rl.equals(used, rl.parse_list(status.get("used"))))
        if not dirty:
            return
        desired = codec.copy_json(quota)
        desired["status"] = {"hard": rl.to_json(spec_hard), "used": rl.to_json(used)}
        try:
            await self.quotas.update(namespace, name, desired, "status", Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code == 404:
                return
            if e.code != 409:
                raise
            # admission charged the quota meanwhile: count again from its new state
            self.queue.add(key, delay=CONFLICT_RETRY_SECONDS)
