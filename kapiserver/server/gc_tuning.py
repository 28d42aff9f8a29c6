"""Garbage-collector settings for a long-running server process.

CPython's defaults (700, 10, 10) run a young collection every 700 net
allocations and a full one every 100 of those.  A server allocates a lot per
request and per watch event, and a full pass over its heap (modules, the
watch cache, hundreds of connections) takes tens of milliseconds during
which no request is answered and no watch stream written: with the defaults,
the p99 write-to-delivery delay of bench/watch_latency.py (500 watchers) was
~190 ms, and ~125 ms with the freeze and these thresholds, all else equal
(most of it from the freeze; the thresholds stay modest so cyclic garbage
does not pile up: the 10-minute soak's RSS stays flat).

Once the server is ready, everything allocated so far lives for the whole
process, so it is moved out of the collector's sight (``gc.freeze``), and
collections run less often.  While it starts, collections are spaced out
too (:func:`begin_startup`): startup allocates mostly what it keeps.  Cyclic
garbage still gets collected: the thresholds only space the passes out.
"""
from __future__ import annotations

import gc

# young-generation allocations between collections (default 700), then how many
# young/middle collections between passes of the next older generation
THRESHOLDS = (10_000, 10, 10)
# while starting: the same young threshold, a middle pass only after ~1M allocations
STARTUP_THRESHOLDS = (10_000, 100, 10)


def begin_startup() -> None:
    """Collect less while the server starts (call once, before importing the server).

    What exists now (the interpreter's and twistd's modules, no garbage) lives as
    long as the process: freeze it.  Then young collections are spaced out and the
    older generations are left alone until READY, where :func:`tune_after_startup`
    freezes what startup made: with the defaults, about 70 ms of a ~0.7 s start went
    to repeated full and middle passes over the freshly imported modules.  If the
    start drags on (storage unreachable), older passes still come, only later.
    """
    gc.freeze()
    gc.set_threshold(*STARTUP_THRESHOLDS)


def tune_after_startup() -> None:
    """Freeze what startup allocated and space collections out (call once, when ready).

    There is no full collection first: it took 20–27 ms of a 0.56 s restart to find
    about 80 unreachable objects (11 KB, left over from building classes), which now
    stay, frozen.
    """
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
