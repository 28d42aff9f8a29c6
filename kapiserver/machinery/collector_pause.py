"""Python's cyclic garbage collector held off while a large body is being handled.

A 3 MB body of tiny items decodes into about a million Python objects (with its managedFields and
validation) that live until its request ends and then die by reference counting: decoded JSON has
no cycles.  While they live they are allocations the collector counts, so its passes come often and
walk them all: full passes of 130-290 ms were seen during one Pod of 100,000 env vars, each holding
the GIL, so the reactor answered nothing meanwhile (issue 31: ``/readyz`` under 100 ms).  Held off
for such a request, the collector resumes once the objects are gone, and finds its counts back where
they were.

Only the reactor thread holds and releases.  If large requests follow one another for longer than
:data:`LONGEST_PAUSE_SECONDS`, the collector runs again, so a stream of them cannot let cyclic
garbage from other requests pile up for ever.
"""
from __future__ import annotations

import gc
import time
from typing import Callable

LONGEST_PAUSE_SECONDS = 10.0


class CollectorPause:
    """Counted holds on the automatic collection (``gc.disable``), released in any order."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._holds = 0
        self._since = 0.0
        self._disabled = False  # by this pause (a collector someone else disabled stays so)

    def hold(self) -> None:
        if self._holds == 0:
            self._since = self._clock()
            if gc.isenabled():
                gc.disable()
                self._disabled = True
        elif self._disabled and self._clock() - self._since > LONGEST_PAUSE_SECONDS:
            gc.enable()
            self._disabled = False
        self._holds += 1

    def release(self) -> None:
        self._holds -= 1
        if self._holds == 0 and self._disabled:
            gc.enable()
            self._disabled = False


# the process's pause (one collector per process)
PAUSE = CollectorPause()
