"""Giving the heap memory a process freed back to the system (glibc's ``malloc_trim``).

glibc keeps what is freed in its heap for the next allocations and returns it to the
system only from the heap's top, which a single chunk still in use pins.  A server
frees a lot at once: a big list joins and writes tens of megabytes of bytes, then
drops them, and those pages stay resident until a later allocation reuses them.  At
30,000 ConfigMaps and 6,000 Pods, 31 to 34 MB of about 430 MB RSS after bench/scale.py's
lists was such free memory; one ``malloc_trim(0)`` gave it back and took about 3 ms.
So, as Go's runtime returns unused heap with its background scavenger, a timer trims
the heap every ``memory.heap_trim_interval_seconds`` (0: never), and once as the server
becomes ready: what a start allocated and dropped (the bootstrap's decoded objects, the
definitions read) is about 0.3 MiB of an idle process's RSS.

It runs on the reactor: glibc locks an arena while it trims it, so from another thread
the reactor's own allocations would wait for it just the same.  Where the C library has
no ``malloc_trim`` (musl, macOS) nothing is trimmed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable, Optional

from twisted.internet import task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

log = Logger()


def libc_malloc_trim() -> Optional[Callable[[], int]]:
    """``malloc_trim(0)`` of this process's C library (1 when it returned memory), or None
    where the C library has none."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


class HeapTrimmer:
    """Calls ``trim`` at :meth:`start` and then every ``interval`` seconds of ``reactor`` time
    until :meth:`stop` (never when ``interval`` is 0 or there is no ``trim``)."""

    def __init__(self, interval: float, reactor: IReactorTime,
                 trim: Optional[Callable[[], int]] = None) -> None:
        self.interval = interval
        self.trim = trim
        self.trims = 0  # how many times the heap was trimmed (tests)
        self._loop = task.LoopingCall(self._tick)
        self._loop.clock = reactor

    def start(self) -> None:
        if self.interval <= 0 or self._loop.running:
            return
        if self.trim is None:
            log.info("the C library has no malloc_trim: freed heap memory is not given back periodically")
            return
        self._loop.start(self.interval, now=True).addErrback(
            lambda f: log.failure("heap trimming stopped", f))

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def _tick(self) -> None:
        assert self.trim is not None
        self.trim()
        self.trims += 1
