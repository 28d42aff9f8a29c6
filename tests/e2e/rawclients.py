"""Clients that behave as no library would let them: slow, oversized, half-finished requests.

Used by the connection-hygiene and shutdown tests against a real server process
(:class:`kapiserver.testing.process.ServerProcess`), over TLS on loopback.
"""
from __future__ import annotations

import os
import select
import socket
import ssl
import time
from typing import Optional

import h2.config
import h2.connection
import h2.events

from kapiserver.testing.cases import HANG_GUARD
from kapiserver.testing.process import ServerProcess


def descriptor_targets(pid: int) -> list[str]:
    """What each open file descriptor of process ``pid`` points at (``socket:[123]``, paths)."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue  # closed meanwhile
    return targets


def address(server: ServerProcess) -> tuple[str, int]:
    host, port = server.server_url.removeprefix("https://").rsplit(":", 1)
    return host, int(port)


def tls_context(server: ServerProcess, certificate: bool = True, alpn: str = "http/1.1") -> ssl.SSLContext:
    certs = os.path.join(server.workdir, "certs")
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
    if certificate:
        ctx.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
    ctx.set_alpn_protocols([alpn])
    return ctx


def connect(server: ServerProcess, certificate: bool = True, alpn: str = "http/1.1", source: str = "",
            timeout: float = 10.0) -> ssl.SSLSocket:
    host, port = address(server)
    raw = socket.create_connection((host, port), timeout=timeout, source_address=(source, 0) if source else None)
    return tls_context(server, certificate, alpn).wrap_socket(raw, server_hostname=host)


def read_until_closed(sock: socket.socket, timeout: float = HANG_GUARD) -> bytes:
    """Everything the server sends until it closes the connection (what it answered, if anything).

    The server may stay silent ``timeout`` seconds at most: a guard against a hang, reached only
    when the server would never close; how soon it closes is not measured.
    """
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            more = sock.recv(65536)
            if not more:
                break
            data += more
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        pass
    except socket.timeout:
        raise AssertionError(f"the server neither sent anything nor closed the connection in {timeout:g}s; "
                             f"it had sent {data[:200]!r}") from None
    return data


def head_of(data: bytes) -> tuple[int, bytes]:
    """Status code and body of the first HTTP/1.1 response in ``data`` (body as far as received)."""
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def upload_until_answered(sock: ssl.SSLSocket, head: bytes, body_bytes: int,
                          timeout: float = HANG_GUARD) -> tuple[Optional[bytes], int]:
    """Send ``head`` and then up to ``body_bytes`` of body, watching for an answer meanwhile.

    Returns the answer (None if none came) and how many body bytes were handed to the socket
    before it came, the way a client that reads while it sends would see it.
    """
    sock.sendall(head)
    sock.setblocking(False)
    chunk = b"x" * 65536
    sent = 0
    answer = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        readable, writable, _ = select.select([sock], [sock] if sent < body_bytes else [], [], 0.5)
        if readable:
            try:
                more = sock.recv(65536)
            except ssl.SSLWantReadError:
                continue
            except (ConnectionResetError, ssl.SSLError):
                break
            if not more:
                break
            answer += more
            if b"\r\n\r\n" in answer:
                break
        if writable:
            try:
                sent += sock.send(chunk[:body_bytes - sent])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError):
                pass
            except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                continue  # keep reading: the answer may be there
    sock.setblocking(True)
    return (answer or None), sent


class H2Client:
    """A minimal HTTP/2 client over a blocking TLS socket (h2's state machine)."""

    def __init__(self, server: ServerProcess, certificate: bool = True) -> None:
        self.sock = connect(server, certificate, alpn="h2")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        # no Huffman coding: pure-Python hpack takes seconds for a header of a megabyte
        encode = self.conn.encoder.encode
        self.conn.encoder.encode = lambda headers, huffman=False: encode(headers, huffman=False)
        self.conn.initiate_connection()
        self.flush()
        self.remote_settings: dict = {}
        self.responses: dict[int, dict] = {}
        # (last stream id, error code) of each GOAWAY the server sent
        self.goaways: list[tuple[int, int]] = []
        self.pings = 0  # PINGs the server sent (h2 answers each)
        self._buffer = b""
        self.authority = "%s:%d" % address(server)

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except (OSError, ssl.SSLError):
                pass  # the server is gone: what it sent is still read

    def request(self, method: str, path: str, headers: tuple = (), body: Optional[bytes] = None,
                end: bool = True) -> int:
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, [(":method", method), (":path", path), (":scheme", "https"),
                                        (":authority", self.authority), *headers],
                               end_stream=body is None and end)
        if body is not None:
            window = min(len(body), self.conn.local_flow_control_window(stream))
            self.conn.send_data(stream, body[:window], end_stream=end and window == len(body))
        self.flush()
        self.responses[stream] = {"status": None, "body": b"", "ended": False, "reset": None}
        return stream

    def pump(self, until, timeout: float = HANG_GUARD) -> None:
        """Read frames (answering the server's PINGs) until ``until()`` is true, the connection
        ends or ``timeout`` has passed (a guard against a hang: the caller checks what came)."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.5)
        while not until() and time.monotonic() < deadline:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return
            for event in self.conn.receive_data(self._without_goaway(data)):
                self._event(event)
            self.flush()

    def _without_goaway(self, data: bytes) -> bytes:
        """The frames in ``data``, GOAWAY recorded and taken out: h2's state machine would refuse
        every frame after one, where a real client finishes its open streams."""
        self._buffer += data
        passed = b""
        while len(self._buffer) >= 9:
            length = int.from_bytes(self._buffer[:3], "big")
            if len(self._buffer) < 9 + length:
                break
            frame, self._buffer = self._buffer[:9 + length], self._buffer[9 + length:]
            if frame[3] == 0x7:  # GOAWAY
                payload = frame[9:]
                self.goaways.append((int.from_bytes(payload[:4], "big") & 0x7FFFFFFF,
                                     int.from_bytes(payload[4:8], "big")))
            else:
                passed += frame
        return passed

    def _event(self, event) -> None:
        if isinstance(event, h2.events.RemoteSettingsChanged):
            self.remote_settings.update({k: v.new_value for k, v in event.changed_settings.items()})
        elif isinstance(event, h2.events.ResponseReceived):
            self.responses[event.stream_id]["status"] = int(dict(event.headers)[b":status"])
        elif isinstance(event, h2.events.DataReceived):
            self.responses[event.stream_id]["body"] += event.data
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.responses[event.stream_id]["ended"] = True
        elif isinstance(event, h2.events.PingReceived):
            self.pings += 1
        elif isinstance(event, h2.events.StreamReset):
            if event.stream_id in self.responses:
                self.responses[event.stream_id]["reset"] = event.error_code

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
