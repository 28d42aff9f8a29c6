"""Connection hygiene against a real server process: what misbehaving clients get, and that the
others are still served meanwhile.

* a client that never finishes its request head (or its TLS handshake) is cut off within the
  configured time limit, unanswered, while kubectl and the Python client are served;
* an idle keep-alive connection is closed after the idle timeout;
* a request line or header over upstream's 1 MiB is answered 431 at once (HTTP/1.1 in Go's
  words; HTTP/2 on its stream), where Twisted's 16 KiB limit used to leave it hanging;
* an unauthenticated request with a body is answered 401 before its body is read: the client
  is still sending when the answer comes, and the server neither grows nor spools to disk;
* ``Expect: 100-continue`` gets 413 over the body limit, 401 without credentials, 100 otherwise;
* connections beyond the per-address cap are closed as they are accepted;
* HTTP/2 advertises upstream's stream limit and header list size.
"""
from __future__ import annotations

import json
import select
import socket
import ssl
import time

from twisted.trial import unittest

from kapiserver.testing.process import ServerProcess, shared_server
from tests.e2e.rawclients import (H2Client, address, connect, descriptor_targets, head_of, read_until_closed,
                                  upload_until_answered)

HEADER_TIMEOUT = 2.0
HANDSHAKE_TIMEOUT = 2.0
IDLE_TIMEOUT = 3.0
PER_ADDRESS = 30
PING_INTERVAL = 2.0
PING_TIMEOUT = 1.0
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
        started = time.monotonic()
        for sock in slow:
            data, _ = read_until_closed(sock, timeout=HEADER_TIMEOUT + 10)
            self.assertEqual(data, b"")  # cut off, unanswered (as Go's ReadHeaderTimeout)
        self.assertLess(time.monotonic() - started, HEADER_TIMEOUT + 3)

    def test_a_header_trickle_does_not_extend_the_limit(self) -> None:
        sock = connect(self.server)
        sock.sendall(b"GET /api/v1/namespaces HTTP/1.1\r\n")
        started = time.monotonic()
        closed = False
        for _ in range(10):
            time.sleep(0.5)
            try:
                sock.sendall(b"X-Trickle: 1\r\n")
            except OSError:
                closed = True
                break
        data, _ = read_until_closed(sock, timeout=5)
        self.assertTrue(closed or data == b"")
        self.assertLess(time.monotonic() - started, HEADER_TIMEOUT + 3)

    def test_an_unfinished_tls_handshake_is_cut_off(self) -> None:
        raw = socket.create_connection(address(self.server), timeout=10)
        raw.sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        started = time.monotonic()
        try:
            self.assertEqual(raw.recv(100), b"")
        except ConnectionResetError:
            pass  # aborted
        self.assertLess(time.monotonic() - started, HANDSHAKE_TIMEOUT + 2)
        raw.close()

    def test_idle_keep_alive_connection_is_closed(self) -> None:
        sock = connect(self.server)
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        sock.settimeout(10)
        first = sock.recv(65536)
        self.assertEqual(head_of(first)[0], 200)
        data, waited = read_until_closed(sock, timeout=IDLE_TIMEOUT + 10)
        self.assertEqual(data, b"")
        self.assertGreater(waited, IDLE_TIMEOUT - 1)
        self.assertLess(waited, IDLE_TIMEOUT + 3)


    def test_a_keep_alive_connection_moves_between_its_limits(self) -> None:
        # one timer per connection serves the head, answer and idle phases: a pause longer
        # than the head limit (shorter than the idle one) between requests keeps the
        # connection; a slow head of the next request is then cut off at the head limit
        sock = connect(self.server)
        sock.settimeout(10)
        for _ in range(2):
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            self.assertEqual(head_of(sock.recv(65536))[0], 200)
            time.sleep(HEADER_TIMEOUT + 0.5)
        sock.sendall(b"GET /readyz HTTP/1.1\r\n")
        data, waited = read_until_closed(sock, timeout=HEADER_TIMEOUT + 10)
        self.assertEqual(data, b"")
        self.assertLess(waited, HEADER_TIMEOUT + 3)


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
        # it answers the server's PINGs (h2 does) while nothing else happens
        h2.pump(lambda: False, timeout=PING_INTERVAL + PING_TIMEOUT + 3)
        self.assertFalse(h2.responses[stream]["ended"])
        self.assertIsNone(h2.responses[stream]["reset"])
        self.assertEqual(h2.goaways, [])

    def test_a_dead_peer_is_closed_after_an_unanswered_ping(self) -> None:
        h2, stream = self.watch()
        time.sleep(PING_INTERVAL + PING_TIMEOUT + 2)  # reads nothing, answers nothing
        data, waited = read_until_closed(h2.sock, timeout=5)
        # what it finds then: a PING it never answered, and the end of the connection
        self.assertLess(waited, 2)
        self.assertIn(b"\x00\x00\x08\x06\x00", data)  # a PING frame header
        self.assertFalse(h2.responses[stream]["ended"])

    def test_idle_connection_is_closed_with_goaway(self) -> None:
        h2 = H2Client(self.server)
        self.addCleanup(h2.close)
        stream = h2.request("GET", "/readyz")
        h2.pump(lambda: h2.responses[stream]["ended"])
        started = time.monotonic()
        h2.pump(lambda: bool(h2.goaways), timeout=IDLE_TIMEOUT + 5)
        self.assertEqual(h2.goaways, [(stream, 0)])
        self.assertGreater(time.monotonic() - started, IDLE_TIMEOUT - 1)


class HeaderSizeTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = _server()

    def test_oversized_header_is_431_at_once(self) -> None:
        sock = connect(self.server)
        started = time.monotonic()
        try:
            sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n")
        except OSError:
            pass  # answered and closed while still sending
        data, _ = read_until_closed(sock, timeout=10)
        self.assertEqual(data, b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; "
                               b"charset=utf-8\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large")
        self.assertLess(time.monotonic() - started, 5)

    def test_oversized_request_line_is_431(self) -> None:
        sock = connect(self.server)
        try:
            sock.sendall(b"GET /readyz?" + b"a" * (1100 * 1024) + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        except OSError:
            pass
        data, _ = read_until_closed(sock, timeout=10)
        self.assertEqual(head_of(data)[0], 431)

    def test_headers_over_16_kib_but_under_the_limit_are_served(self) -> None:
        sock = connect(self.server)
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Big: "
                     + b"a" * (900 * 1024) + b"\r\n\r\n")
        data, _ = read_until_closed(sock, timeout=10)
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
        data, _ = read_until_closed(sock, timeout=5)  # and the connection ends
        sock.close()

    def test_unauthenticated_small_body_is_401_status(self) -> None:
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(2) + b"{}")
        data, _ = read_until_closed(sock, timeout=10)
        status, body = head_of(data)
        self.assertEqual(status, 401)
        self.assertEqual(json.loads(body)["reason"], "Unauthorized")

    def test_expect_continue_over_the_limit_is_413_not_100(self) -> None:
        sock = connect(self.server)
        sock.sendall(_post_head(LIMIT + 1, "Expect: 100-continue\r\n"))
        data, _ = read_until_closed(sock, timeout=10)
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
        data, _ = read_until_closed(sock, timeout=10)
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
        data, _ = read_until_closed(sock, timeout=10)
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
        self.assertEqual(head_of(read_until_closed(sock, timeout=10)[0])[0], 200)

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
        self.server = shared_server()

    def test_anonymous_create_reaches_authorization(self) -> None:
        body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "anon"}}).encode()
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(len(body), "Connection: close\r\n") + body)
        status, payload = head_of(read_until_closed(sock, timeout=10)[0])
        self.assertEqual(status, 403)
        self.assertIn('User "system:anonymous" cannot create resource "configmaps"', json.loads(payload)["message"])

    def test_forbidden_anonymous_upload_is_answered_without_its_body(self) -> None:
        pid = self.server.proc.pid
        rss_before = _rss_kib(pid)
        sock = connect(self.server, certificate=False)
        sock.sendall(_post_head(LIMIT - 1024))  # within the limit; the body never comes
        data, seconds = read_until_closed(sock, timeout=10)
        status, payload = head_of(data)
        self.assertEqual(status, 403)
        self.assertIn('User "system:anonymous" cannot create resource "configmaps"', json.loads(payload)["message"])
        self.assertLess(seconds, 5)  # not the request timeout: nothing of the body was awaited
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
        time.sleep(0.5)  # well within the handshake time limit: only the refused ones are closed
        readable, _, _ = select.select(held, [], [], 0)
        closed = 0
        for sock in readable:
            try:
                if sock.recv(1) == b"":
                    closed += 1
            except ConnectionResetError:
                closed += 1
        self.assertEqual(closed, 5)
        # another address is not affected: a TLS client from 127.0.0.1 is served
        sock = connect(self.server)
        sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        self.assertEqual(head_of(read_until_closed(sock, timeout=10)[0])[0], 200)
