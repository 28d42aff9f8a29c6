"""What the etcd backend promises beyond the shared contract: key layout,
progress notifications, fragmented watch responses, leases, compaction helpers."""
from __future__ import annotations

import uuid

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.storage.etcd import EtcdStorage
from kapiserver.storage.etcd.client import Compare, EtcdClient, LeaseNotFoundError, Op
from tests.storage.contract import record_watch, Recorder, sleep, until
from kapiserver.testing.etcd import EtcdServer, shared_etcd, skip_reason


class EtcdBackendTests(unittest.TestCase):
    skip = skip_reason()

    async def setUp(self) -> None:
        self.etcd = shared_etcd()
        self.prefix = f"/backend-{uuid.uuid4().hex[:12]}"
        self.store = EtcdStorage([self.etcd.endpoint], prefix=self.prefix, request_timeout=5.0)
        await self.store.start()
        self.client = EtcdClient([self.etcd.endpoint], request_timeout=5.0)

    async def tearDown(self) -> None:
        await self.store.stop()
        await self.client.close()

    def watch(self, prefix: str, after: int) -> Recorder:
        return record_watch(self, self.store, prefix, after)

    async def test_keys_are_laid_out_like_kube_apiserver(self):
        await self.store.create("/configmaps/default/cm1", b"{}")
        raw = await self.client.range(self.prefix.encode() + b"/configmaps/", self.prefix.encode() + b"/configmapt")
        self.assertEqual([kv.key for kv in raw.kvs], [f"{self.prefix}/configmaps/default/cm1".encode()])

    async def test_progress_notifications_report_the_current_revision(self):
        await self.store.create("/quiet/a", b"x")
        rec = self.watch("/quiet/", await self.store.current_revision())
        await self.store.create("/elsewhere/b", b"y")
        current = await self.store.current_revision()
        # The shared etcd sends progress notifications every 500ms.
        await until(lambda: rec.progress and rec.progress[-1] >= current, timeout=5, what="a progress notification")
        self.assertEqual(rec.events, [])

    async def test_reads_that_wait_share_a_round_trip_and_see_every_write_before_them(self):
        for i in range(0, 30, 2):
            await self.store.create(f"/batch/k{i}", str(i).encode())
        reads = self.store._latest
        trips, served = reads.round_trips, reads.reads
        got = await defer.gatherResults([self.store.get(f"/batch/k{i}") for i in range(30)])
        self.assertEqual([kv.value if kv else None for kv in got],
                         [str(i).encode() if i % 2 == 0 else None for i in range(30)])
        self.assertEqual(reads.reads - served, 30)
        self.assertLessEqual(reads.round_trips - trips, 2)  # the first alone, the rest together
        # a write acknowledged before a read is seen by it, whatever batch the read joins
        first = self.store.get("/batch/k0")
        updated = await self.store.update("/batch/k2", b"new", got[2].mod_revision)
        after = await defer.gatherResults([self.store.get("/batch/k2"), self.store.get("/batch/k1")])
        self.assertEqual((await first).value, b"0")
        self.assertEqual((after[0].value, after[0].mod_revision, after[1]), (b"new", updated.mod_revision, None))

    async def test_update_keeps_the_lease(self):
        lease = await self.store.grant_lease(30)
        kv = await self.store.create("/ev/e1", b"1", lease=lease)
        self.assertEqual(kv.lease, lease)
        updated = await self.store.update("/ev/e1", b"2", kv.mod_revision)
        self.assertEqual(updated.lease, lease)
        self.assertEqual((await self.store.get("/ev/e1")).lease, lease)

    async def test_lease_keepalive_and_revoke(self):
        lease_id, ttl = await self.client.lease_grant(30)
        self.assertGreater(await self.client.lease_keepalive(lease_id), 0)
        await self.store.create("/lr/a", b"x", lease=lease_id)
        await self.client.lease_revoke(lease_id)
        self.assertIsNone(await self.store.get("/lr/a"))
        with self.assertRaises(LeaseNotFoundError):
            await self.client.lease_keepalive(lease_id)

    async def test_txn_failure_returns_current_value(self):
        key = f"{self.prefix}/txn/a".encode()
        first = await self.client.txn([Compare.create_revision(key, "EQUAL", 0)], [Op.put(key, b"v1")], [])
        self.assertTrue(first.succeeded)
        second = await self.client.txn([Compare.create_revision(key, "EQUAL", 0)], [Op.put(key, b"v2")],
                                       [Op.range(key)])
        self.assertFalse(second.succeeded)
        self.assertEqual(second.responses[0].kvs[0].value, b"v1")
        self.assertEqual(second.responses[0].kvs[0].mod_revision, first.revision)

    async def test_compact_to_current_minus_keeps_recent_history(self):
        for i in range(10):
            await self.store.create(f"/cm/{i}", b"x")
        current = await self.store.current_revision()
        target = await self.store.compact_to_current_minus(3)
        self.assertEqual(target, current - 3)
        self.assertEqual(await self.store.compacted_revision(), current - 3)
        # A fresh backend (no cached knowledge) finds the same compacted revision.
        other = EtcdStorage([self.etcd.endpoint], prefix=self.prefix)
        self.addCleanup(other.stop)
        self.assertEqual(await other.compacted_revision(), current - 3)
        self.assertEqual(len((await self.store.list("/cm/", revision=current - 3)).items), 7)
        self.assertEqual(await self.store.compact_to_current_minus(100), 0)

    async def test_check_health(self):
        await self.store.check_health()


class EtcdFragmentTests(unittest.TestCase):
    """etcd splits watch responses larger than --max-request-bytes (+512 KiB gRPC overhead) into fragments."""

    skip = skip_reason()

    async def test_fragmented_catch_up_is_reassembled(self):
        etcd = EtcdServer(["--max-request-bytes", "8192"]).start()
        self.addCleanup(etcd.cleanup)
        store = EtcdStorage([etcd.endpoint], request_timeout=5.0)
        self.addCleanup(store.stop)
        await store.start()
        r0 = await store.current_revision()
        values = [f"{i:04d}".encode() * 1500 for i in range(100)]  # 6 KB each, 600 KB in all
        for i, value in enumerate(values):
            await store.create(f"/big/{i:04d}", value)
        rec = Recorder()
        w = store.watch("/big/", r0, rec.on_event, rec.on_error)
        self.addCleanup(w.cancel)
        await until(lambda: len(rec.events) == 100, timeout=10, what="100 large events")
        await sleep(0.1)
        self.assertEqual([e.kv.value for e in rec.events], values)
        self.assertGreater(w.fragmented_responses, 0, "etcd should have fragmented the catch-up")
