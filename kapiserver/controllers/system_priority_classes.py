"""The built-in PriorityClasses ``system-node-critical`` and ``system-cluster-critical``.

kube-apiserver creates them after it starts (the post-start hook
``scheduling/bootstrap-system-priority-classes``), retrying every second, and
is not ready until both exist. They are created when missing and never
changed: a cluster administrator's deletion lasts until the next start, as
upstream.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.scheduling.priorityclasses import SYSTEM_CLASSES
from kapiserver.machinery import errors
from kapiserver.registry.store import Store

log = Logger()
READY_CHECK = "poststarthook/scheduling/bootstrap-system-priority-classes"
RETRY_SECONDS = 1.0
DESCRIPTIONS = {
    "system-node-critical": "Used for system critical pods that must not be moved from their current node.",
    "system-cluster-critical": "Used for system critical pods that must run in the cluster, but can be moved "
                               "to another node if necessary.",
}


def system_priority_classes() -> list[dict]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "description": DESCRIPTIONS[name]}
            for name, value in sorted(SYSTEM_CLASSES.items(), key=lambda item: -item[1])]


class SystemPriorityClasses:
    def __init__(self, priorityclasses: Store, reactor: IReactorTime) -> None:
        self.priorityclasses = priorityclasses
        self.reactor = reactor
        self.done = False
        self._stopped = False
        self._timer: Any = None

    def check(self) -> None:
        """The readiness check: fails until both classes exist."""
        if not self.done:
            raise RuntimeError("the system priority classes are not created yet")

    async def start(self) -> None:
        """One attempt now; until it succeeds, another every second in the background."""
        await self._attempt()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    async def _attempt(self) -> None:
        if self._stopped:
            return
        try:
            await self.ensure()
        except Exception as e:
            log.warn("unable to add the system priority classes, retrying: {err}", err=e)
            self._timer = self.reactor.callLater(
                RETRY_SECONDS, lambda: defer.Deferred.fromCoroutine(self._attempt()))
            return
        self.done = True

    async def ensure(self) -> None:
        for pc in system_priority_classes():
            name = pc["metadata"]["name"]
            try:
                await self.priorityclasses.get("", name)
                continue
            except errors.StatusError as e:
                if e.code != 404:
                    raise
            try:
                await self.priorityclasses.create("", pc)
                log.info("created PriorityClass {name} with value {value}", name=name, value=pc["value"])
            except errors.StatusError as e:
                if e.code != 409:
                    raise

