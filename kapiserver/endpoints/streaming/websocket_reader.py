"""A streamed answer served over a WebSocket, as upstream's ``wsstream.Reader`` serves ``pods/log``.

A GET of a streaming subresource that asks for a WebSocket upgrade gets the
body as WebSocket messages instead of an HTTP body (``StreamObject`` in
upstream's handlers): the subprotocols are ``""`` and ``binary.k8s.io``
(binary messages) or ``base64.binary.k8s.io`` (text messages of base64),
each piece of the backend's body one message, then a close once the body
ends.  Backpressure as everywhere: the client's transport pauses the
backend's body; the client's going away stops it.
"""
from __future__ import annotations

import base64
from typing import Optional

from twisted.internet import defer, protocol
from twisted.internet.interfaces import IPushProducer
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.iweb import IResponse

from kapiserver.endpoints.streaming.interfaces import HijackedConnection
from kapiserver.endpoints.streaming.wsconn import WebSocketConnection
from kapiserver.machinery.httpstream import heads
from kapiserver.machinery.httpstream import websocket as ws

log = Logger()

# wsstream.NewDefaultReaderProtocols
READER_PROTOCOLS = ("", "binary.k8s.io", "base64.binary.k8s.io")
BASE64_PROTOCOL = "base64.binary.k8s.io"


class _BodyToMessages(protocol.Protocol):
    """The backend's body (``Response.deliverBody``), one message per piece."""

    transport: Optional[IPushProducer]  # type: ignore[assignment]  # what deliverBody gives

    def __init__(self, reader: "WebSocketReader") -> None:
        self.reader = reader

    def connectionMade(self) -> None:
        self.reader.body_started(self)

    def dataReceived(self, data: bytes) -> None:
        self.reader.body_data(data)

    def connectionLost(self, reason: Failure = protocol.connectionDone) -> None:
        self.reader.body_ended(reason)


class WebSocketReader:
    """Serves one backend body to one WebSocket client (a listener of its connection)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.client = WebSocketConnection(self, label, echo_close_code=False)
        self.base64 = False
        self.body: Optional[_BodyToMessages] = None
        self.done: defer.Deferred[int] = defer.Deferred()

    # -- the body

    def body_started(self, body: _BodyToMessages) -> None:
        self.body = body
        if self.client.lost:
            self._stop_body()
            return
        assert body.transport is not None
        self.client.wire.registerProducer(body.transport, True)

    def body_data(self, data: bytes) -> None:
        if self.base64:
            self.client.send(ws.Opcode.TEXT, base64.b64encode(data))
        else:
            self.client.send_binary(data)

    def body_ended(self, reason: Failure) -> None:
        if not self.client.lost:
            self.client.wire.unregisterProducer()
            self.client.close()
        if not self.done.called:
            self.done.callback(101)

    def _stop_body(self) -> None:
        if self.body is not None and self.body.transport is not None:
            self.body.transport.stopProducing()

    # -- the client's connection (WebSocketListener)

    def ws_message_start(self, opcode: ws.Opcode) -> None:
        pass  # what the client sends is read and dropped, as wsstream's reader does

    def ws_message_data(self, data: bytes) -> None:
        pass

    def ws_message_end(self) -> None:
        pass

    def ws_closing(self, code: int | None, reason: str) -> None:
        self._stop_body()

    def ws_failed(self, close_code: int, message: str) -> None:
        self._stop_body()

    def ws_lost(self, reason: Failure) -> None:
        self._stop_body()
        if self.body is None and not self.done.called:
            self.done.callback(101)


class _Discard(protocol.Protocol):
    """A body nobody reads: stopped at once (the backend connection closes)."""

    transport: Optional[IPushProducer]  # type: ignore[assignment]

    def connectionMade(self) -> None:
        if self.transport is not None:
            self.transport.stopProducing()


def serve_websocket_body(client: HijackedConnection, method: bytes, headers: heads.HeaderList, response: IResponse,
                         label: str) -> "defer.Deferred[int]":
    """Answer the client's WebSocket handshake and stream ``response``'s body (a twisted.web
    client response) as messages; fires with the code the client got once it is over."""
    reader = WebSocketReader(label)
    client.attach(reader.client)
    handshake = ws.handshake_as_wsstream(method, headers, READER_PROTOCOLS)
    if isinstance(handshake, ws.HandshakeRejected):
        log.info("{label}: WebSocket handshake refused ({code}): {reason}", label=label, code=handshake.code,
                 reason=handshake.reason)
        reader.client.refuse(handshake.response)
        response.deliverBody(_Discard())
        return defer.succeed(handshake.code)
    reader.base64 = handshake.protocol == BASE64_PROTOCOL
    reader.client.accept(handshake.response)
    reader.client.release()
    response.deliverBody(_BodyToMessages(reader))
    return reader.done
