"""Connection hygiene against a real server process: what misbehaving clients get, and that the
others are still served meanwhile.

* a client that never finishes its request head (or its TLS handshake, or that trickles header
  lines) is cut off, unanswered, while kubectl and the Python client are served;
* an idle keep-alive connection is closed, not before the idle timeout; an HTTP/2 peer that
  stops answering PINGs is closed, a live one keeps its quiet watch;
* a request line or header over upstream's 1 MiB is answered 431 at once (HTTP/1.1 in Go's
  words; HTTP/2 on its stream), where Twisted's 16 KiB limit used to leave it hanging;
* an unauthenticated request with a body is answered 401 before its body is read: the client
  is still sending when the answer comes, and the server neither grows nor spools to disk;
* ``Expect: 100-continue`` gets 413 over the body limit, 401 without credentials, 100 otherwise;
* connections beyond the per-address cap are closed as they are accepted;
* HTTP/2 advertises upstream's stream limit and header list size.

Every limit is reached here (a connection that is never cut off fails the test when its guard
against a hang gives up) but not timed: ``tests/endpoints/test_connection_deadlines.py`` steps
each one on a fake clock.
"""
from __future__ import annotations

import json
import select
import socket
import ssl
import time

from twisted.trial import unittest

from kapiserver.testing.cases import HANG_GUARD
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server
from tests.e2e.rawclients import (H2Client, address, connect, descriptor_targets, head_of, read_until_closed,
                                  upload_until_answered)

HEADER_TIMEOUT = 2.0
HANDSHAKE_TIMEOUT = 2.0
IDLE_TIMEOUT = 3.0
PER_ADDRESS = 30
PING_INTERVAL = 2.0
PING_TIMEOUT = 5.0  # a live client answers well within it, however busy the machine
CONFIG = {
    "authentication": {"anonymous": False},
    "connections": {"tls_handshake_timeout_seconds": HANDSHAKE_TIMEOUT,
                    "request_header_timeout_seconds": HEADER_TIMEOUT,
                    "idle_timeout_seconds": IDLE_TIMEOUT,
                    "max_connections_per_address": PER_ADDRESS,
                    "http2_ping_interval_seconds": PING_INTERVAL,
                    "http2_ping_timeout_seconds": PING_TIMEOUT},
}
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
LIMIT = 3 * 1024 * 1024
TRICKLE = 0.5  # seconds between the lines of a slow client's request head


def _server() -> ServerProcess:
    return shared_server("connection-hygiene", extra_config=CONFIG)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _temporary_files(pid: int) -> list[str]:
    """Deleted files the server holds open: where Twisted used to spool request bodies."""
    return [target for target in descriptor_targets(pid) if target.endswith("(deleted)")]


