"""Shared test-case scaffolding: async test methods, an in-process server per test, polling."""
from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, Coroutine

from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from kapiserver.testing.eventually import eventually
from kapiserver.testing.apiserver import InMemoryServer, start_api_server, start_in_memory_server
from kapiserver.testing.client import InMemoryClient, JSONClient

# Real seconds a test waits for something that should come at once before it gives up: long
# enough that only a hang (never a slow, busy machine) reaches it.  Tests do not assert how long
# things took; deadlines of the code under test are fake-clock steps.
HANG_GUARD = 60.0


def run(coro_fn: Callable[[Any], Coroutine[Any, Any, None]]):
    """Decorator: an ``async def`` test method as a Deferred-returning one."""
    def wrapper(self):
        return defer.Deferred.fromCoroutine(coro_fn(self))
    wrapper.__name__ = coro_fn.__name__
    wrapper.__doc__ = coro_fn.__doc__
    return wrapper


def sleep(seconds: float) -> defer.Deferred:
    return task.deferLater(reactor, seconds, lambda: None)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.2) -> Any:
    """Blocking poll for end-to-end tests (the server is another process): :func:`eventually`."""
    return eventually(predicate, "condition", timeout, interval)


class HeldLists:
    """Lists held in storage until :meth:`release` (a slow store): their requests keep their seats
    and their deadlines run.  ``waiting`` counts the lists that reached storage."""

    def __init__(self) -> None:
        self.gate: defer.Deferred = defer.Deferred()
        self.waiting = 0

    def release(self) -> None:
        if not self.gate.called:
            self.gate.callback(None)


class ServerTestCase(unittest.TestCase):
    """A fresh in-process API server (real SQLite, watch cache) for every test.

    ``settings`` are passed to :func:`start_api_server` (limits, bookmark interval...).
    """

    settings: dict = {}

    async def _start(self) -> None:
        self.server = await start_api_server(**self.settings)
        # a cleanup, not tearDown: it also runs when a subclass's setUp fails later
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(self.server.stop()))
        self.client = JSONClient(self.server.url)

    def setUp(self):
        return defer.Deferred.fromCoroutine(self._start())

    def hold_lists(self, resource: str = "configmaps") -> HeldLists:
        """Lists of the core (v1) ``resource`` wait in storage until the returned hold is released."""
        store = self.server.api.served.store("", "v1", resource)
        original = store.list_stored
        held = HeldLists()

        async def list_later(*args: Any, **kwargs: Any) -> Any:
            held.waiting += 1
            await held.gate
            return await original(*args, **kwargs)
        self.patch(store, "list_stored", list_later)
        self.addCleanup(held.release)
        return held

    async def wait_for(self, check: Callable[[], Awaitable[Any]], timeout: float = 5.0) -> Any:
        """Poll an async ``check`` until it returns something true."""
        deadline = time.monotonic() + timeout
        while True:
            value = await check()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail("condition not met in time")
            await sleep(0.02)


class InMemoryServerTestCase(ServerTestCase):
    """A fresh in-process server per test with no port: ``self.client`` drives it in memory
    (StubTreq) and ``self.clock`` holds its request deadlines (see :class:`InMemoryServer`)."""

    server: InMemoryServer  # type: ignore[assignment]
    client: InMemoryClient

    async def _start(self) -> None:
        self.server = await start_in_memory_server(**self.settings)
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(self.server.stop()))
        self.client = self.server.client
        self.clock = self.server.clock
