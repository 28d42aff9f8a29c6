"""A keyed reconcile queue: each key is reconciled by one worker at a time,
duplicates collapse, failures retry with exponential backoff.

A reconcile that raises :class:`RetryLater` is retried the same way without a
warning: the object is waiting for something outside the controller (upstream's
``IgnorableError``, logged at a high verbosity there).  A key added with a
delay while it already waits is due at the earlier of the two times, as
client-go's delaying queue keeps the earliest.
"""
from __future__ import annotations

from typing import Any, Callable, Coroutine, Generic, Hashable, TypeVar

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from kapiserver.machinery import metrics


log = Logger()
MAX_BACKOFF_SECONDS = 30.0


class RetryLater(Exception):
    """Not done yet, for a reason that is no fault (``str()`` is logged at debug level)."""


# what a queue's items are: a name, a (namespace, name) ...
Key = TypeVar("Key", bound=Hashable)


class ReconcileQueue(Generic[Key]):
    def __init__(self, name: str, reconcile: Callable[[Key], Coroutine[Any, Any, None]],
                 reactor: IReactorTime) -> None:
        self.name = name
        self.reconcile = reconcile
        self.reactor = reactor
        self._pending: set = set()
        self._running: set = set()
        self._again: set = set()
        self._failures: dict = {}
        self._timers: dict = {}
        self._stopped = False

    def add(self, key: Key, delay: float = 0.0) -> None:
        if self._stopped:
            return
        if delay > 0:
            timer = self._timers.get(key)
            if timer is not None:
                if timer.getTime() <= self.reactor.seconds() + delay:
                    return
                timer.cancel()
            self._timers[key] = self.reactor.callLater(delay, self._fire, key)
            return
        if key in self._pending or key in self._again:
            return
        metrics.CLIENT_METRICS.queue_add(self.name)
        if key in self._running:
            self._again.add(key)
            return
        self._pending.add(key)
        self._timers[("run", key)] = self.reactor.callLater(0, self._run, key)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _run(self, key: Key) -> None:
        self._timers.pop(("run", key), None)
        self._pending.discard(key)
        if self._stopped:
            return
        self._running.add(key)
        d = defer.Deferred.fromCoroutine(self.reconcile(key))

        def ok(_):
            self._failures.pop(key, None)

        def failed(f):
            n = self._failures.get(key, 0) + 1
            self._failures[key] = n
            delay = min(0.1 * 2 ** n, MAX_BACKOFF_SECONDS)
            if f.check(RetryLater):
                log.debug("{queue}: {key} not done ({why}); retrying in {delay:.1f}s", queue=self.name, key=key,
                          why=f.getErrorMessage(), delay=delay)
                self.add(key, delay)
                return
            log.warn("{queue}: reconciling {key} failed ({err}); retrying in {delay:.1f}s", queue=self.name,
                     key=key, err=f.getErrorMessage(), delay=delay)
            self.add(key, delay)

        def done(_):
            self._running.discard(key)
            if key in self._again:
                self._again.discard(key)
                self.add(key)
        d.addCallbacks(ok, failed)
        d.addBoth(done)

    def stop(self) -> None:
        self._stopped = True
        for timer in self._timers.values():
            if timer.active():
                timer.cancel()
        self._timers.clear()
