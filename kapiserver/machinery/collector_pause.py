"""Python's cyclic garbage collector held off while a large body is being handled.

A 3 MB body of tiny items decodes into about a million Python objects (with its managedFields and
validation) that live until its request ends and then die by reference counting: decoded JSON has
no cycles.  While they live they are allocations the collector counts, so its passes come often and
walk them all: full passes of 130-290 ms were seen during one Pod of 100,000 env vars, each holding
the GIL, so the reactor answered nothing meanwhile (issue 31: ``/readyz`` under 100 ms).  Held off
for such a request, the collector resumes once the objects are gone, and finds its counts back where
they were.

Only the reactor thread holds and releases.  However the holds follow one another, the collector
runs again :data:`LONGEST_PAUSE_SECONDS` after the pause began (a request that never ends, or a
stream of large ones, cannot let cyclic garbage from other requests pile up for ever).
"""
from __future__ import annotations

import gc
from typing import Optional

from twisted.internet.interfaces import IDelayedCall, IReactorTime

LONGEST_PAUSE_SECONDS = 10.0


class CollectorPause:
    """Counted holds on the automatic collection (``gc.disable``), released in any order."""

    def __init__(self) -> None:
        self._holds = 0
        self._disabled = False  # by this pause (a collector someone else disabled stays so)
        self._expiry: Optional[IDelayedCall] = None

    def hold(self, clock: IReactorTime) -> None:
        if self._holds == 0 and gc.isenabled():
            gc.disable()
            self._disabled = True
            self._expiry = clock.callLater(LONGEST_PAUSE_SECONDS, self._expire)
        self._holds += 1

    def release(self) -> None:
        self._holds -= 1
        if self._holds == 0:
            self._expire()

    def _expire(self) -> None:
        if self._expiry is not None and self._expiry.active():
            self._expiry.cancel()
        self._expiry = None
        if self._disabled:
            gc.enable()
            self._disabled = False


# the process's pause (one collector per process)
PAUSE = CollectorPause()
