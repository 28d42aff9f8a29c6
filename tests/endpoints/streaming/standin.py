"""A stand-in kubelet on a loopback TLS port (twisted.web), and the Node and Pod that lead an
in-process kapiserver to it.

It serves what the streaming subresources reach: ``/containerLogs/<ns>/<pod>/<container>`` (the
test writes the body, as a followed log that has not ended, and finishes it), ``/exec/...`` and
``/attach/...`` answered with ``101`` and then an echo that upper-cases what it gets (or with an
error answer the test sets).  Every request is kept with its headers and the client certificate
it came with.
"""
from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any, Optional

from twisted.internet import defer, protocol, reactor, ssl
from twisted.python.failure import Failure
from twisted.web import resource, server

from kapiserver.server.certs import CertBundle, ensure_certificates
from kapiserver.testing.client import JSONClient

NS = "/api/v1/namespaces/default"
SWITCHING = (b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
             b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")


@functools.cache
def certificates() -> CertBundle:
    """A cluster CA with the serving, admin and kubelet-client certificates (made once per run:
    key generation is slow)."""
    directory = tempfile.mkdtemp(prefix="kapiserver-standin-")
    atexit.register(shutil.rmtree, directory, True)
    return ensure_certificates(directory)


@dataclass
class Seen:
    """One request the stand-in got."""

    method: bytes
    uri: bytes
    headers: dict[bytes, list[bytes]]
    client_certificate_cn: Optional[str]
    request: server.Request
    # fires when the request is done: True if its connection was lost before the answer ended
    cut: "defer.Deferred[bool]" = field(default_factory=defer.Deferred)

    def header(self, name: bytes) -> Optional[bytes]:
        values = self.headers.get(name.lower())
        return values[0] if values else None


class UpperEcho(protocol.Protocol):
    """The kubelet's side of an upgraded stream: echoes what it gets, upper-cased."""

    def __init__(self) -> None:
        self.received = b""
        self.lost: "defer.Deferred[None]" = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        self.transport.write(data.upper())  # type: ignore[union-attr]

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        if not self.lost.called:
            self.lost.callback(None)


class StandInKubelet(resource.Resource):
    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Seen] = []
        self.arrivals: list[defer.Deferred[Seen]] = []
        # an error answer instead of the log or the upgrade: (code, content type, body)
        self.refusal: Optional[tuple[int, bytes, bytes]] = None
        self.streams: list[UpperEcho] = []
        self.port: Any = None
        self.port_number = 0

    # -- the test's side

    def listen(self) -> int:
        bundle = certificates()
        from OpenSSL import crypto
        options = ssl.CertificateOptions(
            privateKey=crypto.load_privatekey(crypto.FILETYPE_PEM, bundle.serving_key_pem),
            certificate=crypto.load_certificate(crypto.FILETYPE_PEM, bundle.serving_cert_pem),
            # a client certificate is asked for (a kubelet's clientCAFile), not required
            verify=True, requireCertificate=False,
            caCerts=[crypto.load_certificate(crypto.FILETYPE_PEM, bundle.ca_cert_pem)])
        site = server.Site(self)
        site.noisy = False
        self.port = reactor.listenSSL(0, site, options, interface="127.0.0.1")
        self.port_number = int(self.port.getHost().port)
        return self.port_number

    def next_request(self) -> "defer.Deferred[Seen]":
        """The next request the stand-in gets (or the one it got, if none was awaited yet)."""
        arrival: defer.Deferred[Seen] = defer.Deferred()
        if len(self.seen) > len(self.arrivals):
            arrival.callback(self.seen[len(self.arrivals)])
        self.arrivals.append(arrival)
        return arrival

    # -- serving

    def render(self, request: server.Request) -> Any:
        transport: Any = request.channel.transport  # type: ignore[union-attr]
        certificate = transport.getPeerCertificate()
        seen = Seen(request.method, request.uri, {k.lower(): list(v) for k, v in
                                                 request.requestHeaders.getAllRawHeaders()},
                    certificate.get_subject().CN if certificate is not None else None, request)
        request.notifyFinish().addBoth(lambda outcome: seen.cut.callback(isinstance(outcome, Failure)))
        self.seen.append(seen)
        if len(self.arrivals) >= len(self.seen):  # the test goes on once the answer has begun
            reactor.callLater(0, self.arrivals[len(self.seen) - 1].callback, seen)
        if self.refusal is not None:
            code, content_type, body = self.refusal
            request.setResponseCode(code)
            request.setHeader(b"content-type", content_type)
            return body
        if request.path.startswith(b"/containerLogs/"):
            request.setHeader(b"content-type", b"text/plain")
            request.write(b"")  # the head now; the test writes the log lines
            return server.NOT_DONE_YET
        if request.path.startswith((b"/exec/", b"/attach/")) and request.getHeader(b"upgrade"):
            self._upgrade(request)
            return server.NOT_DONE_YET
        request.setResponseCode(404)
        return b"404 page not found\n"

    def _upgrade(self, request: server.Request) -> None:
        """Answer 101 and give the connection to an echo, as twisted.web's WebSocket support does
        (the channel's bytes and end go to the new protocol)."""
        channel: Any = request.channel
        echo = UpperEcho()
        self.streams.append(echo)
        channel.transport.write(SWITCHING)
        channel.dataReceived = echo.dataReceived
        channel.connectionLost = echo.connectionLost
        echo.makeConnection(channel.transport)

    def stop(self) -> "defer.Deferred[None]":
        for echo in self.streams:
            if echo.transport is not None and echo.transport.connected:  # type: ignore[attr-defined]
                echo.transport.abortConnection()  # type: ignore[attr-defined]
        for seen in self.seen:
            if not seen.request.finished and seen.request.channel is not None:
                seen.request.channel.transport.abortConnection()  # type: ignore[union-attr]
        return defer.maybeDeferred(self.port.stopListening)


class Reader(protocol.Protocol):
    """A raw HTTP client: what arrived, and a wait for some bytes."""

    def __init__(self) -> None:
        self.received = b""
        self.waiting: list[tuple[bytes, defer.Deferred[bytes]]] = []

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        for wanted, waiter in list(self.waiting):
            if wanted in self.received:
                self.waiting.remove((wanted, waiter))
                waiter.callback(self.received)

    def wait_for(self, wanted: bytes) -> "defer.Deferred[bytes]":
        waiter: defer.Deferred[bytes] = defer.Deferred()
        if wanted in self.received:
            waiter.callback(self.received)
        else:
            self.waiting.append((wanted, waiter))
        return waiter

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        for _, waiter in self.waiting:
            waiter.errback(reason)
        self.waiting = []


async def add_node_and_pod(client: JSONClient, kubelet_port: int, node: str = "n1", pod: str = "p",
                           address: str = "127.0.0.1") -> None:
    """A Node whose kubelet is the stand-in (InternalIP ``address``, its port in daemonEndpoints)
    and a Pod with one container ``c`` bound to it."""
    created = await client.post("/api/v1/nodes", {
        "metadata": {"name": node},
        "status": {"addresses": [{"type": "InternalIP", "address": address}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}}}})
    assert created.code == 201, created.body
    created = await client.post(NS + "/pods", {"metadata": {"name": pod}, "spec": {
        "nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
    assert created.code == 201, created.body
