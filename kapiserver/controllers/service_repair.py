"""The repair of the Service allocation bitmaps (upstream's ipallocator and
portallocator repair controllers).

Every server runs it, as upstream's kube-apiservers all do: at startup (the
first run creates the ``RangeAllocation`` records, so allocation works on a
fresh store and after an upgrade from stores that had none) and every three
minutes.  A run reads both records, then lists every Service (a consistent
list, so it sees at least what the records saw) and rebuilds each bitmap from
the values Services hold:

* a value held by a Service but not marked is marked ("not allocated; repairing");
* a value held by two Services, or outside the range (the range was changed),
  is logged: such a Service must be recreated;
* a value marked but held by no Service may be a create still in flight: it
  stays marked, and is freed only when it was found unowned on three runs in
  a row (upstream's numRepairsBeforeLeakCleanup).

The rebuilt record is written only if the record is still as read
(compare-and-swap against its mod revision); when an allocation came in
between, the run is retried.  Until the first run succeeded,
``/readyz/poststarthook/start-service-ip-repair-controllers`` fails.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.apis.core.range_allocation import Snapshot, StoredRange
from kapiserver.apis.core.service_allocator import ServiceAllocator, cluster_ips_of, node_ports_of
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import ListOptions
from kapiserver.registry.store import Store
from kapiserver.storage import interface as st

log = Logger()

REPAIR_INTERVAL_SECONDS = 180.0  # upstream's repairLoopInterval
FIRST_RUN_RETRY_SECONDS = 1.0
LEAK_CHECKS = 3  # runs that must find a value unowned before it is freed
CONFLICT_ATTEMPTS = 5
READY_CHECK = "poststarthook/start-service-ip-repair-controllers"


class RangeRepair:
    """The repair of one range; ``leaks`` counts down, per offset, the runs left before it is freed."""

    def __init__(self, stored: StoredRange, values_of: Callable[[dict], Iterable[Any]],
                 offset_of: Callable[[Any], Optional[int]], what: str) -> None:
        self.stored = stored
        self.values_of = values_of
        self.offset_of = offset_of
        self.what = what
        self.leaks: dict[int, int] = {}

    def rebuild(self, snapshot: Optional[Snapshot], services: list[dict]) -> tuple[AllocationBitmap, dict[int, int]]:
        """The bitmap the Services call for (plus values still on probation) and the new leak counts."""
        rebuilt = self.stored.empty()
        same_range = snapshot is not None and snapshot.range == self.stored.range_spec
        stored = self.stored.bitmap_of(snapshot) if snapshot is not None and same_range else None
        for svc in services:
            md = svc.get("metadata") or {}
            who = f"{md.get('namespace', '')}/{md.get('name', '')}"
            for value in dict.fromkeys(self.values_of(svc.get("spec") or {})):
                offset = self.offset_of(value)
                if offset is None:
                    log.warn("the {what} {value} of service {who} is not within the range {range}; please recreate",
                             what=self.what, value=value, who=who, range=self.stored.range_spec)
                    continue
                if not rebuilt.allocate(offset):
                    log.warn("the {what} {value} of service {who} was assigned to multiple services; please "
                             "recreate", what=self.what, value=value, who=who)
                    continue
                if stored is not None:
                    if not stored.has(offset):
                        log.warn("the {what} {value} of service {who} is not allocated; repairing",
                                 what=self.what, value=value, who=who)
                    stored.release(offset)
        leaks: dict[int, int] = {}
        for offset in stored.offsets() if stored is not None else ():
            left = self.leaks.get(offset)
            if left is None:
                log.info("the {what} at offset {offset} may have leaked: flagging for later clean up",
                         what=self.what, offset=offset)
                left = LEAK_CHECKS - 1
            if left > 0:
                leaks[offset] = left - 1
                rebuilt.allocate(offset)
            else:
                log.warn("the {what} at offset {offset} appears to have leaked: cleaning up",
                         what=self.what, offset=offset)
        return rebuilt, leaks

    async def save(self, snapshot: Optional[Snapshot], rebuilt: AllocationBitmap, leaks: dict[int, int]) -> None:
        """Store ``rebuilt`` unless the record changed since ``snapshot`` (raises ConflictError / KeyExistsError)."""
        unchanged = (snapshot is not None and snapshot.range == self.stored.range_spec
                     and self.stored.bitmap_of(snapshot) == rebuilt)
        if not unchanged:
            await self.stored.write_snapshot(rebuilt, snapshot)
        self.leaks = leaks


class ServiceRepair:
    """Both ranges of one server's Service allocator, repaired at startup and periodically."""

    def __init__(self, allocator: ServiceAllocator, services: Store, reactor: IReactorTime,
                 interval: float = REPAIR_INTERVAL_SECONDS) -> None:
        self.services = services
        self.reactor = reactor
        self.interval = interval
        self.ranges = [
            RangeRepair(allocator.ips, cluster_ips_of, allocator.ip_range.offset_of, "cluster IP"),
            RangeRepair(allocator.ports, node_ports_of, allocator.port_range.offset_of, "node port"),
        ]
        self.repaired = False
        self._timer: Any = None
        self._stopped = False

    def check(self) -> None:
        """The readiness check: fails until the first run succeeded."""
        if not self.repaired:
            raise RuntimeError("the service IP and node port allocations are not repaired yet")

    async def start(self) -> None:
        """The first run (retried in the background if it fails), then one every interval."""
        await self._tick()

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    async def _tick(self) -> None:
        if self._stopped:
            return
        try:
            await self.run_once()
            self.repaired = True
            delay = self.interval
        except Exception as e:
            log.warn("repairing the service IP and node port allocations failed: {err}", err=e)
            delay = self.interval if self.repaired else FIRST_RUN_RETRY_SECONDS
        if not self._stopped:
            self._timer = self.reactor.callLater(delay, lambda: defer.Deferred.fromCoroutine(self._tick()))

    async def run_once(self) -> None:
        pending = list(self.ranges)
        for attempt in range(CONFLICT_ATTEMPTS):
            snapshots = [await r.stored.get() for r in pending]
            everything = ListOptions(parse_label_selector(""), parse_field_selector(""))
            services = (await self.services.list("", everything))["items"]
            failed = []
            for repair, snapshot in zip(pending, snapshots):
                rebuilt, leaks = repair.rebuild(snapshot, services)
                try:
                    await repair.save(snapshot, rebuilt, leaks)
                except (st.ConflictError, st.KeyExistsError, st.KeyNotFoundError):
                    failed.append(repair)  # allocated meanwhile: read and list again
            if not failed:
                return
            pending = failed
            await task.deferLater(self.reactor, 0.05 * (attempt + 1), lambda: None)
        raise RuntimeError(f"the allocation records kept changing during {CONFLICT_ATTEMPTS} repair attempts")