def _post_head(length: int, extra: str = "") -> bytes:
    return (f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


class TimeLimitTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = _server()

    def test_slow_header_client_is_cut_off_while_others_are_served(self) -> None:
        slow = [connect(self.server) for _ in range(5)]
        for sock in slow:
            sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: 1\r\n")
        # meanwhile, real clients are served (kubectl over HTTP/2, the Python client over HTTP/1.1)
        self.assertIn("default", self.server.kubectl("get", "namespaces", "-o", "name").stdout)
        from kubernetes import client
        namespaces = client.CoreV1Api(self.server.python_client()).list_namespace()
        self.assertIn("kube-system", [n.metadata.name for n in namespaces.items])
        for sock in slow:
            self.assertEqual(read_until_closed(sock), b"")  # cut off, unanswered (as Go's ReadHeaderTimeout)

    def test_a_header_trickle_does_not_extend_the_limit(self) -> None:
        # a header line every half second, for as long as the connection lasts: only a limit
        # counted from the first byte of the head ends it
        sock = connect(self.server)
        sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\n")
        sock.settimeout(TRICKLE)
        for _ in range(int(HANG_GUARD / TRICKLE)):
            try:
                answer = sock.recv(65536)  # (reading, not select(): TLS records that carry no data come too)
            except socket.timeout:
                answer = None
            except (ConnectionResetError, ssl.SSLError):
                answer = b""
            if answer is not None:
                self.assertEqual(answer, b"")  # closed, unanswered
                break
            try:
                sock.sendall(b"X-Trickle: 1\r\n")
            except OSError:
                self.assertEqual(read_until_closed(sock), b"")  # closed while a line was sent
                break
        else:
            self.fail("a header line every half second kept the connection open")

    def test_an_unfinished_tls_handshake_is_cut_off(self) -> None:
        raw = socket.create_connection(address(self.server), timeout=HANG_GUARD)
        self.addCleanup(raw.close)
        raw.sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        try:
            self.assertEqual(raw.recv(100), b"")
        except ConnectionResetError:
            pass  # aborted

    def test_idle_keep_alive_connection_is_closed(self) -> None:
        sock = connect(self.server)
        sent = time.monotonic()  # the server's idle timer starts after this, once it has answered
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(HANG_GUARD)
        first = sock.recv(65536)
        self.assertEqual(head_of(first)[0], 200)
        self.assertEqual(read_until_closed(sock), b"")
        self.assertGreaterEqual(time.monotonic() - sent, IDLE_TIMEOUT)  # not before the idle timeout


class HTTP2LivenessTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = _server()

    def watch(self) -> tuple[H2Client, int]:
        h2 = H2Client(self.server)
        self.addCleanup(h2.close)
        stream = h2.request("GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0")
        h2.pump(lambda: h2.responses[stream]["status"] is not None)
        self.assertEqual(h2.responses[stream]["status"], 200)
        return h2, stream

    def test_a_live_client_keeps_its_quiet_watch(self) -> None:
        h2, stream = self.watch()
        # it answers the server's PINGs (h2 does) while nothing else happens: a second PING
        # comes only after the first was answered and another interval passed in silence
        h2.pump(lambda: h2.pings >= 2)
        self.assertGreaterEqual(h2.pings, 2)
        self.assertFalse(h2.responses[stream]["ended"])
        self.assertIsNone(h2.responses[stream]["reset"])
        self.assertEqual(h2.goaways, [])

    def test_a_dead_peer_is_closed_after_an_unanswered_ping(self) -> None:
        h2, stream = self.watch()
        # read as a dead peer's socket would be, answering nothing: the server pings, waits
        # for the answer and ends the connection (the watch alone never would)
        data = read_until_closed(h2.sock)
        self.assertIn(b"\x00\x00\x08\x06\x00", data)  # a PING frame header, never answered
        self.assertFalse(h2.responses[stream]["ended"])

    def test_idle_connection_is_closed_with_goaway(self) -> None:
        h2 = H2Client(self.server)
        self.addCleanup(h2.close)
        sent = time.monotonic()  # the server's idle timer starts after this, once the stream ended
        stream = h2.request("GET", "/readyz")
        h2.pump(lambda: h2.responses[stream]["ended"])
        h2.pump(lambda: bool(h2.goaways))
        self.assertEqual(h2.goaways, [(stream, 0)])
        self.assertGreaterEqual(time.monotonic() - sent, IDLE_TIMEOUT)  # not before the idle timeout


class HeaderSizeTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = _server()

    def test_oversized_header_is_431_at_once(self) -> None:
        sock = connect(self.server)
        try:
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n")
        except OSError:
            pass  # answered and closed while still sending
        data = read_until_closed(sock)  # (Twisted's own 16 KiB limit left it unanswered for good)
        self.assertEqual(data, b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; "
                               b"charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")

    def test_oversized_request_line_is_431(self) -> None:
        sock = connect(self.server)
        try:
            sock.sendall(b"GET /readyz?" + b"a" * (1100 * 1024) + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        except OSError:
            pass
        data = read_until_closed(sock)
        self.assertEqual(head_of(data)[0], 431)

    def test_headers_over_16_kib_but_under_the_limit_are_served(self) -> None:
        sock = connect(self.server)
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: "
                     + b"a" * (900 * 1024) + b"\r\n\r\n")
        data = read_until_closed(sock)
        status, body = head_of(data)
        self.assertEqual((status, body.split(b"\r\n")[1]), (200, b"ok"))  # a chunked "ok"

    def test_http2_header_list_over_the_limit_is_431_on_its_stream(self) -> None:
        h2 = H2Client(self.server)
        self.addCleanup(h2.close)
        h2.pump(lambda: bool(h2.remote_settings))
        # upstream's SETTINGS: 100 streams, Go's header list size for MaxHeaderBytes = 1 MiB
        self.assertEqual(h2.remote_settings.get(0x3), 100)
        self.assertEqual(h2.remote_settings.get(0x6), (1 << 20) + 320)
        big = h2.request("GET", "/readyz", headers=(("x-big", "a" * ((1 << 20) + 1000)),))
        ok = h2.request("GET", "/readyz")
        h2.pump(lambda: h2.responses[big]["ended"] and h2.responses[ok]["ended"])
        self.assertEqual(h2.responses[big]["status"], 431)
        self.assertEqual(h2.responses[ok]["status"], 200)  # the connection is still good


class BodyBeforeAuthenticationTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = _server()

    def test_unauthenticated_large_body_is_refused_without_being_read(self) -> None:
        pid = self.server.proc.pid
        rss_before = _rss_kib(pid)
        sock = connect(self.server, certificate=False)
        body_bytes = 200 * 1024 * 1024
        answer, sent = upload_until_answered(sock, _post_head(body_bytes), body_bytes)
        self.assertIsNotNone(answer)
        status, body = head_of(answer)
        self.assertEqual(status, 401)
        self.assertIn(b"Connection: close", answer)
        self.assertEqual(_temporary_files(pid), [])
        # the client was far from done: it only filled socket buffers
        self.assertLess(sent, body_bytes // 4)
        self.assertLess(_rss_kib(pid) - rss_before, 32 * 1024)
        read_until_closed(sock)  # and the connection ends
        sock.close()

    def test_unauthenticated_small_body_is_401_status(self) -> None:
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(2) + b"{}")
        data = read_until_closed(sock)
        status, body = head_of(data)
        self.assertEqual(status, 401)
        self.assertEqual(json.loads(body)["reason"], "Unauthorized")

    def test_expect_continue_over_the_limit_is_413_not_100(self) -> None:
        sock = connect(self.server)
        sock.sendall(_post_head(LIMIT + 1, "Expect: 100-continue\r\n"))
        data = read_until_closed(sock)
        status, body = head_of(data)
        self.assertEqual(status, 413)
        self.assertNotIn(b"100 Continue", data)
        self.assertEqual(json.loads(body), {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"Request entity too large: limit is {LIMIT}", "reason": "RequestEntityTooLarge",
            "code": 413})

    def test_expect_continue_without_credentials_is_401(self) -> None:
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(100, "Expect: 100-continue\r\n"))
        data = read_until_closed(sock)
        self.assertEqual(head_of(data)[0], 401)
        self.assertNotIn(b"100 Continue", data)

    def test_expect_continue_within_the_limit_continues(self) -> None:
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "expect-"},
                           "data": {"k": "v"}}).encode()
        sock = connect(self.server)
        sock.sendall(_post_head(len(body), "Expect: 100-continue\r\nConnection: close\r\n"))
        sock.settimeout(10)
        self.assertEqual(sock.recv(1000), b"HTTP/1.1 100 Continue\r\n\r\n")
        sock.sendall(body)
        data = read_until_closed(sock)
        self.assertEqual(head_of(data)[0], 201)

    def test_body_far_over_the_limit_is_413_before_it_is_sent(self) -> None:
        # past what is read and dropped (64 MiB): answered at once, the connection closed
        sock = connect(self.server)
        answer, sent = upload_until_answered(sock, _post_head(50 * LIMIT), 50 * LIMIT)
        self.assertIsNotNone(answer)
        self.assertEqual(head_of(answer)[0], 413)
        self.assertLess(sent, 25 * LIMIT)
        sock.close()

    def test_chunked_body_over_the_limit_is_413_and_the_connection_kept(self) -> None:
        sock = connect(self.server)
        head = (f"POST {CONFIGMAPS} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Transfer-Encoding: chunked\r\n\r\n").encode()
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        sock.sendall(head + chunk * 80 + b"0\r\n\r\n")  # 5 MiB: read and dropped, then answered
        sock.settimeout(10)
        data = b""
        while b"}" not in data:
            data += sock.recv(65536)
        status, body = head_of(data)
        self.assertEqual((status, json.loads(body)["reason"]), (413, "RequestEntityTooLarge"))
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        self.assertEqual(head_of(read_until_closed(sock))[0], 200)

    def test_python_client_creating_an_object_over_the_limit_gets_413(self) -> None:
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        api = client.CoreV1Api(self.server.python_client())
        with self.assertRaises(ApiException) as caught:
            api.create_namespaced_config_map("default", {"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": "too-big"},
                                                         "data": {"k": "x" * (LIMIT + 500_000)}})
        self.assertEqual(caught.exception.status, 413)
        self.assertEqual(json.loads(caught.exception.body)["message"], f"Request entity too large: limit is {LIMIT}")

    def test_http2_unauthenticated_body_is_401_and_the_stream_reset(self) -> None:
        h2 = H2Client(self.server, certificate=False)
        self.addCleanup(h2.close)
        upload = h2.request("POST", CONFIGMAPS, headers=(("content-type", "application/json"),
                                                         ("content-length", str(10 * LIMIT))),
                            body=b"x" * 16384, end=False)
        h2.pump(lambda: h2.responses[upload]["reset"] is not None)
        self.assertEqual(h2.responses[upload]["status"], 401)
        self.assertEqual(h2.responses[upload]["reset"], 0)  # NO_ERROR: stop sending, nothing is wrong
        # the connection still serves other streams
        other = h2.request("GET", "/readyz")
        h2.pump(lambda: h2.responses[other]["ended"])
        self.assertEqual(h2.responses[other]["status"], 401)


