"""A local APIService for every served version of every CRD (upstream's CRD registration controller).

Runs on every server, as upstream's: an informer over the CRD Store tells the
autoregister controller which ``<version>.<group>`` APIServices should exist
(label ``automanaged: "true"``, ``groupPriorityMinimum`` 1000 and
``versionPriority`` 100, so CRD versions rank by Kubernetes version order); a
version no CRD serves any more is removed.  A built-in group version is never
taken over.
"""
from __future__ import annotations

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.aggregator import priorities
from kapiserver.aggregator.autoregister import AutoRegisterController, local_apiservice
from kapiserver.apis.apiregistration import apiservices
from kapiserver.registry.informer import Informer
from kapiserver.registry.store import Store

log = Logger()


class CRDRegistrationController:
    def __init__(self, crds: Store, autoregister: AutoRegisterController, reactor: IReactorTime) -> None:
        self.autoregister = autoregister
        self.crds: dict[str, dict] = {}
        self.informer = Informer(crds, self._on_event, reactor, after_list=self._after_list)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()

    @property
    def synced(self):
        return self.informer.synced

    def _on_event(self, event_type: str, crd: dict) -> None:
        name = crd["metadata"]["name"]
        before = self._group_versions(self.crds.get(name))
        if event_type == "DELETED":
            self.crds.pop(name, None)
        else:
            self.crds[name] = crd
        for group, version in before | self._group_versions(crd):
            self._sync(group, version)

    def _after_list(self) -> None:
        listed = {name for _, name in self.informer.objects}
        for name in [n for n in self.crds if n not in listed]:
            crd = self.crds.pop(name)
            for group, version in self._group_versions(crd):
                self._sync(group, version)

    @staticmethod
    def _group_versions(crd: dict | None) -> set[tuple[str, str]]:
        if crd is None:
            return set()
        spec = crd.get("spec") or {}
        return {(spec.get("group") or "", v.get("name") or "") for v in spec.get("versions") or ()
                if isinstance(v, dict)}

    def _served(self, group: str, version: str) -> bool:
        for crd in self.crds.values():
            spec = crd.get("spec") or {}
            if spec.get("group") != group:
                continue
            if any(v.get("name") == version and v.get("served") for v in spec.get("versions") or ()):
                return True
        return False

    def _sync(self, group: str, version: str) -> None:
        name = apiservices.name_for(group, version)
        if priorities.builtin_priority(group, version) is not None:
            return  # a built-in group version keeps its own APIService
        if self._served(group, version):
            self.autoregister.add_always(local_apiservice(group, version, priorities.CRD_GROUP_PRIORITY_MINIMUM,
                                                          priorities.CRD_VERSION_PRIORITY))
        else:
            self.autoregister.remove(name)
