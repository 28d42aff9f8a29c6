"""Per-call CPU of named functions inside a server process (``bench/function_cost.py``).

Python imports ``sitecustomize`` at start when it is on ``sys.path``; the
benchmark puts this directory there for the server it starts, with
``KAPI_TIME_FUNCTIONS`` naming ``module:Qualified.name`` targets.  A
background thread replaces each target with a wrapper once its module has
defined it; the wrapper adds the calling thread's CPU time
(``time.thread_time``) and a call to the target's totals, which SIGUSR2
writes as JSON to ``KAPI_TIME_OUT`` and then resets.

Unlike a profiler, only the named functions pay anything (one wrapper call
each), so call-heavy code is not overstated.  Times are inclusive (callees
count) and on the calling thread.  Coroutine functions cannot be timed this
way (their body runs later, in pieces); they are refused.  A name is replaced
where it is looked up: a method on its class, or a module attribute that
callers reach through the module (``from m import f`` made before the
replacement keeps the original).
"""
import functools
import inspect
import json
import os
import signal
import sys
import threading
import time

_TARGETS = [t.strip() for t in os.environ.get("KAPI_TIME_FUNCTIONS", "").split(",") if t.strip()]
_OUT = os.environ.get("KAPI_TIME_OUT", "")
_PATCH_SECONDS = 60.0
_totals: dict = {}  # target -> [calls, cpu seconds]
_problems: dict = {}  # target -> why it is not timed


def _timed(name, fn):
    totals = _totals[name] = [0, 0.0]
    clock = time.thread_time

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        started = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[0] += 1
            totals[1] += clock() - started
    return wrapper


def _resolve(target):
    """(owner, attribute, function), or None while its module is still being imported."""
    module_name, _, qualname = target.partition(":")
    owner = sys.modules.get(module_name)
    if owner is None:
        return None
    *path, attribute = qualname.split(".")
    try:
        for part in path:
            owner = getattr(owner, part)
        return owner, attribute, getattr(owner, attribute)
    except AttributeError:
        return None


def _patch_all():
    pending = list(_TARGETS)
    deadline = time.monotonic() + _PATCH_SECONDS
    while pending and time.monotonic() < deadline:
        for target in list(pending):
            found = _resolve(target)
            if found is None:
                continue
            pending.remove(target)
            owner, attribute, fn = found
            if inspect.iscoroutinefunction(fn):
                _problems[target] = "a coroutine function (its body runs later, in pieces)"
                continue
            setattr(owner, attribute, _timed(target, fn))
        time.sleep(0.02)
    for target in pending:
        _problems[target] = "not found"


def _dump(signum, frame):
    report = {"functions": {name: {"calls": calls, "cpu_seconds": seconds}
                            for name, (calls, seconds) in _totals.items()},
              "not_timed": dict(_problems)}
    partial = _OUT + ".partial"
    with open(partial, "w") as f:
        json.dump(report, f)
    os.replace(partial, _OUT)  # the reader never sees half a report
    for totals in _totals.values():
        totals[0], totals[1] = 0, 0.0


if _TARGETS and _OUT:
    signal.signal(signal.SIGUSR2, _dump)
    threading.Thread(target=_patch_all, name="function-timer", daemon=True).start()
