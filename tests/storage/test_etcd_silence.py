"""A watch stream that stays open but goes silent is detected and resumed elsewhere.

The backend reaches etcd through two endpoints: a TCP proxy first, etcd
itself second.  Black-holing the proxy (connections stay open, no byte moves)
is a network partition the client cannot see; the silence timeout must notice
it, and the watch must resume on the healthy endpoint without a gap or a
duplicate.  The shared etcd sends progress notifications every 500 ms, which
keep a healthy but idle watch from looking silent.
"""
from __future__ import annotations

import itertools
import socket
import time

from twisted.internet import protocol, reactor, task
from twisted.logger import globalLogPublisher
from twisted.trial import unittest
from twisted.web.client import URI

from kapiserver.server.config import ConfigError, config_from_dict
from kapiserver.app.service import build_storage
from kapiserver.storage.etcd import EtcdStorage
from kapiserver.storage.etcd.keepalive import KEEPALIVE_IDLE, KeepAliveEndpointFactory
from kapiserver.storage.etcd.websocket import WebSocketStream
from kapiserver.testing.cases import HANG_GUARD
from tests.storage.contract import record_watch, Recorder, sleep, until
from kapiserver.testing.etcd import shared_etcd, skip_reason
from kapiserver.testing.tcpproxy import TCPProxy

_prefixes = itertools.count()


def seq(i: int) -> bytes:
    return f"seq-{i:05d}".encode()


class _FakeTransport:
    def __init__(self) -> None:
        self.stopped = False

    def write(self, data: bytes) -> None:
        pass

    def abortConnection(self) -> None:
        self.stopped = True


class StreamSilenceTests(unittest.TestCase):
    """The silence check itself, on a fake clock."""

    def stream(self, timeout: float):
        clock = task.Clock()
        silences: list[float] = []
        stream = WebSocketStream(b"127.0.0.1:2379", "/v3/watch", lambda doc: None, clock, timeout, silences.append)
        transport = _FakeTransport()
        stream.makeConnection(transport)
        return clock, stream, transport, silences

    def test_a_stream_that_keeps_talking_is_never_aborted(self):
        clock, stream, transport, silences = self.stream(2.0)
        for _ in range(20):
            clock.advance(1.5)
            stream.dataReceived(b'{"result": {}}\n')
        self.assertFalse(transport.stopped)
        self.assertEqual(silences, [])
        # One timer at a time however much data flows.
        self.assertEqual(len(clock.getDelayedCalls()), 1)

    def test_a_silent_stream_is_aborted_after_the_timeout(self):
        clock, stream, transport, silences = self.stream(2.0)
        clock.advance(1.0)
        stream.dataReceived(b"partial")
        clock.advance(1.9)
        self.assertFalse(transport.stopped, "1.9 s of silence is below the 2 s timeout")
        clock.advance(0.1)
        self.assertTrue(transport.stopped)
        self.assertTrue(stream.silent)
        self.assertEqual(len(silences), 1)
        self.assertAlmostEqual(silences[0], 2.0, places=3)
        self.assertEqual(clock.getDelayedCalls(), [])

    def test_timeout_zero_never_aborts(self):
        clock, stream, transport, silences = self.stream(0.0)
        clock.advance(3600)
        self.assertFalse(transport.stopped)
        self.assertEqual(clock.getDelayedCalls(), [])


