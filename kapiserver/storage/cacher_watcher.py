"""One client watch served by the watch cache (the handle ``CachedStorage.watch`` returns).

It remembers the last revision it delivered so that replay from the event
window and live fan-out can never hand it a duplicate, and so the cache can
tell it where it stood when it has to be ended with ``CompactedError``.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.logger import Logger

from kapiserver.storage.interface import ErrorHandler, Event, EventHandler, ProgressHandler, Watch
from kapiserver.storage.watcher import OrderedWatcher

log = Logger()


class CacheWatcher(OrderedWatcher):
    """A watch of ``prefix`` for events with revision > ``after``."""

    def __init__(self, prefix: str, after: int, on_event: EventHandler, on_error: ErrorHandler,
                 on_progress: Optional[ProgressHandler]) -> None:
        super().__init__(prefix, after, on_event, on_error, on_progress)
        self.after = after
        # Set by the cache when attached, to detach on cancel().
        self.detach: Optional[Callable[["CacheWatcher"], None]] = None
        # A backend watch serving this client directly (history older than the window).
        self.inner: Optional[Watch] = None

    def _detach(self) -> None:
        if self.detach is not None:
            self.detach(self)
            self.detach = None
        if self.inner is not None:
            self.inner.cancel()
            self.inner = None

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
