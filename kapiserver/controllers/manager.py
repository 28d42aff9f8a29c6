"""The leader-only controllers, started and stopped together (kube-controller-manager in process).

With leader election (``controllers.leader_elect``) only the server holding
the Lease runs them; each start builds fresh controllers from their
factories, so a server that lost the Lease and wins it again starts from a
clean list-and-watch, like a new kube-controller-manager process.
"""
from __future__ import annotations

from typing import Callable, Protocol

from twisted.logger import Logger

log = Logger()


class Controller(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


class ControllerManager:
    def __init__(self, factories: list[Callable[[], Controller]]) -> None:
        self.factories = factories
        self.running: list[Controller] = []

    @property
    def active(self) -> bool:
        return bool(self.running)

    def start(self) -> None:
        if self.running:
            return
        for factory in self.factories:
            controller = factory()
            self.running.append(controller)
            controller.start()
        log.info("started {n} controllers", n=len(self.running))

    def stop(self) -> None:
        running, self.running = self.running, []
        for controller in running:
            try:
                controller.stop()
            except Exception:
                log.failure("stopping {controller} failed", controller=type(controller).__name__)
        if running:
            log.info("stopped {n} controllers", n=len(running))
