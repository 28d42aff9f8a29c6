"""Leader election on a coordination.k8s.io/v1 Lease: two electors on one real SQLite store,
with short durations (lease 2 s, renew deadline 1.2 s, retry 0.25 s).

The electors' timers run on a fake clock the tests step (``task.Clock``); their storage calls
run on the real reactor, and each step lets them finish before the next.  What the durations
promise (a takeover after the lease duration, a leader stopping at its renew deadline, before
anyone may take over) is then exact, whatever the machine's load.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Optional

from twisted.internet import defer, reactor, task
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial import unittest

from kapiserver.apis.coordination import leases
from kapiserver.controllers.leader_election import JITTER_FACTOR, LeaderElector
from kapiserver.machinery import errors
from kapiserver.registry.store import Store
from kapiserver.storage.sqlite import SQLiteStorage
from kapiserver.testing.cases import HANG_GUARD, ServerTestCase, run
from tests.storage.contract import until

LEASE, RENEW, RETRY = 2.0, 1.2, 0.25
STEP = 0.05  # the fake clock moves this much at a time
LONGEST_RETRY = RETRY * (1 + JITTER_FACTOR)  # a candidate's retry period with the most jitter


class LeaseStore(Store):
    """The Lease Store, counting the calls in flight; its reads and writes fail while ``broken``
    (storage unreachable)."""

    broken = False
    hung = False  # calls never answer (until the elector gives up on them)
    in_flight = 0

    async def _call(self, call: Callable[[], Any]) -> Any:
        if self.broken:
            raise errors.internal_error("storage unreachable")
        if self.hung:
            await defer.Deferred()
        self.in_flight += 1
        try:
            return await call()
        finally:
            self.in_flight -= 1

    async def get(self, *args, **kwargs):
        return await self._call(lambda: super(LeaseStore, self).get(*args, **kwargs))

    async def create(self, *args, **kwargs):
        return await self._call(lambda: super(LeaseStore, self).create(*args, **kwargs))

    async def update(self, *args, **kwargs):
        return await self._call(lambda: super(LeaseStore, self).update(*args, **kwargs))


class LeaderElectionTests(unittest.TestCase):
    async def _setup(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="kapiserver-election-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.storage = SQLiteStorage(os.path.join(self.tmp, "db"))
        await self.storage.start()
        self.addCleanup(self.storage.stop)
        self.clock = task.Clock()
        self.stores: list[LeaseStore] = []
        self.events: list[tuple[float, str, str]] = []  # (fake time, identity, started|stopped)

    def setUp(self):
        return defer.Deferred.fromCoroutine(self._setup())

    def store(self) -> LeaseStore:
        store = LeaseStore(leases.resource_type(), self.storage)
        self.stores.append(store)
        return store

    def elector(self, identity: str, store: Optional[LeaseStore] = None) -> LeaderElector:
        e = LeaderElector(store or self.store(), "kube-system", "ctl", identity, self.clock,
                          lambda: self.events.append((self.clock.seconds(), identity, "started")),
                          lambda: self.events.append((self.clock.seconds(), identity, "stopped")),
                          lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY)
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(e.stop()))
        return e

    async def lease(self) -> dict:
        return await Store(leases.resource_type(), self.storage).get("kube-system", "ctl")

    async def step(self, seconds: float, until_true: Optional[Callable[[], bool]] = None) -> float:
        """Move the fake clock on by up to ``seconds``, ``STEP`` at a time, letting the storage
        calls the timers start finish before the next step; stop as soon as ``until_true()``
        holds.  Returns the fake seconds that passed."""
        steps = 0
        while steps < round(seconds / STEP) and not (until_true is not None and until_true()):
            self.clock.advance(STEP)
            steps += 1
            await until(lambda: all(s.in_flight == 0 for s in self.stores), timeout=HANG_GUARD,
                        what="the electors' storage calls")
        return steps * STEP

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
            await self.step(2 * LEASE)  # renewals keep the lead where it is, past the lease duration
            self.assertEqual((a.leading, b.leading), (True, False))
            await a.stop()  # a clean shutdown releases the Lease
            self.assertEqual((await self.lease())["spec"]["holderIdentity"], "")
            fake_seconds_to_take_over = await self.step(2 * LEASE, until_true=lambda: b.leading)
            self.assertTrue(b.leading)
            # b's next try takes it: no need to wait for the lease to expire
            self.assertLessEqual(fake_seconds_to_take_over, LONGEST_RETRY + STEP)
            self.assertLess(fake_seconds_to_take_over, LEASE)
            spec = (await self.lease())["spec"]
            self.assertEqual((spec["holderIdentity"], spec["leaseTransitions"]), ("b", 1))
            self.assertEqual([e[1:] for e in self.events], [("a", "started"), ("a", "stopped"), ("b", "started")])
        return defer.Deferred.fromCoroutine(go())

    def test_a_dead_leader_is_replaced_after_the_lease_duration(self):
        async def go():
            a, b = self.elector("a"), self.elector("b")
            await a.start()
            await b.start()
            await self.step(3 * RETRY)  # a renews a few times; b watches the Lease change
            # a crashes: no more renewals, no release
            a._stopped = True
            for timer in (a._timer, a._deadline):
                if timer is not None and timer.active():
                    timer.cancel()
            fake_seconds_to_take_over = await self.step(3 * LEASE, until_true=lambda: b.leading)
            self.assertTrue(b.leading)
            # a renewed at most a retry period before it crashed; b, which saw that renewal at its
            # next try, takes over at its first try once what it saw is a lease duration old
            self.assertGreaterEqual(fake_seconds_to_take_over, LEASE - RETRY)
            self.assertLessEqual(fake_seconds_to_take_over, LEASE + 2 * LONGEST_RETRY + STEP)
            self.assertEqual((await self.lease())["spec"]["holderIdentity"], "b")
        return defer.Deferred.fromCoroutine(go())

    def test_a_leader_that_cannot_renew_stops_before_another_takes_over(self):
        async def go():
            flaky = self.store()
            a, b = self.elector("a", flaky), self.elector("b")
            await a.start()
            await b.start()
            flaky.broken = True
            fake_seconds_to_stop = await self.step(3 * LEASE, until_true=lambda: not a.leading)
            self.assertFalse(a.leading)
            # at the renew deadline after its last renewal (at most a retry period before the break)
            self.assertGreaterEqual(fake_seconds_to_stop, RENEW - RETRY)
            self.assertLessEqual(fake_seconds_to_stop, RENEW + STEP)
            self.assertLess(fake_seconds_to_stop, LEASE)
            await self.step(3 * LEASE, until_true=lambda: b.leading)
            self.assertTrue(b.leading)
            # never two leaders: a's controllers stopped before b's started
            self.assertEqual([e[1:] for e in self.events], [("a", "started"), ("a", "stopped"), ("b", "started")])
            self.assertLess(self.events[1][0], self.events[2][0])
            flaky.broken = False  # a can reach storage again: it stays a follower
            await self.step(4 * RETRY)
            self.assertEqual((a.leading, b.leading), (False, True))
        return defer.Deferred.fromCoroutine(go())

    def test_an_attempt_that_outlasts_the_retry_period_is_logged_as_such(self):
        async def go():
            hung = self.store()
            a = self.elector("a", hung)
            await a.start()
            warnings: list[str] = []

            def observe(event: dict) -> None:
                if event.get("log_namespace") == "kapiserver.controllers.leader_election":
                    warnings.append(formatEvent(event))
            globalLogPublisher.addObserver(observe)
            self.addCleanup(globalLogPublisher.removeObserver, observe)
            hung.hung = True
            await self.step(3 * RETRY, until_true=lambda: bool(warnings))
            hung.hung = False
            self.clock.advance(RETRY)  # the attempt in flight gives up, so the elector can stop
            self.assertEqual(warnings[0], "leader election for lease kube-system/ctl: "
                                          f"the attempt did not finish within the retry period ({RETRY:g}s)")
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
