"""Port-forward's SPDY carried in WebSocket messages: upstream's ``TunnelingHandler`` (streamtunnel.go).

kubectl 1.31+ (``portforward.NewSPDYOverWebsocketDialer``) asks for a
WebSocket with the subprotocol ``SPDY/3.1+portforward.k8s.io`` and then
speaks SPDY inside binary messages; the kubelet speaks plain SPDY.  Upstream:

1. the Kubernetes SPDY protocols are the client's WebSocket subprotocols
   with the ``SPDY/3.1+`` prefix (and the ``.k8s.io`` suffix); none is a 400
   ``unable to upgrade: no tunneling spdy protocols provided``;
2. the kubelet is sent the request made a SPDY upgrade (``createSPDYRequest``):
   the WebSocket headers and ``X-Stream-Protocol-Version`` removed, then
   ``Upgrade: SPDY/3.1`` and one ``X-Stream-Protocol-Version`` per protocol;
3. when the kubelet does not upgrade, the client gets what the upgrade-aware
   proxy answers (:mod:`.answers`); a ``101`` without ``Connection: Upgrade``
   and ``Upgrade: SPDY/3.1`` is a 500 ``unable to upgrade: missing upgrade
   headers in response``;
4. otherwise the client's WebSocket is accepted (gorilla's ``Upgrader``: the
   subprotocol is ``SPDY/3.1+`` and the kubelet's chosen protocol, when the
   client offered it), and the relay runs: each binary message's payload is
   written to the kubelet as it arrives, each read from the kubelet is sent as
   one binary message; a text message, a close or the end of either
   connection ends both (a close frame 1000 to the client).

One difference: the WebSocket handshake is checked before the kubelet is
dialled (upstream checks it after), so a malformed request costs no kubelet
connection; a request failing both ways gets the WebSocket refusal.
"""
from __future__ import annotations

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.endpoints.streaming import answers
from kapiserver.endpoints.streaming.flow import KubeletConnection, default_clock
from kapiserver.endpoints.streaming.interfaces import HijackedConnection, UpgradeDialer, UpgradeResponse
from kapiserver.endpoints.streaming.wsconn import WebSocketConnection
from kapiserver.machinery.httpstream import channel, heads, spdy
from kapiserver.machinery.httpstream import websocket as ws

log = Logger()

# Headers of the client's request that do not go to the kubelet (createSPDYRequest)
_NOT_FORWARDED = frozenset({b"sec-websocket-protocol", b"sec-websocket-key", b"sec-websocket-version", b"upgrade",
                            b"x-stream-protocol-version"})


def spdy_protocols(request_headers: heads.HeaderList) -> list[str]:
    """The SPDY protocols the client tunnels (``spdyProtocolsFromWebsocketProtocols``)."""
    return [protocol[len(channel.TUNNELING_PREFIX):] for protocol in ws.requested_protocols(request_headers)
            if channel.is_tunneling_protocol(protocol)]


def spdy_request_headers(kubelet_headers: heads.HeaderList, protocols: list[str]) -> list[tuple[bytes, bytes]]:
    """``createSPDYRequest``'s headers: the given ones without the WebSocket ones, made a
    SPDY/3.1 upgrade offering ``protocols`` (``Connection: Upgrade`` added if missing)."""
    headers = [(name, value) for name, value in kubelet_headers if name.lower() not in _NOT_FORWARDED]
    if not heads.contains_token(headers, b"Connection", "upgrade"):
        headers = [(name, value) for name, value in headers if name.lower() != b"connection"]
        headers.append((b"Connection", b"Upgrade"))
    headers.append((b"Upgrade", spdy.HEADER_SPDY31.encode()))
    headers.extend((b"X-Stream-Protocol-Version", protocol.encode("latin-1")) for protocol in protocols)
    return headers


