"""Leader election on a coordination.k8s.io/v1 Lease: two electors on one real SQLite store,
with short durations (lease 2 s, renew deadline 1.2 s, retry 0.25 s)."""
from __future__ import annotations

import os
import shutil
import tempfile
import time

from twisted.internet import defer, reactor
from twisted.trial import unittest

from kapiserver.apis.coordination import leases
from kapiserver.controllers.leader_election import LeaderElector
from kapiserver.machinery import errors
from kapiserver.registry.store import Store
from kapiserver.storage.sqlite import SQLiteStorage
from kapiserver.testing.cases import ServerTestCase, run, sleep

LEASE, RENEW, RETRY = 2.0, 1.2, 0.25


class BreakableStore(Store):
    """The Lease Store, whose reads and writes fail while ``broken`` (storage unreachable)."""

    broken = False

    async def get(self, *args, **kwargs):
        if self.broken:
            raise errors.internal_error("storage unreachable")
        return await super().get(*args, **kwargs)

    async def update(self, *args, **kwargs):
        if self.broken:
            raise errors.internal_error("storage unreachable")
        return await super().update(*args, **kwargs)


class LeaderElectionTests(unittest.TestCase):
    async def _setup(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="kapiserver-election-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.storage = SQLiteStorage(os.path.join(self.tmp, "db"))
        await self.storage.start()
        self.addCleanup(self.storage.stop)
        self.events: list[tuple[float, str, str]] = []  # (time, identity, started|stopped)

    def setUp(self):
        return defer.Deferred.fromCoroutine(self._setup())

    def elector(self, identity: str, store=None) -> LeaderElector:
        store = store or Store(leases.resource_type(), self.storage)
        e = LeaderElector(store, "kube-system", "ctl", identity, reactor,
                          lambda: self.events.append((time.monotonic(), identity, "started")),
                          lambda: self.events.append((time.monotonic(), identity, "stopped")),
                          lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY)
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(e.stop()))
        return e

    async def lease(self) -> dict:
        return await Store(leases.resource_type(), self.storage).get("kube-system", "ctl")

    async def until(self, predicate, timeout: float) -> float:
        start = time.monotonic()
        while not predicate():
            if time.monotonic() - start > timeout:
                self.fail(f"not within {timeout}s; events: {self.events}")
            await sleep(0.02)
        return time.monotonic() - start

    def test_one_leader_and_a_quick_handover_on_release(self):
        async def go():
            a, b = self.elector("a"), self.elector("b")
            await a.start()
            await b.start()
            self.assertEqual((a.leading, b.leading), (True, False))
            spec = (await self.lease())["spec"]
            self.assertEqual((spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]),
                             ("a", 2, 0))
            self.assertRegex(spec["renewTime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
            await sleep(3 * RETRY)  # renewals keep the lead where it is
            self.assertEqual((a.leading, b.leading), (True, False))
            await a.stop()  # a clean shutdown releases the Lease
            self.assertEqual((await self.lease())["spec"]["holderIdentity"], "")
            waited = await self.until(lambda: b.leading, timeout=RETRY * 2.2 + 1)
            self.assertLess(waited, LEASE)  # no need to wait for the lease to expire
            spec = (await self.lease())["spec"]
            self.assertEqual((spec["holderIdentity"], spec["leaseTransitions"]), ("b", 1))
            self.assertEqual([e[1:] for e in self.events], [("a", "started"), ("a", "stopped"), ("b", "started")])
        return defer.Deferred.fromCoroutine(go())

    def test_a_dead_leader_is_replaced_after_the_lease_duration(self):
        async def go():
            a, b = self.elector("a"), self.elector("b")
            await a.start()
            await b.start()
            # a crashes: no more renewals, no release
            a._stopped = True
            for timer in (a._timer, a._deadline):
                if timer is not None and timer.active():
                    timer.cancel()
            last_renewal = time.monotonic()
            await self.until(lambda: b.leading, timeout=LEASE + 3 * RETRY * 2.2)
            self.assertGreaterEqual(time.monotonic() - last_renewal, LEASE - RETRY)
            self.assertEqual((await self.lease())["spec"]["holderIdentity"], "b")
        return defer.Deferred.fromCoroutine(go())

    def test_a_leader_that_cannot_renew_stops_before_another_takes_over(self):
        async def go():
            flaky = BreakableStore(leases.resource_type(), self.storage)
            a, b = self.elector("a", flaky), self.elector("b")
            await a.start()
            await b.start()
            flaky.broken = True
            broke_at = time.monotonic()
            await self.until(lambda: not a.leading, timeout=RENEW + RETRY * 3)
            stopped_after = time.monotonic() - broke_at
            self.assertLess(stopped_after, LEASE)
            await self.until(lambda: b.leading, timeout=LEASE + 3 * RETRY * 2.2)
            # never two leaders: a's controllers stopped before b's started
            self.assertEqual([e[1:] for e in self.events], [("a", "started"), ("a", "stopped"), ("b", "started")])
            self.assertLess(self.events[1][0], self.events[2][0])
            flaky.broken = False  # a can reach storage again: it stays a follower
            await sleep(4 * RETRY)
            self.assertEqual((a.leading, b.leading), (False, True))
        return defer.Deferred.fromCoroutine(go())

    def test_durations_must_be_ordered(self):
        store = Store(leases.resource_type(), self.storage)
        with self.assertRaises(ValueError):
            LeaderElector(store, "kube-system", "x", "id", reactor, lambda: None, lambda: None,
                          lease_duration=10, renew_deadline=10, retry_period=2)


class ServerLeaderElectionTests(ServerTestCase):
    """A lone server leads at once: its controllers work from the start."""

    @run
    async def test_a_lone_server_holds_the_lease_and_runs_the_controllers(self) -> None:
        lease = (await self.client.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/"
                                       "kapiserver-controllers")).body
        self.assertEqual(lease["spec"]["holderIdentity"], self.server.api.controllers.elector.identity)
        self.assertEqual((lease["spec"]["leaseDurationSeconds"], lease["spec"]["leaseTransitions"]), (15, 0))
        await self.client.post("/api/v1/namespaces", {"metadata": {"name": "gone"}})
        await self.client.delete("/api/v1/namespaces/gone")
        await self.wait_for(lambda: _absent(self.client, "/api/v1/namespaces/gone"))


class NoLeaderElectionTests(ServerTestCase):
    settings = {"leader_elect": False}

    @run
    async def test_without_leader_election_every_server_runs_the_controllers(self) -> None:
        # no election Lease (the server's identity Lease aside)
        r = await self.client.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
                                  "?labelSelector=!apiserver.kubernetes.io/identity")
        self.assertEqual(r.body["items"], [])
        await self.client.post("/api/v1/namespaces", {"metadata": {"name": "gone"}})
        await self.wait_for(lambda: _present(self.client, "/api/v1/namespaces/gone/serviceaccounts/default"))
        await self.client.delete("/api/v1/namespaces/gone")
        await self.wait_for(lambda: _absent(self.client, "/api/v1/namespaces/gone"))


async def _absent(client, path: str) -> bool:
    return (await client.get(path)).code == 404


async def _present(client, path: str) -> bool:
    return (await client.get(path)).code == 200
