"""One client watch served by the watch cache (the handle ``CachedStorage.watch`` returns).

It remembers the last revision it delivered so that replay from the event
window and live fan-out can never hand it a duplicate, and so the cache can
tell it where it stood when it has to be ended with ``CompactedError``.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.logger import Logger

from kapiserver.storage.interface import ErrorHandler, Event, EventHandler, ProgressHandler, Watch

log = Logger()


class CacheWatcher:
    """A watch of ``prefix`` for events with revision > ``after``."""

    def __init__(self, prefix: str, after: int, on_event: EventHandler, on_error: ErrorHandler,
                 on_progress: Optional[ProgressHandler]) -> None:
        self.prefix = prefix
        self.after = after
        self.last = after  # every event with revision <= last was delivered (or is not ours)
        self._on_event = on_event
        self._on_error = on_error
        self._on_progress = on_progress
        self.cancelled = False
        # Set by the cache when attached, to detach on cancel().
        self.detach: Optional[Callable[["CacheWatcher"], None]] = None
        # A backend watch serving this client directly (history older than the window).
        self.inner: Optional[Watch] = None

    def cancel(self) -> None:
        """Stop delivery now; idempotent, and on_error is not called."""
        if self.cancelled:
            return
        self.cancelled = True
        if self.detach is not None:
            self.detach(self)
            self.detach = None
        if self.inner is not None:
            self.inner.cancel()
            self.inner = None

    def deliver(self, event: Event) -> None:
        if self.cancelled or event.revision <= self.last:
            return
        self.last = event.revision
        try:
            self._on_event(event)
        except Exception:
            log.failure("watch event handler failed")

    def progress(self, revision: int) -> None:
        """Everything up to ``revision`` has been delivered (also after an event batch)."""
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
        """End the watch with ``err`` (it is detached; on_error is called once)."""
        if self.cancelled:
            return
        self.cancel()
        try:
            self._on_error(err)
        except Exception:
            log.failure("watch error handler failed")

    def passthrough(self, inner: Watch) -> None:
        """Let a backend watch serve this client (its handlers are this watcher's)."""
        self.inner = inner
        if self.cancelled:
            inner.cancel()

    # The handlers a passthrough backend watch calls.
    def on_backend_event(self, event: Event) -> None:
        self.deliver(event)

    def on_backend_error(self, err: Exception) -> None:
        self.inner = None
        self.end(err)

    def on_backend_progress(self, revision: int) -> None:
        self.progress(revision)