class EtcdWatchSilenceTests(unittest.TestCase):
    skip = skip_reason()

    def setUp(self) -> None:
        self.etcd = shared_etcd()
        self.prefix = f"/silence-{time.time_ns()}-{next(_prefixes)}"
        self.proxy = TCPProxy(self.etcd.client_port).start()
        self.addCleanup(self.proxy.stop)
        self.warnings: list[dict] = []

        def observe(event: dict) -> None:
            if "sent nothing" in (event.get("log_format") or ""):
                self.warnings.append(event)
        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)

    async def storage(self, endpoints: list[str], silence_timeout: float = 0.0) -> EtcdStorage:
        store = EtcdStorage(endpoints, prefix=self.prefix, request_timeout=2.0,
                            watch_silence_timeout=silence_timeout)
        await store.start()
        self.addCleanup(store.stop)
        return store

    def watch(self, store: EtcdStorage, after: int) -> Recorder:
        return record_watch(self, store, "/s/", after)

    async def watch_through_proxy(self, silence_timeout: float):
        direct = await self.storage([self.etcd.endpoint])
        watched = await self.storage([self.proxy.endpoint, self.etcd.endpoint], silence_timeout)
        rec = self.watch(watched, await direct.current_revision())
        for i in range(10):
            await direct.create(f"/s/{i:05d}", seq(i))
        await until(lambda: len(rec.events) == 10, what="events before the partition")
        self.assertTrue(self.proxy.connections, "the watch must go through the proxy (first endpoint)")
        return direct, rec

    async def test_silent_stream_resumes_on_the_healthy_endpoint(self):
        direct, rec = await self.watch_through_proxy(silence_timeout=1.5)
        # Idle but healthy: progress notifications keep the stream alive.
        await sleep(2.0)
        self.assertEqual((rec.handle.reconnects, rec.handle.silences), (0, 0),
                         "an idle stream with progress notifications must not be taken for a silent one")
        self.proxy.black_hole()
        accepted = self.proxy.accepted
        for i in range(10, 40):
            await direct.create(f"/s/{i:05d}", seq(i))
            await sleep(0.02)
        # without the silence check the watch would wait on the black hole for good (the test below)
        await until(lambda: len(rec.events) >= 40, timeout=HANG_GUARD, what="every event after the partition")
        await sleep(0.2)
        self.assertEqual([e.kv.value for e in rec.events], [seq(i) for i in range(40)])
        self.assertEqual(rec.errors, [])
        self.assertEqual(rec.handle.silences, 1)
        self.assertEqual(len(self.warnings), 1, "one warning per detection")
        # The reconnect went straight to the healthy endpoint: the silent one
        # is tried last, so no request timeout is spent waiting on it.
        self.assertEqual(self.proxy.accepted, accepted, "the silent endpoint must not be retried first")

    async def test_without_timeout_a_silent_stream_stalls(self):
        direct, rec = await self.watch_through_proxy(silence_timeout=0)
        self.proxy.black_hole()
        await direct.create("/s/lost", b"x")
        await sleep(3.0)
        self.assertEqual(len(rec.events), 10, "nothing arrives through a black hole without the timeout")
        self.assertEqual(rec.handle.reconnects, 0)
        self.assertEqual(self.warnings, [])


class KeepAliveTests(unittest.TestCase):
    async def test_connections_to_etcd_have_tcp_keepalive(self):
        listener = reactor.listenTCP(0, protocol.Factory.forProtocol(protocol.Protocol), interface="127.0.0.1")
        self.addCleanup(listener.stopListening)
        uri = URI.fromBytes(f"http://127.0.0.1:{listener.getHost().port}/".encode())
        proto = await KeepAliveEndpointFactory(reactor).endpointForURI(uri).connect(
            protocol.Factory.forProtocol(protocol.Protocol))
        sock = proto.transport.getHandle()
        self.addCleanup(proto.transport.loseConnection)
        self.assertEqual(sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE), 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            self.assertEqual(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE), KEEPALIVE_IDLE)


class SilenceTimeoutConfigTests(unittest.TestCase):
    def etcd_config(self, **etcd):
        return {"storage": {"backend": "etcd3", "etcd": {"servers": ["http://127.0.0.1:2379"], **etcd}}}

    def test_the_configured_timeout_reaches_the_watches(self):
        storage = build_storage(config_from_dict(self.etcd_config(watch_silence_timeout_seconds=15)))
        self.addCleanup(storage.stop)
        self.assertEqual(storage.backend.watch_silence_timeout, 15.0)

    def test_off_by_default(self):
        storage = build_storage(config_from_dict(self.etcd_config()))
        self.addCleanup(storage.stop)
        self.assertEqual(storage.backend.watch_silence_timeout, 0.0)

    def test_negative_timeout_is_refused(self):
        with self.assertRaises(ConfigError) as caught:
            config_from_dict(self.etcd_config(watch_silence_timeout_seconds=-1), source="apiserver.yaml")
        self.assertEqual(str(caught.exception), "apiserver.yaml: key 'storage.etcd.watch_silence_timeout_seconds': "
                                                "must not be negative (0 turns the check off)")
