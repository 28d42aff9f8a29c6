"""The etcd backend when things break: restarts, outages, broken streams, compaction.

Each test class gets its own etcd (these tests stop and restart it); a small
TCP relay between the backend and etcd lets a test cut the watch stream while
etcd itself keeps running.
"""
from __future__ import annotations

import json
import os

from twisted.internet import defer, reactor
from twisted.protocols import portforward
from twisted.trial import unittest

from kapiserver.storage.etcd import EtcdStorage
from kapiserver.storage.etcd.client import _error_from_body
from kapiserver.storage.interface import CompactedError, UnavailableError
from kapiserver.testing.cases import HANG_GUARD
from tests.storage.contract import record_watch, Recorder, sleep, until
from kapiserver.testing.etcd import EtcdCluster, EtcdServer, free_port, skip_reason
from kapiserver.testing.netns import NetworkNamespace, unavailable_reason


class _Relay:
    """A cuttable TCP relay 127.0.0.1:<port> → etcd."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.port = free_port()
        self.listener = None
        self.factory = None

    def up(self) -> None:
        self.factory = _TrackingFactory("127.0.0.1", self.target_port)
        self.listener = reactor.listenTCP(self.port, self.factory, interface="127.0.0.1")

    async def down(self) -> None:
        """Refuse new connections and drop the open ones."""
        listener, self.listener = self.listener, None
        if listener is not None:
            await listener.stopListening()
        for proto in list(getattr(self.factory, "open", ())):
            proto.transport.abortConnection()


class _TrackingServer(portforward.ProxyServer):
    def connectionMade(self):
        self.factory.open.add(self)
        super().connectionMade()

    def connectionLost(self, reason):
        self.factory.open.discard(self)
        super().connectionLost(reason)


class _TrackingFactory(portforward.ProxyFactory):
    protocol = _TrackingServer

    def __init__(self, host, port):
        super().__init__(host, port)
        self.open = set()


def seq(i: int) -> bytes:
    return f"seq-{i:05d}".encode()


class EtcdFaultTests(unittest.TestCase):
    skip = skip_reason()

    def setUp(self) -> None:
        self.etcd = EtcdServer().start()
        self.addCleanup(self.etcd.cleanup)

    async def storage(self, endpoints=None, timeout: float = 2.0) -> EtcdStorage:
        store = EtcdStorage(endpoints or [self.etcd.endpoint], prefix="/faults", request_timeout=timeout)
        await store.start()
        self.addCleanup(store.stop)
        return store

    def watch(self, store: EtcdStorage, prefix: str, after: int) -> Recorder:
        return record_watch(self, store, prefix, after)

    async def test_watch_survives_etcd_restart_without_gap_or_duplicate(self):
        store = await self.storage()
        r0 = await store.current_revision()
        recs = [self.watch(store, "/s/", r0), self.watch(store, "/s/", r0)]
        await defer.gatherResults([store.create(f"/s/{i:05d}", seq(i)) for i in range(150)])
        # Kill etcd while events may still be in flight to the watchers; let
        # the reactor see the dropped connections before etcd comes back.
        self.etcd.stop(kill=True)
        await sleep(0.05)
        self.etcd.start()
        for i in range(150, 300):
            await store.create(f"/s/{i:05d}", seq(i))
        for rec in recs:
            await until(lambda: len(rec.events) >= 300, timeout=10, what="all 300 events after restart")
        await sleep(0.2)
        for rec in recs:
            # Concurrent creates commit in any order: each exactly once, revisions without a hole.
            self.assertEqual(sorted(e.kv.value for e in rec.events), [seq(i) for i in range(300)])
            self.assertEqual(rec.revisions(), list(range(r0 + 1, r0 + 301)))
            self.assertEqual(rec.errors, [])
            self.assertGreaterEqual(rec.handle.reconnects, 1)

    async def test_outage_fails_and_watch_resumes_after(self):
        store = await self.storage(timeout=2.0)
        rec = self.watch(store, "/o/", await store.current_revision())
        await store.create("/o/before", b"1")
        await until(lambda: len(rec.events) == 1, what="first event")
        self.etcd.stop()
        for call in (lambda: store.get("/o/before"), lambda: store.create("/o/x", b"x"),
                     lambda: store.list("/o/"), store.current_revision, store.check_health):
            # a call to a stopped etcd fails, naming it; it does not wait for etcd to come back
            # (how soon it fails is the request timeout's, not asserted here)
            with self.assertRaises(UnavailableError) as caught:
                await defer.ensureDeferred(call()).addTimeout(HANG_GUARD, reactor)
            self.assertIn(self.etcd.endpoint, str(caught.exception))
        self.etcd.start()
        await store.create("/o/after", b"2")
        await until(lambda: len(rec.events) == 2, timeout=10, what="the event after the outage")
        self.assertEqual([e.kv.key for e in rec.events], ["/o/before", "/o/after"])
        self.assertEqual(rec.errors, [])

    async def test_failover_to_the_next_endpoint(self):
        dead = f"http://127.0.0.1:{free_port()}"
        store = await self.storage(endpoints=[dead, self.etcd.endpoint])
        kv = await store.create("/f/a", b"v")
        self.assertEqual((await store.get("/f/a")).mod_revision, kv.mod_revision)
        rec = self.watch(store, "/f/", kv.mod_revision - 1)
        await until(lambda: len(rec.events) == 1, what="watch through the second endpoint")

    async def test_unreachable_etcd_names_every_endpoint(self):
        dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
        store = EtcdStorage(dead, request_timeout=2.0)
        self.addCleanup(store.stop)
        with self.assertRaises(UnavailableError) as caught:
            await store.start()
        for endpoint in dead:
            self.assertIn(endpoint, str(caught.exception))

    async def test_broken_stream_resumes_without_gap(self):
        relay = _Relay(self.etcd.client_port)
        relay.up()
        self.addCleanup(relay.down)
        direct = await self.storage()
        relayed = await self.storage(endpoints=[f"http://127.0.0.1:{relay.port}"])
        rec = self.watch(relayed, "/b/", await direct.current_revision())
        for i in range(20):
            await direct.create(f"/b/{i:03d}", seq(i))
        await until(lambda: len(rec.events) == 20, what="events before the cut")
        await relay.down()
        for i in range(20, 40):
            await direct.create(f"/b/{i:03d}", seq(i))
        await sleep(0.2)
        relay.up()
        await until(lambda: len(rec.events) == 40, timeout=10, what="events after the cut")
        await sleep(0.1)
        self.assertEqual([e.kv.value for e in rec.events], [seq(i) for i in range(40)])
        self.assertEqual(rec.errors, [])

    async def test_compaction_while_watch_is_behind_ends_with_compacted(self):
        relay = _Relay(self.etcd.client_port)
        relay.up()
        self.addCleanup(relay.down)
        direct = await self.storage()
        relayed = await self.storage(endpoints=[f"http://127.0.0.1:{relay.port}"])
        rec = self.watch(relayed, "/c/", await direct.current_revision())
        await direct.create("/c/0", b"x")
        await until(lambda: len(rec.events) == 1, what="first event")
        await relay.down()
        for i in range(1, 5):
            await direct.create(f"/c/{i}", b"x")
        await direct.compact(await direct.current_revision())
        relay.up()
        await until(lambda: rec.errors, timeout=10, what="CompactedError after reconnecting")
        self.assertIsInstance(rec.errors[0], CompactedError)
        self.assertEqual(rec.errors[0].requested, rec.events[0].revision + 1)
        self.assertEqual(rec.errors[0].compacted, await direct.current_revision())
        self.assertEqual(len(rec.events), 1, "nothing after the gap may be delivered")
        self.assertFalse(rec.handle.active)


class EtcdMemberCutOffTests(unittest.TestCase):
    """Three members, the third in a network namespace, cut off from its peers while it still answers
    its clients: etcd keeps a watch on it open, sending progress notifications of its stale revision,
    and answers reads and writes with errors after its own timeout."""

    skip = skip_reason() or unavailable_reason()

    def setUp(self) -> None:
        self.netns = NetworkNamespace(f"kapiserver-cutoff-{os.getpid()}", index=2).create()
        self.addCleanup(self.netns.delete)
        flags = ["--experimental-watch-progress-notify-interval", "500ms"]
        host = self.netns.host_address
        self.members = [EtcdServer(flags, name="m1", host=host), EtcdServer(flags, name="m2", host=host),
                        EtcdServer(flags, name="m3", host=self.netns.peer_address,
                                   command_prefix=self.netns.exec_prefix)]
        self.cluster = EtcdCluster(self.members).start()
        self.addCleanup(self.cluster.cleanup)

    async def storage(self, members: list[EtcdServer]) -> EtcdStorage:
        store = EtcdStorage([m.endpoint for m in members], prefix="/cutoff", request_timeout=15.0)
        await store.start()
        self.addCleanup(store.stop)
        return store

    async def test_a_client_of_the_cut_off_member_moves_to_the_others(self):
        isolated = self.members[2]
        store = await self.storage([isolated, *self.members[:2]])  # the cut-off member first
        majority = await self.storage(self.members[:2])
        rec = record_watch(self, store, "/c/", await store.current_revision())
        await store.create("/c/before", b"1")
        await until(lambda: len(rec.events) == 1, what="the event before the cut")
        self.netns.cut_except(isolated.client_port)
        self.addCleanup(self.netns.heal)
        await until(lambda: self.cluster.leader(self.members[:2]) is not None, timeout=HANG_GUARD,
                    what="a leader on the majority side")
        written = await majority.create("/c/during", b"2")
        # a consistent read gets the write: the cut-off member's error sends it to the next member
        read = await defer.ensureDeferred(store.get("/c/during")).addTimeout(HANG_GUARD, reactor)
        self.assertEqual((read.value, read.mod_revision), (b"2", written.mod_revision))
        # and the watch, moved along, delivers it while the member is still cut off
        await until(lambda: len(rec.events) == 2, timeout=HANG_GUARD, what="the event written during the cut")
        self.assertEqual([e.kv.key for e in rec.events], ["/c/before", "/c/during"])
        self.assertEqual(rec.errors, [])


class GatewayErrorTests(unittest.TestCase):
    """What etcd's gateway answers when a member cannot serve is an UnavailableError (the client then
    leaves that member), whatever gRPC code the gateway put on it."""

    def test_answers_of_a_member_that_cannot_serve(self):
        for body in ({"error": "etcdserver: request timed out", "code": 14, "message": "etcdserver: request timed out"},
                     {"error": "etcdserver: no leader", "code": 14, "message": "etcdserver: no leader"},
                     {"error": "etcdserver: leader changed", "code": 14, "message": "etcdserver: leader changed"},
                     # a proposal on a member that knows no leader, through the gateway: code 2 (Unknown)
                     {"error": "context deadline exceeded", "code": 2, "message": "context deadline exceeded"}):
            error = _error_from_body(503, json.dumps(body).encode(), "/v3/kv/txn")
            self.assertIsInstance(error, UnavailableError, body)
            # what a client is told: etcd's words, as upstream passes its etcd client's on
            self.assertEqual(error.client_message, body["message"])

    def test_other_errors_are_not(self):
        body = {"error": "etcdserver: mvcc: required revision is a future revision", "code": 11,
                "message": "etcdserver: mvcc: required revision is a future revision"}
        self.assertNotIsInstance(_error_from_body(400, json.dumps(body).encode(), "/v3/kv/range"), UnavailableError)
        body = {"error": "etcdserver: too many operations in txn request", "code": 3,
                "message": "etcdserver: too many operations in txn request"}
        self.assertNotIsInstance(_error_from_body(400, json.dumps(body).encode(), "/v3/kv/txn"), UnavailableError)
