"""Who holds the GIL when the reactor waits: a probe loaded into every Python process started with
``PYTHONPATH=$PWD/bench/stall_probe`` (absolute: the server runs elsewhere; Python imports
``sitecustomize`` at start).

``STALL_PROBE_LOG=FILE``: a daemon thread sleeps 1 ms at a time; when a sleep takes longer than
``STALL_PROBE_MS`` (default 15), some thread held the GIL that long, and the probe appends the gap
and the innermost ``STALL_PROBE_DEPTH`` (4) frames of every other thread to FILE: the thread still in (or just out of) the
long call is the one to read.  ``STALL_PROBE_GC_LOG=FILE``: every collection of the cyclic
collector over 2 ms, with its generation, duration and thread.  Both perturb what they measure a
little (the probe thread asks for the GIL every millisecond): take latencies from runs without it.

    STALL_PROBE_LOG=/tmp/stalls.log PYTHONPATH=$PWD/bench/stall_probe python bench/large_bodies.py --case pod-100k-env-vars
"""
from __future__ import annotations

import gc
import os
import sys
import threading
import time
import traceback


def _gc_logger(path: str) -> None:
    out = open(path, "a")
    started = [0.0]

    def timed(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        ms = (time.perf_counter() - started[0]) * 1000
        if ms > 2:
            out.write(f"{os.getpid()} {time.time():.3f} gen{info['generation']} {ms:.1f} ms "
                      f"collected={info['collected']} thread={threading.current_thread().name}\n")
            out.flush()
    gc.callbacks.append(timed)


def _stall_probe(path: str, threshold_ms: float, depth: int) -> None:
    out = open(path, "a")
    me = threading.get_ident()
    while True:
        t0 = time.perf_counter()
        time.sleep(0.001)
        gap = (time.perf_counter() - t0) * 1000
        if gap <= threshold_ms:
            continue
        names = {t.ident: t.name for t in threading.enumerate()}
        out.write(f"=== {os.getpid()} {time.time():.3f} gap {gap:.1f} ms\n")
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            frames = traceback.extract_stack(frame)[-depth:]
            out.write(f"  [{names.get(ident, ident)}] " + " < ".join(
                f"{f.name}@{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames)) + "\n")
        out.flush()


if os.environ.get("STALL_PROBE_GC_LOG"):
    _gc_logger(os.environ["STALL_PROBE_GC_LOG"])
if os.environ.get("STALL_PROBE_LOG"):
    threading.Thread(target=_stall_probe, name="stall-probe", daemon=True,
                     args=(os.environ["STALL_PROBE_LOG"], float(os.environ.get("STALL_PROBE_MS", "15")),
                           int(os.environ.get("STALL_PROBE_DEPTH", "4")))).start()
