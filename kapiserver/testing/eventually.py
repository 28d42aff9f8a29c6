"""``eventually``: poll until a condition holds, for tests of controllers and operators (which act a moment later).

The timeout only guards against hangs: a test never asserts how long the
operator took (speed belongs to bench/), so it is generous.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")
HANG_GUARD_SECONDS = 60.0


def eventually(probe: Callable[[], T], what: str, timeout: float = HANG_GUARD_SECONDS, interval: float = 0.1) -> T:
    """Call ``probe`` until it returns something true, and return that; AssertionError naming ``what`` at timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(interval)