class AnonymousBodyTests(unittest.TestCase):
    """With anonymous requests on (the default), an anonymous request is authorized before its
    body is read, as upstream's handler reads it only after the authorization filter: one that
    will be a 403 is answered without it; an allowed one is read, bounded."""

    def setUp(self) -> None:
        self.server = shared_server(extra_config=E2E_CONFIG)

    def test_anonymous_create_reaches_authorization(self) -> None:
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "anon"}}).encode()
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(len(body), "Connection: close\r\n") + body)
        status, payload = head_of(read_until_closed(sock))
        self.assertEqual(status, 403)
        self.assertIn('User "system:anonymous" cannot create resource "configmaps"', json.loads(payload)["message"])

    def test_forbidden_anonymous_upload_is_answered_without_its_body(self) -> None:
        pid = self.server.proc.pid
        rss_before = _rss_kib(pid)
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(LIMIT - 1024))  # within the limit; the body never comes
        # answered while the body is still to come (it never does): waiting for it, the server
        # would never answer, or answer its request timeout instead of the 403
        data = read_until_closed(sock)
        status, payload = head_of(data)
        self.assertEqual(status, 403)
        self.assertIn('User "system:anonymous" cannot create resource "configmaps"', json.loads(payload)["message"])
        self.assertLess(_rss_kib(pid) - rss_before, 16 * 1024)

    def test_forbidden_anonymous_body_over_the_limit_is_403_as_upstream(self) -> None:
        # upstream's handler would read (and limit) the body only after authorization refused it
        sock = connect(self.server, certificate=False)
        answer, _ = upload_until_answered(sock, _post_head(10 * LIMIT), 10 * LIMIT)
        self.assertEqual(head_of(answer or b"HTTP/1.1 0 none\r\n\r\n")[0], 403)
        sock.close()


class ConnectionCapTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = _server()

    def test_connections_over_the_per_address_cap_are_closed_at_accept(self) -> None:
        host, port = address(self.server)
        source = "127.0.0.7"
        held = []
        for _ in range(PER_ADDRESS + 5):
            held.append(socket.create_connection((host, port), timeout=10, source_address=(source, 0)))
        self.addCleanup(lambda: [s.close() for s in held])
        # the refused ones are closed as they are accepted; the others wait in their TLS handshake
        # (seconds from its limit): the first connections to end are the refused ones
        closed: set[socket.socket] = set()
        for _ in range(int(HANG_GUARD / 0.05)):
            readable, _, _ = select.select([s for s in held if s not in closed], [], [], 0.05)
            for sock in readable:
                try:
                    if sock.recv(1) == b"":
                        closed.add(sock)
                except ConnectionResetError:
                    closed.add(sock)
            if len(closed) >= 5:
                break
        self.assertEqual(len(closed), 5)
        # another address is not affected: a TLS client from 127.0.0.1 is served
        sock = connect(self.server)
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        self.assertEqual(head_of(read_until_closed(sock))[0], 200)
