"""Freed heap memory given back to the system on a timer (server/heap_trim.py)."""
from __future__ import annotations

from twisted.internet import task
from twisted.trial import unittest

from kapiserver.server.heap_trim import HeapTrimmer, libc_malloc_trim


def resident_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) * 1024


class HeapTrimmerTests(unittest.TestCase):
    def trimmer(self, interval: float) -> tuple[HeapTrimmer, task.Clock, list[int]]:
        clock = task.Clock()
        calls: list[int] = []

        def trim() -> int:
            calls.append(int(clock.seconds()))
            return 1
        trimmer = HeapTrimmer(interval, clock, trim)
        self.addCleanup(trimmer.stop)
        return trimmer, clock, calls

    def test_trims_at_start_then_once_per_interval_until_stopped(self):
        trimmer, clock, calls = self.trimmer(60)
        trimmer.start()
        clock.pump([30] * 7)  # 210 seconds
        self.assertEqual(calls, [0, 60, 120, 180])
        trimmer.stop()
        clock.pump([60] * 3)
        self.assertEqual((calls, trimmer.trims), ([0, 60, 120, 180], 4))

    def test_interval_zero_never_trims(self):
        trimmer, clock, calls = self.trimmer(0)
        trimmer.start()
        clock.pump([60] * 5)
        self.assertEqual(calls, [])

    def test_without_malloc_trim_nothing_runs(self):
        clock = task.Clock()
        trimmer = HeapTrimmer(60, clock, None)
        trimmer.start()
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_glibc_trim_gives_freed_heap_memory_back(self):
        trim = libc_malloc_trim()
        if trim is None:
            raise unittest.SkipTest("the C library has no malloc_trim")
        # 80 MB in heap chunks (above pymalloc's 512 bytes, below glibc's mmap threshold), then
        # one chunk after them still in use: free() alone cannot shrink the heap past it
        blocks = [bytes(2000) for _ in range(40_000)]
        pin = bytes(2000)
        del blocks
        before = resident_bytes()
        trim()
        self.assertGreater(before - resident_bytes(), 40 << 20)
        del pin
