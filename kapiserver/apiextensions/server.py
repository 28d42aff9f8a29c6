"""The apiextensions server: CustomResourceDefinitions and the custom resources they define.

It serves the CRD kind from the CRD group set it is given and keeps the served
custom resource types in step with the stored CRDs.  That part runs on every
server (each serves what is stored): at startup every stored CRD is installed
before its :class:`CRDReadiness` turns ready (until then unknown groups answer
503 and ``/readyz`` fails); afterwards an informer on the CRD Store installs or
replaces the ResourceTypes of Established CRDs, marks deleting ones
Terminating and uninstalls deleted ones.

The writes (the status: accepted names and the NamesAccepted, Established,
NonStructuralSchema, KubernetesAPIApprovalPolicyConformant and Terminating
conditions; finalizing deleted CRDs) are the leader's: ``status_controller()``
builds the controller the controller manager runs
(``apiextensions/controllers/status.py``).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Awaitable, Callable, NamedTuple, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apiextensions import customresourcedefinitions
from kapiserver.apiextensions.conditions import ESTABLISHED, NAMES_ACCEPTED, is_true
from kapiserver.apiextensions.controllers.finalizer import list_everything
from kapiserver.apiextensions.state import CRDState
from kapiserver.registry.admission import AdmissionChain
from kapiserver.registry.groups import APIGroupSet
from kapiserver.registry.informer import Informer
from kapiserver.registry.leases import LeaseReuser
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store
from kapiserver.storage.interface import Storage

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.apiextensions.controllers.status import CRDStatusController

log = Logger()
SYNC_CHECK = "poststarthook/crd-informer-synced"


def _rv(crd: dict) -> int:
    try:
        return int((crd.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class APIExtensionsDeps(NamedTuple):
    """What the apiextensions server needs of the server that runs it (``app/apiserver.py``)."""

    reactor: IReactorTime
    storage: Storage
    admission: AdmissionChain
    leases: LeaseReuser
    # the CRD link's groups: the CRD kind and every served custom resource version are added to it
    groups: APIGroupSet
    # the built-in groups, whose names a CRD may not take
    builtin_groups: APIGroupSet
    # ends the watches on resource types no longer served (a CRD replaced or deleted)
    stop_serving: Callable[[list[ResourceType]], None]


class CRDReadiness:
    """Whether the CRDs stored at startup are served yet: until then a request to an unknown group
    may be for one of them (the CRD link answers 503) and ``/readyz`` fails (``SYNC_CHECK``)."""

    def __init__(self) -> None:
        self.synced = False

    def check(self) -> None:
        if not self.synced:
            raise RuntimeError("the stored CustomResourceDefinitions are not installed yet")


class APIExtensionsServer:
    def __init__(self, deps: APIExtensionsDeps) -> None:
        self.deps = deps
        self.readiness = CRDReadiness()  # ready once start() has installed the stored CRDs
        self.rtype = customresourcedefinitions.resource_type()
        self.store = Store(self.rtype, deps.storage, deps.admission, deps.leases)
        deps.groups.add(self.rtype, self.store)
        # crd name -> (group, plural, serving signature, resource types) of what is installed
        self.installed: dict[str, tuple[str, str, str, list[ResourceType]]] = {}
        self.states: dict[str, CRDState] = {}
        self.latest: dict[str, dict] = {}  # newest CRD objects seen (informer or own writes)
        self.informer: Optional[Informer] = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Install every stored CRD, then serve; watch for changes from then on."""
        self.readiness.synced = False
        await self.initial_install()
        self.readiness.synced = True
        self.informer = Informer(self.store, self._on_event, self.deps.reactor, after_list=self._after_list)
        self.informer.start()

    async def initial_install(self) -> None:
        listed = await self.store.list("", list_everything())
        for crd in listed["items"]:
            self.remember(crd)
            self.install(crd)

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop()

    def status_controller(self, server_count: Callable[[], Awaitable[int]]) -> "CRDStatusController":
        """A new leader-only controller writing the CRDs' status (for the controller manager);
        ``server_count()`` says how many API servers serve the cluster now."""
        from kapiserver.apiextensions.controllers.status import CRDStatusController
        return CRDStatusController(self, self.deps.reactor, server_count)

    # ------------------------------------------------------------ serving

    def builtin_types(self) -> list[ResourceType]:
        return self.deps.builtin_groups.types()

    def make_store(self, rtype: ResourceType) -> Store:
        return Store(rtype, self.deps.storage, self.deps.admission, self.deps.leases)

    def install(self, crd: dict) -> None:
        """Serve the served versions of a CRD whose names are accepted or that is Established
        (upstream's check), replacing what was served before."""
        name = crd["metadata"]["name"]
        if not (is_true(crd, ESTABLISHED) or is_true(crd, NAMES_ACCEPTED)):
            return
        state = self.states.setdefault(name, CRDState(name))
        state.terminating = bool(crd["metadata"].get("deletionTimestamp"))
        signature = json.dumps([crd.get("spec"), (crd.get("status") or {}).get("acceptedNames")], sort_keys=True)
        previous = self.installed.get(name)
        if previous is not None and previous[2] == signature:
            return
        try:
            # (the custom resource machinery loads with the first CRD: a start without CRDs needs none of it)
            from kapiserver.apiextensions.custom_resource import resource_types
            types = resource_types(crd, state)
        except (KeyError, TypeError) as e:
            log.error("cannot serve CustomResourceDefinition {name}: {err}", name=name, err=e)
            return
        if previous is not None:
            self.deps.groups.remove_group_resource(previous[0], previous[1])
        group = crd["spec"]["group"]
        plural = types[0].plural if types else crd["spec"]["names"]["plural"]
        for rtype in types:
            self.deps.groups.add(rtype, self.make_store(rtype))
        self.installed[name] = (group, plural, signature, types)
        if previous is not None:
            self.deps.stop_serving(previous[3])
        log.info("serving {name} ({versions})", name=name, versions=", ".join(t.version for t in types))

    def uninstall(self, name: str) -> None:
        previous = self.installed.pop(name, None)
        self.states.pop(name, None)
        if previous is not None:
            self.deps.groups.remove_group_resource(previous[0], previous[1])
            self.deps.stop_serving(previous[3])
            log.info("stopped serving {name}", name=name)

    # ------------------------------------------------------------ what is stored

    def remember(self, crd: dict) -> None:
        name = crd["metadata"]["name"]
        known = self.latest.get(name)
        if known is None or _rv(crd) >= _rv(known):
            self.latest[name] = crd

    def _on_event(self, event_type: str, crd: dict) -> None:
        """Every server: serve the CRDs as they are stored (the leader writes their status)."""
        name = crd["metadata"]["name"]
        if event_type == "DELETED":
            self.latest.pop(name, None)
            self.uninstall(name)
            return
        self.remember(crd)
        if crd["metadata"].get("deletionTimestamp") and name in self.states:
            self.states[name].terminating = True  # refuse new instances at once, on every server
        self.install(self.latest[name])

    def _after_list(self) -> None:
        """After a relist: CRDs deleted while the watch was down are not served any more."""
        assert self.informer is not None
        listed = {name for _, name in self.informer.objects}
        for name in [n for n in list(self.installed) + list(self.latest) if n not in listed]:
            self.latest.pop(name, None)
            self.uninstall(name)
