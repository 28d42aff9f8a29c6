"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Several servers on one etcd each run an elector for the same Lease; the one
whose ``holderIdentity`` the Lease names runs the leader-only controllers.

* A candidate tries every ``retry_period`` (with jitter) to take the Lease:
  it creates it when absent, and takes it over when the holder has not
  renewed for ``lease_duration``, measured on the candidate's own clock from
  when it last saw the Lease change (so clocks need not agree), bumping
  ``leaseTransitions``.
* The leader renews ``renewTime`` every ``retry_period``.  When it has not
  managed to renew for ``renew_deadline`` (storage unreachable, or another
  holder took the Lease) it stops leading at once: ``on_stopped_leading``
  stops its controllers before any other server may take over (the deadline
  is shorter than the lease duration), and it goes back to being a candidate.
* Every write is a compare-and-swap on the Lease's resourceVersion, so two
  candidates never both win.
* On a clean shutdown the leader releases the Lease (empty holder, one-second
  duration, as client-go's ReleaseOnCancel), so another server takes over at
  once instead of after the lease duration.

kube-controller-manager's defaults: lease 15 s, renew deadline 10 s, retry 2 s.
"""
from __future__ import annotations

import math
import random
import socket
from typing import Any, Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.machinery import errors, meta, metrics
from kapiserver.registry.store import Store

log = Logger()

JITTER_FACTOR = 1.2  # client-go's JitterFactor for the acquire loop


def default_identity() -> str:
    """kube-controller-manager's holder identity: ``<hostname>_<uuid>``."""
    return f"{socket.gethostname()}_{meta.new_uid()}"


class LeaderElector:
    def __init__(self, leases: Store, namespace: str, name: str, identity: str, reactor: IReactorTime,
                 on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None],
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0) -> None:
        if not lease_duration > renew_deadline > JITTER_FACTOR * retry_period > 0:
            raise ValueError("leader election needs lease duration > renew deadline > 1.2 x retry period > 0")
        self.leases = leases
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.reactor = reactor
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.leading = False
        self.observed: Optional[dict] = None  # the Lease as last read or written
        self.observed_spec: Optional[dict] = None
        self.observed_at = 0.0  # our clock when the Lease last changed
        self.last_renewed = 0.0
        self._timer: Any = None
        self._deadline: Any = None  # fires renew_deadline after the last renewal
        self._stopped = False
        self._attempt: Optional[defer.Deferred] = None
        metrics.CLIENT_METRICS.set_leader(self.name, False)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Try once now (a lone server leads at once), then keep trying / renewing."""
        log.info("leader election for lease {ns}/{name} as {identity}", ns=self.namespace, name=self.name,
                 identity=self.identity)
        await self._tick()

    async def stop(self) -> None:
        """Stop electing; a leader stops its controllers and releases the Lease."""
        self._stopped = True
        for timer in (self._timer, self._deadline):
            if timer is not None and timer.active():
                timer.cancel()
        if self._attempt is not None and not self._attempt.called:
            try:
                await self._attempt
            except Exception:
                pass
        if self.leading:
            self._stop_leading("shutting down")
        if (self.observed_spec or {}).get("holderIdentity") == self.identity:
            await self._release()  # also when the last attempt won the Lease as we stopped

    def _schedule(self) -> None:
        if self._stopped:
            return
        delay = self.retry_period
        if not self.leading:
            delay *= 1 + random.random() * JITTER_FACTOR
        self._timer = self.reactor.callLater(delay, self._run_tick)

    def _run_tick(self) -> None:
        self._attempt = defer.Deferred.fromCoroutine(self._tick())

    async def _tick(self) -> None:
        if self._stopped:
            return
        # one attempt may not outlast the retry period: a hung storage call must not keep
        # the loop (and a leader that cannot renew) waiting
        attempt = defer.Deferred.fromCoroutine(self._try_acquire_or_renew())
        attempt.addTimeout(self.retry_period, self.reactor)
        try:
            acquired = await attempt
        except Exception as e:
            # (a timeout's own text is "(<seconds>, 'Deferred')")
            why = (f"the attempt did not finish within the retry period ({self.retry_period:g}s)"
                   if isinstance(e, defer.TimeoutError) else e if str(e) else type(e).__name__)
            log.warn("leader election for lease {ns}/{name}: {err}", ns=self.namespace, name=self.name, err=why)
            acquired = False
        if self._stopped:
            return
        if acquired:
            self.last_renewed = self.reactor.seconds()
            if self._deadline is not None and self._deadline.active():
                self._deadline.cancel()
            self._deadline = self.reactor.callLater(self.renew_deadline, self._renew_deadline_passed)
            if not self.leading:
                self.leading = True
                metrics.CLIENT_METRICS.set_leader(self.name, True)
                log.info("{identity} became leader of lease {ns}/{name}", identity=self.identity,
                         ns=self.namespace, name=self.name)
                self.on_started_leading()
        self._schedule()

    def _renew_deadline_passed(self) -> None:
        """No renewal for renew_deadline: stop the controllers now, before anyone may take over."""
        if self.leading and not self._stopped:
            self._stop_leading(f"could not renew for {self.renew_deadline:g}s")

    def _stop_leading(self, why: str) -> None:
        self.leading = False
        metrics.CLIENT_METRICS.set_leader(self.name, False)
        log.warn("{identity} stopped leading lease {ns}/{name}: {why}", identity=self.identity,
                 ns=self.namespace, name=self.name, why=why)
        try:
            self.on_stopped_leading()
        except Exception:
            log.failure("stopping the leader's controllers failed")

    # ------------------------------------------------------------ the Lease

    def _record(self, acquire_time: str, transitions: int, duration: Optional[int] = None,
                holder: Optional[str] = None) -> dict:
        now = meta.now_rfc3339_micro()
        return {"holderIdentity": self.identity if holder is None else holder,
                "leaseDurationSeconds": math.ceil(self.lease_duration) if duration is None else duration,
                "acquireTime": acquire_time or now, "renewTime": now, "leaseTransitions": transitions}

    def _observe(self, lease: dict) -> None:
        spec = lease.get("spec") or {}
        if spec != self.observed_spec:
            self.observed_spec = spec
            self.observed_at = self.reactor.seconds()
        self.observed = lease

    def _lease_valid(self) -> bool:
        duration = (self.observed_spec or {}).get("leaseDurationSeconds") or 0
        return self.observed_at + duration > self.reactor.seconds()

    async def _write(self, spec: dict) -> bool:
        """Compare-and-swap the Lease against what we last read; False when someone else wrote first."""
        assert self.observed is not None
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": self.namespace,
                              "resourceVersion": self.observed["metadata"]["resourceVersion"]},
                 "spec": spec}
        try:
            written, _ = await self.leases.update(self.namespace, self.name, lease)
        except errors.StatusError as e:
            if e.code in (404, 409):
                self.observed = None
                return False
            raise
        self._observe(written)
        return True

    async def _try_acquire_or_renew(self) -> bool:
        spec_now = self.observed_spec or {}
        # fast path: the leader renews with what it wrote last
        if self.leading and self.observed is not None and self._lease_valid():
            if await self._write(self._record(spec_now.get("acquireTime", ""),
                                              spec_now.get("leaseTransitions") or 0)):
                return True
        try:
            lease = await self.leases.get(self.namespace, self.name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            created = await self._create()
            return created
        self._observe(lease)
        spec = self.observed_spec or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and self._lease_valid():
            return False  # held by another server that renewed recently
        if holder == self.identity:
            record = self._record(spec.get("acquireTime", ""), spec.get("leaseTransitions") or 0)
        else:
            record = self._record("", (spec.get("leaseTransitions") or 0) + 1)
        return await self._write(record)

    async def _create(self) -> bool:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": self.name, "namespace": self.namespace},
                 "spec": self._record("", 0)}
        try:
            created = await self.leases.create(self.namespace, lease)
        except errors.StatusError as e:
            if e.code == 409:  # another server created it first
                return False
            raise
        self._observe(created)
        return True

    async def _release(self) -> None:
        """Give the Lease up (client-go's release): no holder, a one-second duration."""
        if self.observed is None:
            return
        spec = self.observed_spec or {}
        try:
            if await self._write(self._record(meta.now_rfc3339_micro(), spec.get("leaseTransitions") or 0,
                                              duration=1, holder="")):
                log.info("released lease {ns}/{name}", ns=self.namespace, name=self.name)
        except Exception as e:
            log.warn("releasing lease {ns}/{name} failed: {err}", ns=self.namespace, name=self.name, err=e)
