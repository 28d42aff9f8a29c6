"""Storage leases shared between writes, so expiring kinds (Events) do not
grant one lease per object (upstream's storage LeaseManager)."""
from __future__ import annotations

import time
from typing import Callable

from kapiserver.storage.interface import Storage

# A lease is reused for writes within this many seconds of its grant; its TTL
# is stretched by the same amount so no object lives shorter than asked.
REUSE_WINDOW_SECONDS = 60


class LeaseReuser:
    def __init__(self, storage: Storage, clock: Callable[[], float] = time.monotonic) -> None:
        self._storage = storage
        self._clock = clock
        self._leases: dict[int, tuple[int, float]] = {}  # ttl -> (lease id, granted at)

    async def lease_for(self, ttl_seconds: int) -> int:
        now = self._clock()
        cached = self._leases.get(ttl_seconds)
        if cached and now - cached[1] < REUSE_WINDOW_SECONDS:
            return cached[0]
        lease = await self._storage.grant_lease(ttl_seconds + REUSE_WINDOW_SECONDS)
        self._leases[ttl_seconds] = (lease, now)
        return lease
