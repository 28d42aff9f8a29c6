"""The apiextensions server: CustomResourceDefinitions and the custom resources they define.

It serves the CRD kind from ``api.crd_groups`` and keeps the served custom
resource types in step with the stored CRDs: at startup every stored CRD is
installed before ``api.crds_synced`` turns True (until then unknown groups
answer 503 and ``/readyz`` fails); afterwards an informer on the CRD Store
feeds one reconcile queue that maintains the status (accepted names and the
NamesAccepted, Established, NonStructuralSchema,
KubernetesAPIApprovalPolicyConformant and Terminating conditions), installs
or replaces the ResourceTypes of Established CRDs, and finalizes deleted ones.
"""
from __future__ import annotations

import copy
import json
from typing import Any, Optional

from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.apiextensions import customresourcedefinitions
from kapiserver.apiextensions.conditions import ESTABLISHED, NAMES_ACCEPTED, is_true
from kapiserver.apiextensions.controllers.finalizer import list_everything, finalize
from kapiserver.apiextensions.controllers.naming import apply_naming
from kapiserver.apiextensions.controllers.schema_conditions import apply_api_approval, apply_nonstructural
from kapiserver.apiextensions.custom_resource import CRDState, resource_types
from kapiserver.controllers.informer import Informer
from kapiserver.controllers.queue import ReconcileQueue
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store

log = Logger()
SYNC_CHECK = "poststarthook/crd-informer-synced"
FINALIZE_RETRY_SECONDS = 1.0


def _rv(crd: dict) -> int:
    try:
        return int((crd.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class APIExtensionsServer:
    def __init__(self, api: Any) -> None:
        self.api = api
        api.crds_synced = False  # until start() has installed the stored CRDs
        self.rtype = customresourcedefinitions.resource_type()
        self.store = Store(self.rtype, api.storage, api.admission, api.leases)
        api.crd_groups.add(self.rtype, self.store)
        # crd name -> (group, plural, serving signature) of what is installed
        self.installed: dict[str, tuple[str, str, str]] = {}
        self.states: dict[str, CRDState] = {}
        self.latest: dict[str, dict] = {}  # newest CRD objects seen (informer or own writes)
        self.queue = ReconcileQueue("customresourcedefinitions", self._reconcile, api.reactor)
        self.informer: Optional[Informer] = None
        self._lock = defer.DeferredLock()
        try:
            api.health.add(SYNC_CHECK, self._synced_check, kinds=("readyz",))
        except ValueError:
            pass  # a second server on the same health registry (tests)

    # ------------------------------------------------------------ lifecycle

    def _synced_check(self) -> None:
        if not self.api.crds_synced:
            raise RuntimeError("the stored CustomResourceDefinitions are not installed yet")

    async def start(self) -> None:
        """Install every stored CRD, then serve; watch for changes from then on."""
        self.api.crds_synced = False
        await self.initial_install()
        self.api.crds_synced = True
        self.informer = Informer(self.store, self._on_event, self.api.reactor)
        self.informer.start()

    async def initial_install(self) -> None:
        listed = await self.store.list("", list_everything())
        for crd in listed["items"]:
            self._remember(crd)
            self._install(crd)

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop()
        self.queue.stop()

    # ------------------------------------------------------------ serving

    def _builtin_types(self) -> list[ResourceType]:
        return self.api.kube_groups.types()

    def make_store(self, rtype: ResourceType) -> Store:
        return Store(rtype, self.api.storage, self.api.admission, self.api.leases)

    def _install(self, crd: dict) -> None:
        """Serve the served versions of an Established CRD (replacing what was served before)."""
        name = crd["metadata"]["name"]
        if not is_true(crd, ESTABLISHED):
            return
        state = self.states.setdefault(name, CRDState(name))
        state.terminating = bool(crd["metadata"].get("deletionTimestamp"))
        signature = json.dumps([crd.get("spec"), (crd.get("status") or {}).get("acceptedNames")], sort_keys=True)
        previous = self.installed.get(name)
        if previous is not None and previous[2] == signature:
            return
        try:
            types = resource_types(crd, state)
        except (KeyError, TypeError) as e:
            log.error("cannot serve CustomResourceDefinition {name}: {err}", name=name, err=e)
            return
        if previous is not None:
            self.api.crd_groups.remove_group_resource(previous[0], previous[1])
        group = crd["spec"]["group"]
        plural = types[0].plural if types else crd["spec"]["names"]["plural"]
        for rtype in types:
            self.api.crd_groups.add(rtype, self.make_store(rtype))
        self.installed[name] = (group, plural, signature)
        log.info("serving {name} ({versions})", name=name, versions=", ".join(t.version for t in types))

    def _uninstall(self, name: str) -> None:
        previous = self.installed.pop(name, None)
        self.states.pop(name, None)
        if previous is not None:
            self.api.crd_groups.remove_group_resource(previous[0], previous[1])
            log.info("stopped serving {name}", name=name)

    # ------------------------------------------------------------ controller

    def _remember(self, crd: dict) -> None:
        name = crd["metadata"]["name"]
        known = self.latest.get(name)
        if known is None or _rv(crd) >= _rv(known):
            self.latest[name] = crd

    def _on_event(self, event_type: str, crd: dict) -> None:
        name = crd["metadata"]["name"]
        if event_type == "DELETED":
            self.latest.pop(name, None)
            self._requeue_group(crd)
        else:
            self._remember(crd)
        self.queue.add(name)

    def _requeue_group(self, crd: dict) -> None:
        """Names freed by ``crd`` may resolve another CRD's conflict."""
        group = (crd.get("spec") or {}).get("group")
        for other in list(self.latest.values()):
            if (other.get("spec") or {}).get("group") == group and not is_true(other, NAMES_ACCEPTED):
                self.queue.add(other["metadata"]["name"])

    async def _reconcile(self, name: str) -> None:
        await self._lock.acquire()
        try:
            await self._reconcile_locked(name)
        finally:
            self._lock.release()

    async def _reconcile_locked(self, name: str) -> None:
        try:
            crd = await self.store.get("", name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            self._uninstall(name)
            return
        self._remember(crd)
        if crd["metadata"].get("deletionTimestamp"):
            state = self.states.setdefault(name, CRDState(name))
            state.terminating = True
            if not await finalize(crd, self.store, self.make_store, state):
                self.queue.add(name, FINALIZE_RETRY_SECONDS)
            return
        others = [c for n, c in self.latest.items() if n != name]
        builtins = self._builtin_types()

        def update_status(current: Optional[dict]) -> dict:
            new = copy.deepcopy(current)
            apply_naming(new, others, builtins)
            apply_nonstructural(new)
            apply_api_approval(new)
            return new
        before = (crd.get("status") or {}).get("acceptedNames")
        crd, _ = await self.store.guaranteed_update("", name, update_status, subresource="status")
        self._remember(crd)
        self._install(crd)
        if (crd.get("status") or {}).get("acceptedNames") != before:
            self._requeue_group(crd)
