"""The ValidatingAdmissionPolicy status controller (kube-controller-manager's): writes
``status.observedGeneration`` and ``status.typeChecking`` (the type-check warnings of the
policy's expressions) for every policy whose generation it has not seen yet.

The type checker is built for the first policy to check, so a server without
policies never loads it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Hashable, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.machinery import errors
from kapiserver.registry.context import Context
from kapiserver.registry.informer import Informer
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

if TYPE_CHECKING:
    from kapiserver.admission.policy.typecheck import TypeChecker

CONTROLLER_NAME = "validatingadmissionpolicy-status-controller"


class PolicyStatusController:
    def __init__(self, policies: Store, new_checker: Callable[[], TypeChecker], reactor: IReactorTime) -> None:
        self.policies = policies
        self._new_checker = new_checker
        self._checker: Optional[TypeChecker] = None
        self.queue = ReconcileQueue("validatingadmissionpolicy-status", self.reconcile, reactor)
        self.informer = Informer(policies, self._on_policy, reactor)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()
        self.queue.stop()

    def _on_policy(self, event_type: str, obj: dict) -> None:
        if event_type != "DELETED":
            self.queue.add(obj["metadata"]["name"])

    async def reconcile(self, key: Hashable) -> None:
        name = str(key)
        try:
            policy = await self.policies.get("", name)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        generation = policy["metadata"].get("generation") or 0
        status = policy.get("status") or {}
        if generation <= (status.get("observedGeneration") or 0):
            return
        if self._checker is None:
            self._checker = self._new_checker()
        warnings = self._checker.check(policy)

        def write(current):
            if (current.get("metadata") or {}).get("generation") != generation:
                return current  # changed meanwhile: the next event checks it again
            new_status = dict(current.get("status") or {})
            new_status["observedGeneration"] = generation
            new_status["typeChecking"] = {"expressionWarnings": warnings} if warnings else {}
            current["status"] = new_status
            return current
        await self.policies.guaranteed_update("", name, write, "status", ctx=Context(field_manager=CONTROLLER_NAME))
