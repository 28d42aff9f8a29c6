"""The garbage collector: deletes objects whose owners are gone (``metadata.ownerReferences``).

Upstream's garbage collector, in process.  One metadata-only informer per
served resource (built-in and custom alike; CRD kinds are picked up when the
served types change) feeds a dependency graph keyed by uid: every object's
owner references, and for every owner uid the set of its dependents.  Work
goes through one keyed queue:

* ``("delete", uid)``: is this object garbage?  Each owner is looked up by
  apiVersion/kind/name (in the dependent's namespace when the owner kind is
  namespaced) and counts as present only with the same uid.  An object with
  no present owner left is deleted (with its own orphan/foreground finalizer
  honoured, otherwise in the background, so chains cascade); one that still
  has an owner only loses the references to absent owners and to owners
  deleting in the foreground.  For an object deleting in the foreground
  (``foregroundDeletion`` finalizer) it removes the finalizer once no
  dependent with ``blockOwnerDeletion: true`` is left.
* ``("orphan", uid)``: an object deleting with the ``orphan`` finalizer: its
  reference is removed from every dependent, then the finalizer.

A cluster-scoped object naming a namespaced owner kind is never collected
(upstream treats that reference as unresolvable); an owner kind that is not
served is retried with backoff, as upstream retries an unknown mapping.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Callable, Hashable, Optional

from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.machinery import errors
from kapiserver.machinery.validation import FOREGROUND_FINALIZER, ORPHAN_FINALIZER
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.groups import ServedResources
from kapiserver.registry.informer import Informer
from kapiserver.registry.options import DeleteOptions
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()

# Storage resources the collector does not watch (upstream ignores events too).
IGNORED_RESOURCES = frozenset({"events"})
REQUIRED_VERBS = frozenset({"list", "watch", "delete"})
# How often the served types are checked for new or removed kinds (CRDs).
TYPES_POLL_SECONDS = 0.5
# Reconciles running at once (each is a few Store calls).
MAX_CONCURRENT = 8
# While some informer has not listed yet, decisions wait (a dependent not yet seen
# could be missed); an informer that cannot list for this long stops holding them.
SYNC_GRACE_SECONDS = 30.0
HOLD_RETRY_SECONDS = 0.1

DELETE = "delete"
ORPHAN = "orphan"
SOLID, DANGLING, WAITING = "solid", "dangling", "waiting"


class _Unresolvable(Exception):
    """An owner reference whose apiVersion/kind is not served (retried later)."""


class _Replaced(Exception):
    """The object at that name is another one now (another uid)."""


@dataclass(eq=False, repr=False)
class _Node:
    """What the graph keeps of one object."""

    uid: str
    resource: str
    namespace: str
    name: str
    owners: list = field(default_factory=list)
    deleting: bool = False
    finalizers: tuple = ()

    @property
    def owner_uids(self) -> set[str]:
        return {ref.get("uid") for ref in self.owners if ref.get("uid")}

    @property
    def foreground(self) -> bool:
        return self.deleting and FOREGROUND_FINALIZER in self.finalizers

    @property
    def orphaning(self) -> bool:
        return self.deleting and ORPHAN_FINALIZER in self.finalizers

    def blocks(self, owner_uid: str) -> bool:
        return any(ref.get("uid") == owner_uid and ref.get("blockOwnerDeletion") for ref in self.owners)


def _uid_only(obj: dict) -> dict:
    """What the graph's informers keep of an object: the end of a list compares uids only
    (the graph's nodes hold what collecting reads)."""
    return {"metadata": {"uid": (obj.get("metadata") or {}).get("uid")}}


class _GraphInformer(Informer):
    """A metadata-only informer (the stored values' metadata, the rest never decoded) that
    reports the end of every (re)list.

    After a relist, objects the graph still holds but the list did not return
    were deleted while the watch was down: ``on_listed`` lets the collector
    treat them as deleted.
    """

    def __init__(self, store: Store, on_event: Callable[[str, dict], None], reactor: IReactorTime,
                 on_listed: Callable[["_GraphInformer"], None]) -> None:
        super().__init__(store, on_event, reactor, metadata_only=True, keep=_uid_only)
        self.on_listed = on_listed
        self.listed_once = False

    def start(self) -> None:
        if self._stopped:
            return
        self.synced = defer.Deferred()  # fired by the base class once this list is delivered
        self.synced.addCallback(lambda _: self._listed())
        super().start()

    def _listed(self) -> None:
        self.listed_once = True
        self.on_listed(self)


class GarbageCollector:
    def __init__(self, served: ServedResources, reactor: IReactorTime) -> None:
        """It collects the objects of every Store ``served`` lists, following the CRDs as they come and go."""
        self.served = served
        self.reactor = reactor
        self.nodes: dict[str, _Node] = {}
        # storage resource -> the uids of its nodes (in the order they came, as in ``nodes``): the end
        # of a list looks at its own resource's, not over the whole graph for each of the ~50 informers
        self._uids_of: dict[str, dict[str, None]] = {}
        self.dependents: dict[str, set[str]] = {}  # owner uid -> dependent uids
        self.informers: dict[str, _GraphInformer] = {}  # storage resource -> informer
        self._unsynced: dict[str, float] = {}  # storage resource -> when its informer started
        self._suspects: set[str] = set()  # dependents to check once every informer has listed
        self._kinds: dict[tuple[str, str], list[Store]] = {}
        self._generation: Optional[Hashable] = None
        self._limit = defer.DeferredSemaphore(MAX_CONCURRENT)
        self.queue = ReconcileQueue("garbage-collector", self._reconcile, reactor)
        self._types_poll = task.LoopingCall(self._sync_types)
        self._types_poll.clock = reactor

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._types_poll.start(TYPES_POLL_SECONDS, now=True).addErrback(
            lambda f: log.failure("garbage collector: following the served types failed", f))

    def stop(self) -> None:
        if self._types_poll.running:
            self._types_poll.stop()
        for informer in self.informers.values():
            informer.stop()
        self.informers.clear()
        self.queue.stop()

    # ------------------------------------------------------------ served types

    def _sync_types(self) -> None:
        """Start an informer for every new resource, stop those of resources no longer served."""
        generation = self.served.generation
        if generation == self._generation:
            return
        self._generation = generation
        current: dict[str, list[Store]] = {}
        kinds: dict[tuple[str, str], list[Store]] = {}
        for store in self.served.stores():
            rtype = store.rtype
            kinds.setdefault((rtype.group, rtype.kind), []).append(store)
            if rtype.storage_resource in IGNORED_RESOURCES or not REQUIRED_VERBS <= set(rtype.verbs):
                continue
            current.setdefault(rtype.storage_resource, []).append(store)
        self._kinds = kinds
        for resource in list(self.informers):
            informer = self.informers[resource]
            if resource in current and any(s is informer.store for s in current[resource]):
                continue
            informer.stop()
            del self.informers[resource]
            self._unsynced.pop(resource, None)
            if resource not in current:  # no longer served: its objects are gone for the graph
                for uid in list(self._uids_of.get(resource, ())):
                    self._remove(uid)
        for resource, stores in current.items():
            if resource in self.informers:
                continue
            informer = _GraphInformer(stores[0], functools.partial(self._on_event, resource),
                                      self.reactor, self._on_listed)
            self.informers[resource] = informer
            self._unsynced[resource] = time.monotonic()
            informer.start()

    def _owner_store(self, api_version: str, kind: str) -> Store:
        group, _, version = api_version.rpartition("/")
        stores = self._kinds.get((group, kind))
        if not stores:
            raise _Unresolvable(f"no served kind {kind} in {api_version!r}")
        # the uid is the same in every version: any served version of the kind will do
        return next((s for s in stores if s.rtype.version == version), stores[0])

    def _on_listed(self, informer: _GraphInformer) -> None:
        resource = informer.store.rtype.storage_resource
        if self.informers.get(resource) is not informer:
            return
        present = {(obj.get("metadata") or {}).get("uid") for obj in informer.objects.values()}
        for uid in [u for u in self._uids_of.get(resource, ()) if u not in present]:
            self._remove(uid)
        self._unsynced.pop(resource, None)
        if not self._unsynced:
            suspects, self._suspects = self._suspects, set()
            for uid in suspects:
                node = self.nodes.get(uid)
                if node is not None and self._suspicious(node):
                    self.queue.add((DELETE, uid))

    def _holding(self) -> bool:
        """Whether decisions wait for an informer's first list."""
        now = time.monotonic()
        for resource, since in list(self._unsynced.items()):
            if now - since > SYNC_GRACE_SECONDS:
                log.warn("garbage collector: {resource} could not be listed for {s:.0f}s; going on without it",
                         resource=resource, s=now - since)
                del self._unsynced[resource]
        return bool(self._unsynced)

    # ------------------------------------------------------------ the graph

    def _on_event(self, resource: str, event_type: str, obj: dict) -> None:
        md = obj.get("metadata") or {}
        uid = md.get("uid")
        if not uid:
            return
        if event_type == "DELETED":
            self._remove(uid)
            return
        node = self.nodes.get(uid)
        if node is None:
            node = self.nodes[uid] = _Node(uid, resource, md.get("namespace", ""), md.get("name", ""))
            self._uids_of.setdefault(resource, {})[uid] = None
            was_foreground, old_owners = False, set()
        else:
            was_foreground, old_owners = node.foreground, node.owner_uids
        node.owners = [ref for ref in md.get("ownerReferences") or [] if isinstance(ref, dict)]
        node.deleting = bool(md.get("deletionTimestamp"))
        node.finalizers = tuple(md.get("finalizers") or ())
        new_owners = node.owner_uids
        for owner in old_owners - new_owners:
            self._unlink(owner, uid)
        for owner in new_owners - old_owners:
            self.dependents.setdefault(owner, set()).add(uid)
        for owner in old_owners | new_owners:
            owner_node = self.nodes.get(owner)
            if owner_node is not None and owner_node.foreground:
                self.queue.add((DELETE, owner))  # a blocking reference may have come or gone
        if new_owners - old_owners and self._suspicious(node):
            if self._unsynced:
                self._suspects.add(uid)
            else:
                self.queue.add((DELETE, uid))
        if node.orphaning:
            self.queue.add((ORPHAN, uid))
        if node.foreground:
            self.queue.add((DELETE, uid))
            if not was_foreground:
                for dependent in self.dependents.get(uid, ()):
                    self.queue.add((DELETE, dependent))

    def _suspicious(self, node: _Node) -> bool:
        """Whether some owner of ``node`` may be absent or deleting (worth a real look-up)."""
        for owner in node.owner_uids:
            owner_node = self.nodes.get(owner)
            if owner_node is None or owner_node.foreground:
                return True
            if owner_node.namespace and owner_node.namespace != node.namespace:
                return True  # a namespaced owner elsewhere counts as absent
        return False

    def _unlink(self, owner: str, dependent: str) -> None:
        deps = self.dependents.get(owner)
        if deps is not None:
            deps.discard(dependent)
            if not deps:
                del self.dependents[owner]

    def _remove(self, uid: str) -> None:
        """An object is gone: its dependents are checked, a foreground owner re-checked."""
        node = self.nodes.pop(uid, None)
        if node is None:
            return
        self._uids_of[node.resource].pop(uid, None)
        for owner in node.owner_uids:
            self._unlink(owner, uid)
            owner_node = self.nodes.get(owner)
            if owner_node is not None and owner_node.foreground:
                self.queue.add((DELETE, owner))
        for dependent in self.dependents.get(uid, ()):
            self.queue.add((DELETE, dependent))

    # ------------------------------------------------------------ work

    async def _reconcile(self, key: tuple[str, str]) -> None:
        if self._holding():
            self.queue.add(key, HOLD_RETRY_SECONDS)
            return
        await self._limit.run(lambda: defer.Deferred.fromCoroutine(self._process(key)))

    async def _process(self, key: tuple[str, str]) -> None:
        action, uid = key
        node = self.nodes.get(uid)
        informer = self.informers.get(node.resource) if node is not None else None
        if node is None or informer is None:
            return
        store = informer.store
        try:
            latest = await store.get(node.namespace, node.name)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        if latest["metadata"].get("uid") != uid:
            return
        try:
            if action == ORPHAN:
                await self._orphan(store, node, latest)
            else:
                await self._attempt_to_delete(store, node, latest)
        except _Replaced:
            return
        except _Unresolvable as e:
            raise RuntimeError(f"{node.resource} {node.namespace}/{node.name}: {e}") from None

    async def _attempt_to_delete(self, store: Store, node: _Node, latest: dict) -> None:
        md = latest["metadata"]
        finalizers = md.get("finalizers") or []
        if md.get("deletionTimestamp"):
            if FOREGROUND_FINALIZER in finalizers:
                await self._finish_foreground(store, node)
            return
        refs = md.get("ownerReferences") or []
        if not refs:
            return
        states: dict[str, list[dict]] = {SOLID: [], DANGLING: [], WAITING: []}
        for ref in refs:
            state = await self._owner_state(ref, node.namespace)
            if state is None:
                log.info("garbage collector: cluster-scoped {name} names a namespaced owner {kind}; not collected",
                         name=node.name, kind=ref.get("kind"))
                return
            states[state].append(ref)
        if states[SOLID]:
            gone = {uid for ref in states[DANGLING] + states[WAITING] if isinstance(uid := ref.get("uid"), str)}
            if gone:
                await self._drop_owner_refs(store, node, gone)
            return
        if states[WAITING] and self.dependents.get(node.uid):
            if any(self.nodes[d].foreground for d in self.dependents[node.uid] if d in self.nodes):
                # a cycle of foreground deletions would wait forever: stop blocking
                await self._unblock_owners(store, node)
            policy = "Foreground"
        elif ORPHAN_FINALIZER in finalizers:
            policy = "Orphan"
        elif FOREGROUND_FINALIZER in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        await self._delete(store, node, latest, policy)

    async def _owner_state(self, ref: dict, namespace: str) -> Optional[str]:
        """SOLID, DANGLING or WAITING for one owner reference; None when it can never resolve."""
        store = self._owner_store(ref.get("apiVersion", ""), ref.get("kind", ""))
        if store.rtype.namespaced and not namespace:
            return None
        try:
            owner = await store.get(namespace if store.rtype.namespaced else "", ref.get("name", ""))
        except errors.StatusError as e:
            if e.code == 404:
                return DANGLING
            raise
        omd = owner["metadata"]
        if omd.get("uid") != ref.get("uid"):
            return DANGLING
        if omd.get("deletionTimestamp") and FOREGROUND_FINALIZER in (omd.get("finalizers") or []):
            return WAITING
        return SOLID

    async def _finish_foreground(self, store: Store, owner: _Node) -> None:
        """Remove the foregroundDeletion finalizer once no blocking dependent is left."""
        blocking = [d for d in self.dependents.get(owner.uid, ())
                    if d in self.nodes and self.nodes[d].blocks(owner.uid)]
        if not blocking:
            await self._drop_finalizer(store, owner, FOREGROUND_FINALIZER)
            return
        for dependent in blocking:
            if not self.nodes[dependent].foreground:
                self.queue.add((DELETE, dependent))

    async def _orphan(self, store: Store, owner: _Node, latest: dict) -> None:
        md = latest["metadata"]
        if not md.get("deletionTimestamp") or ORPHAN_FINALIZER not in (md.get("finalizers") or []):
            return
        for dependent in list(self.dependents.get(owner.uid, ())):
            node = self.nodes.get(dependent)
            informer = self.informers.get(node.resource) if node is not None else None
            if node is not None and informer is not None:
                try:
                    await self._drop_owner_refs(informer.store, node, {owner.uid})
                except _Replaced:
                    pass
        await self._drop_finalizer(store, owner, ORPHAN_FINALIZER)

    # ------------------------------------------------------------ writes

    async def _update(self, store: Store, node: _Node, change: Callable[[dict], None]) -> None:
        """Apply ``change`` to the object's metadata (compare-and-swap); gone is fine."""
        def mutate(current: Optional[dict]) -> dict:
            if current is None or current["metadata"].get("uid") != node.uid:  # (None: never, no create)
                raise _Replaced()
            change(current["metadata"])
            return current
        try:
            await store.guaranteed_update(node.namespace, node.name, mutate,
                                          ctx=Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code != 404:
                raise

    async def _drop_owner_refs(self, store: Store, node: _Node, owner_uids: set[str]) -> None:
        def change(md: dict) -> None:
            refs = [ref for ref in md.get("ownerReferences") or [] if ref.get("uid") not in owner_uids]
            if refs:
                md["ownerReferences"] = refs
            else:
                md.pop("ownerReferences", None)
        await self._update(store, node, change)

    async def _unblock_owners(self, store: Store, node: _Node) -> None:
        def change(md: dict) -> None:
            for ref in md.get("ownerReferences") or []:
                if ref.get("blockOwnerDeletion"):
                    ref["blockOwnerDeletion"] = False
        await self._update(store, node, change)

    async def _drop_finalizer(self, store: Store, node: _Node, finalizer: str) -> None:
        def change(md: dict) -> None:
            md["finalizers"] = [f for f in md.get("finalizers") or [] if f != finalizer]
            if not md["finalizers"]:
                del md["finalizers"]
        await self._update(store, node, change)

    async def _delete(self, store: Store, node: _Node, latest: dict, policy: str) -> None:
        opts = DeleteOptions(precondition_uid=node.uid,
                             precondition_resource_version=latest["metadata"].get("resourceVersion", ""),
                             propagation_policy=policy)
        try:
            await store.delete(node.namespace, node.name, opts)
        except errors.StatusError as e:
            if e.code == 404:
                return
            if e.code == 409:  # changed since it was read: decide again on the new state
                self.queue.add((DELETE, node.uid))
                return
            raise
        log.debug("garbage collector deleted {resource} {namespace}/{name} ({policy})", resource=node.resource,
                  namespace=node.namespace, name=node.name, policy=policy)
