"""The delivery end of one storage watch, shared by the backends and the watch cache.

It remembers the last revision delivered, so overlapping sources (history
replay, live fan-out, an upstream watch) can never hand a watcher an event
twice or out of order, and it shields the feeding code from handler bugs.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.storage.interface import ErrorHandler, Event, EventHandler, ProgressHandler, StorageError

log = Logger()


class OrderedWatcher:
    """A watch of ``prefix`` for events with revision > ``after``."""

    def __init__(self, prefix: str, after: int, on_event: EventHandler, on_error: ErrorHandler,
                 on_progress: Optional[ProgressHandler]) -> None:
        self.prefix = prefix
        self.last = after  # every event with revision <= last was delivered (or is not ours)
        self._on_event = on_event
        self._on_error = on_error
        self._on_progress = on_progress
        self.cancelled = False

    def cancel(self) -> None:
        """Stop delivery now; idempotent, and on_error is not called."""
        if not self.cancelled:
            self.cancelled = True
            self._detach()

    def request_progress(self) -> defer.Deferred:
        """These watches are not asked (their backends' ``watch_progress`` is false)."""
        return defer.fail(StorageError("this watch does not answer progress requests"))

    def _detach(self) -> None:
        """Forget this watcher wherever it is registered (subclasses)."""

    def deliver(self, event: Event) -> None:
        if self.cancelled or event.revision <= self.last:
            return
        self.last = event.revision
        try:
            self._on_event(event)
        except Exception:
            log.failure("watch event handler failed")

    def progress(self, revision: int) -> None:
        """Everything up to ``revision`` has been delivered."""
        if self.cancelled or revision < self.last:
            return
        self.last = revision
        if self._on_progress is None:
            return
        try:
            self._on_progress(revision)
        except Exception:
            log.failure("watch progress handler failed")

    def end(self, err: Exception) -> None:
        """End the watch with ``err``: it is detached and on_error is called once."""
        if self.cancelled:
            return
        self.cancel()
        try:
            self._on_error(err)
        except Exception:
            log.failure("watch error handler failed")
