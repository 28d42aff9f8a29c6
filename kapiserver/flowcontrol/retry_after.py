"""The Retry-After of a rejected request (upstream's dropped_requests_tracker.go).

Per priority level, starting at 1 second: doubled (up to 32) when, over the
current value's window, at least three times as many requests per second
were dropped; lowered by one when fewer were dropped than the value.
"""
from __future__ import annotations

from typing import Callable

MAX_RETRY_AFTER = 32


class _LevelStats:
    def __init__(self) -> None:
        self.history: list[tuple[int, int]] = []  # (unix second, dropped in it)
        self.current_second = 0
        self.current_count = 0
        self.retry_after = 1
        self.updated_at = 0

    def record(self, second: int) -> None:
        if second == self.current_second:
            self.current_count += 1
            return
        self._add_history(self.current_second, self.current_count)
        self.current_second = second
        self.current_count = 1
        self._update(second)

    def _add_history(self, second: int, count: int) -> None:
        self.history.append((second, count))
        window = min(2 * self.retry_after, MAX_RETRY_AFTER)
        self.history = [(s, c) for s, c in self.history if second - s <= window]

    def _update(self, now: int) -> None:
        dropped = 0
        for second, count in reversed(self.history):
            if now - second > self.retry_after:
                break
            if second < now:
                dropped += count
        if now - self.updated_at >= self.retry_after and dropped >= 3 * self.retry_after:
            self.retry_after = min(self.retry_after * 2, MAX_RETRY_AFTER)
            self.updated_at = now
            return
        if dropped < self.retry_after and self.retry_after > 1:
            self.retry_after -= 1


class DroppedRequests:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.levels: dict[str, _LevelStats] = {}

    def record(self, level: str) -> None:
        self.levels.setdefault(level, _LevelStats()).record(int(self.clock()))

    def retry_after(self, level: str) -> int:
        stats = self.levels.get(level)
        return stats.retry_after if stats is not None else 1