class _Tunnel:
    """The relay between the client's WebSocket and the kubelet's SPDY bytes."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.client = WebSocketConnection(self, label, echo_close_code=True, max_message_size=None)
        self.kubelet = KubeletConnection(self)
        self.finished = False
        self.code = 101
        self.done: defer.Deferred[int] = defer.Deferred()
        self._registered = False

    # -- setup

    def start(self, protocol: str, accept: bytes) -> None:
        client, kubelet = self.client, self.kubelet
        if self.finished or client.lost or not kubelet.connected:
            self.finish("the client went away while the kubelet was dialled")
            return
        log.info("{label}: tunnelling {protocol!r} to the kubelet", label=self.label, protocol=protocol)
        client.accept(accept)
        client.wire.registerProducer(kubelet.gate.producer_for("client-full"), True)
        kubelet.wire.registerProducer(client.gate.producer_for("kubelet-full"), True)
        self._registered = True
        client.release()
        kubelet.release()

    def refuse(self, answer: answers.Answer) -> None:
        log.info("{label}: answering {code}: {message}", label=self.label, code=answer.code,
                 message=answer.log_message)
        self.code = answer.code
        self.client.refuse(answer.data)
        self.finished = True
        self._close_both()

    # -- relay

    def ws_message_start(self, opcode: ws.Opcode) -> None:
        if opcode != ws.Opcode.BINARY:
            log.warn("{label}: invalid message type received ({opcode}); closing", label=self.label,
                     opcode=opcode.name)
            self.finish("a non-binary message")

    def ws_message_data(self, data: bytes) -> None:
        if not self.finished and self.kubelet.connected and not self.kubelet.lost:
            self.kubelet.wire.write(data)

    def ws_message_end(self) -> None:
        pass

    def ws_closing(self, code: int | None, reason: str) -> None:
        self.finish(f"the client closed the WebSocket ({code})")

    def ws_failed(self, close_code: int, message: str) -> None:
        self.finish(f"a WebSocket protocol error ({close_code} {message})")

    def ws_lost(self, reason: Failure) -> None:
        self.finish(f"the client connection ended ({reason.getErrorMessage()})")

    def kubelet_bytes(self, data: bytes) -> None:
        self.client.send_binary(data)

    def kubelet_lost(self, reason: Failure) -> None:
        self.finish(f"the kubelet connection ended ({reason.getErrorMessage()})")

    # -- teardown

    def finish(self, why: str) -> None:
        if not self.finished:
            log.info("{label}: {why}; closing the tunnel", label=self.label, why=why)
            self.finished = True
        self._close_both()

    def _close_both(self) -> None:
        client, kubelet = self.client, self.kubelet
        if self._registered:
            self._registered = False
            if not client.lost:
                client.wire.unregisterProducer()
            if kubelet.connected and not kubelet.lost:
                kubelet.wire.unregisterProducer()
        client.close(ws.CloseCode.NORMAL)
        kubelet.close()
        if client.lost and (kubelet.lost or not kubelet.connected) and not self.done.called:
            self.done.callback(self.code)


def serve_tunnel(client: HijackedConnection, request_headers: heads.HeaderList, dialer: UpgradeDialer,
                 kubelet_path: bytes, kubelet_headers: heads.HeaderList, *, method: bytes = b"GET",
                 response_headers: heads.HeaderList = (), clock: IReactorTime | None = None) -> "defer.Deferred[int]":
    """Serve a port-forward WebSocket tunnel for ``client``.

    ``request_headers``: the client's request headers (its WebSocket handshake);
    ``kubelet_headers``: the headers of the request to send to the kubelet before
    :func:`spdy_request_headers` makes it a SPDY upgrade (upstream sends the client's
    request on with ``X-Forwarded-For`` appended, so pass its headers there, minus what
    must not reach the kubelet);
    ``response_headers``: added to any HTTP answer but the 101.  Fires with the status
    code the client was answered (101 when tunnelled), once both connections are closed.
    """
    if clock is None:
        clock = default_clock()
    label = f"port-forward tunnel {kubelet_path.decode('latin-1')}"
    date = heads.http_date(clock.seconds())

    def refused(code: int, data: bytes, why: str) -> "defer.Deferred[int]":
        log.info("{label}: answering {code}: {why}", label=label, code=code, why=why)
        return answers.answer_and_close(client, data).addCallback(lambda _: code)

    protocols = spdy_protocols(request_headers)
    if not protocols:
        message = "unable to upgrade: no tunneling spdy protocols provided"
        return refused(400, heads.text_error(400, message, extra_headers=response_headers, date=date), message)
    checked = ws.handshake_as_gorilla(method, request_headers, [], date=date, extra_headers=response_headers)
    if isinstance(checked, ws.HandshakeRejected):
        return refused(checked.code, checked.response, checked.reason)

    tunnel = _Tunnel(label)
    client.attach(tunnel.client)

    def upgraded(response: UpgradeResponse) -> None:
        if response.code != 101:
            tunnel.refuse(answers.not_upgraded(response, extra_headers=response_headers, clock=clock))
            return
        connection = response.header(b"Connection").lower()
        upgrade = response.header(b"Upgrade").lower()
        if b"upgrade" not in connection or spdy.HEADER_SPDY31.lower().encode() not in upgrade:
            message = "unable to upgrade: missing upgrade headers in response"
            log.warn("{label}: {message}: {headers!r}", label=label, message=message, headers=response.headers)
            answer = heads.text_error(500, message, extra_headers=response_headers,
                                      date=heads.http_date(clock.seconds()))
            tunnel.refuse(answers.Answer(500, answer, message))
            return
        chosen = response.header(b"X-Stream-Protocol-Version").decode("latin-1").strip()
        offered = [channel.TUNNELING_PREFIX + chosen] if chosen else []
        accepted = ws.handshake_as_gorilla(method, request_headers, offered)
        assert isinstance(accepted, ws.HandshakeAccepted)  # checked above: only the protocol is new
        tunnel.start(accepted.protocol, accepted.response)

    def failed(failure: Failure) -> None:
        log.info("{label}: the kubelet could not be reached: {error}", label=label, error=failure.getErrorMessage())
        tunnel.refuse(answers.dial_failed(failure, extra_headers=response_headers, clock=clock))

    # upstream's createSPDYRequest: the client's request as a POST
    dialed = dialer.upgrade(kubelet_path, spdy_request_headers(kubelet_headers, protocols), tunnel.kubelet,
                            method=b"POST")
    dialed.addCallbacks(upgraded, failed)
    return tunnel.done
