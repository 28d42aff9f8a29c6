"""The CRD controllers that write: status conditions and finalizing (leader only).

Upstream's naming, establishing, non-structural-schema, API-approval and
finalizing controllers, as one reconcile queue fed by an informer on the CRD
Store.  Only the leader runs it (``controllers/manager.py``); every server
serves the CRDs from what is stored (``apiextensions/server.py``), from the
moment their names are accepted.  As upstream in HA clusters, when more than
one API server is alive Established is set only five seconds after the names
were accepted, so that a client waiting for it finds the CRD served by every
server.
"""
from __future__ import annotations

import copy
from typing import Awaitable, Callable, Optional, Protocol

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from kapiserver.apiextensions.conditions import ESTABLISHED, NAMES_ACCEPTED, is_true
from kapiserver.apiextensions.controllers.finalizer import finalize
from kapiserver.apiextensions.controllers.naming import apply_naming
from kapiserver.apiextensions.controllers.schema_conditions import apply_api_approval, apply_nonstructural
from kapiserver.apiextensions.state import CRDState
from kapiserver.machinery import errors
from kapiserver.registry.informer import Informer
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store

FINALIZE_RETRY_SECONDS = 1.0
ESTABLISH_DELAY_SECONDS = 5.0  # upstream's hold in HA clusters


class CRDInstaller(Protocol):
    """What the status controller needs of the server serving the CRDs (``apiextensions/server.py``):
    the CRD Store, what is stored and served, and serving or no longer serving a CRD at once."""

    store: Store
    # the newest CRD objects seen, by name
    latest: dict[str, dict]
    # what each served CRD's custom resources need to know of it (terminating), by name
    states: dict[str, CRDState]

    def make_store(self, rtype: ResourceType) -> Store: ...

    def builtin_types(self) -> list[ResourceType]: ...

    def install(self, crd: dict) -> None: ...

    def uninstall(self, name: str) -> None: ...

    def remember(self, crd: dict) -> None: ...


class CRDStatusController:
    def __init__(self, server: CRDInstaller, reactor: IReactorTime,
                 server_count: Callable[[], Awaitable[int]]) -> None:
        self.server = server
        self.server_count = server_count
        self.reactor = reactor
        self._names_accepted_at: dict[str, float] = {}
        self.store = server.store
        self.queue = ReconcileQueue("customresourcedefinitions", self._reconcile, reactor)
        self.informer = Informer(self.store, self._on_event, reactor)
        self._lock = defer.DeferredLock()

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()
        self.queue.stop()

    def _on_event(self, event_type: str, crd: dict) -> None:
        if event_type == "DELETED":
            self.server.latest.pop(crd["metadata"]["name"], None)
            self._requeue_group(crd)
        self.queue.add(crd["metadata"]["name"])

    def _requeue_group(self, crd: dict) -> None:
        """Names freed by ``crd`` may resolve another CRD's conflict."""
        group = (crd.get("spec") or {}).get("group")
        name = crd["metadata"]["name"]
        for other in list(self.server.latest.values()):
            if (other["metadata"]["name"] != name and (other.get("spec") or {}).get("group") == group
                    and not is_true(other, NAMES_ACCEPTED)):
                self.queue.add(other["metadata"]["name"])

    async def _reconcile(self, name: str) -> None:
        await self._lock.acquire()
        try:
            await self._reconcile_locked(name)
        finally:
            self._lock.release()

    async def _reconcile_locked(self, name: str) -> None:
        server = self.server
        try:
            crd = await self.store.get("", name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            server.uninstall(name)
            return
        server.remember(crd)
        if crd["metadata"].get("deletionTimestamp"):
            state = server.states.setdefault(name, CRDState(name))
            state.terminating = True
            if not await finalize(crd, self.store, server.make_store, state):
                self.queue.add(name, FINALIZE_RETRY_SECONDS)
            return
        others = [c for n, c in server.latest.items() if n != name]
        builtins = server.builtin_types()
        establish = await self._may_establish(crd)

        def update_status(current: Optional[dict]) -> dict:
            assert current is not None  # (no create: called with the stored CRD)
            new = copy.deepcopy(current)
            apply_naming(new, others, builtins, establish)
            apply_nonstructural(new)
            apply_api_approval(new)
            return new
        before = (crd.get("status") or {}).get("acceptedNames")
        crd, _ = await self.store.guaranteed_update("", name, update_status, subresource="status")
        server.remember(crd)
        server.install(crd)  # at once here; the other servers install it from their informers
        if (crd.get("status") or {}).get("acceptedNames") != before:
            self._requeue_group(crd)

    async def _may_establish(self, crd: dict) -> bool:
        """Whether Established may be set now; if not, the CRD is looked at again when it may."""
        name = crd["metadata"]["name"]
        if is_true(crd, ESTABLISHED):
            self._names_accepted_at.pop(name, None)
            return True
        try:
            alone = await self.server_count() <= 1
        except Exception:
            alone = False
        if alone:
            return True
        now = self.reactor.seconds()
        wait = self._names_accepted_at.setdefault(name, now) + ESTABLISH_DELAY_SECONDS - now
        if wait <= 0:
            self._names_accepted_at.pop(name, None)
            return True
        self.queue.add(name, wait)
        return False
