"""A WebSocket connection on a hijacked client connection (server side), for the relays.

It parses the client's frames (:mod:`kapiserver.machinery.httpstream.websocket`),
answers pings, answers a close and closes, fails the connection with a close
code on a protocol error, and hands message payloads to its listener as they
arrive.  It is a :class:`~kapiserver.endpoints.streaming.flow.HeldProtocol`:
paused until its relay has written the ``101`` and is ready for messages.

How a close from the client is answered follows the library upstream uses:
``golang.org/x/net/websocket`` (the translator) sends 1000 whatever the
client's code, gorilla/websocket (the tunnel) echoes the client's code.
"""
from __future__ import annotations

from typing import Protocol as TypingProtocol

from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.endpoints.streaming.flow import HeldProtocol
from kapiserver.machinery.httpstream import websocket as ws

log = Logger()


class WebSocketListener(TypingProtocol):
    """What a relay hears from its client's WebSocket connection."""

    def ws_message_start(self, opcode: ws.Opcode) -> None: ...

    def ws_message_data(self, data: bytes) -> None: ...

    def ws_message_end(self) -> None: ...

    def ws_closing(self, code: int | None, reason: str) -> None:
        """The client sent a close frame (answered already); the connection is closing."""

    def ws_failed(self, close_code: int, message: str) -> None:
        """The client broke the protocol; the connection is closing with ``close_code``."""

    def ws_lost(self, reason: Failure) -> None:
        """The connection is gone (after a close, an error, or the client's going away)."""


class WebSocketConnection(HeldProtocol):
    """Server side of a WebSocket on a transport; ``label`` names it in logs."""

    def __init__(self, listener: WebSocketListener, label: str, *, echo_close_code: bool,
                 max_message_size: int | None = ws.DEFAULT_MAX_MESSAGE_SIZE) -> None:
        super().__init__()
        self._listener = listener
        self.label = label
        self._echo_close_code = echo_close_code
        self._parser = ws.FrameParser(max_message_size=max_message_size)
        self.open = False  # the 101 is written
        self.close_sent = False
        self.lost = False

    # -- output

    def accept(self, head: bytes) -> None:
        """Write the ``101`` head: from now on the connection speaks WebSocket."""
        if not self.lost:
            self.open = True
            self.wire.write(head)

    def refuse(self, answer: bytes) -> None:
        """Answer the upgrade request with something else than 101, and close."""
        if not self.lost and not self.open:
            self.wire.write(answer)
        self.close()

    def send(self, opcode: ws.Opcode, payload: bytes) -> None:
        if not self.open or self.close_sent or self.lost:
            return
        self.wire.write(ws.encode_frame(opcode, payload))

    def send_binary(self, payload: bytes) -> None:
        self.send(ws.Opcode.BINARY, payload)

    def close(self, code: int | None = ws.CloseCode.NORMAL, reason: str = "") -> None:
        """A close frame (once, if the 101 was written), then the connection closes once written."""
        if self.lost:
            return
        if self.open and not self.close_sent:
            self.close_sent = True
            self.wire.write(ws.encode_close(code, reason))
        self.gate.stop()
        self.wire.loseConnection()

    def abort(self) -> None:
        if not self.lost:
            self.gate.stop()
            self.wire.abortConnection()

    # -- input

    def received(self, data: bytes) -> None:
        try:
            events = self._parser.feed(data)
        except ws.WebSocketProtocolError as exc:
            self._handle(exc.events)  # what came before the error
            log.warn("{label}: WebSocket protocol error from the client: {message}; closing with {code}",
                     label=self.label, message=exc.message, code=exc.close_code)
            self.close(exc.close_code, exc.message)
            self._listener.ws_failed(exc.close_code, exc.message)
            return
        self._handle(events)

    def _handle(self, events: list[ws.Event]) -> None:
        for event in events:
            if self.lost or self.close_sent:
                return
            if isinstance(event, ws.MessageData):
                self._listener.ws_message_data(event.data)
            elif isinstance(event, ws.MessageStart):
                self._listener.ws_message_start(event.opcode)
            elif isinstance(event, ws.MessageEnd):
                self._listener.ws_message_end()
            elif isinstance(event, ws.Ping):
                self.send(ws.Opcode.PONG, event.payload)
            elif isinstance(event, ws.Close):
                log.debug("{label}: the client closed the WebSocket ({code} {reason!r})",
                          label=self.label, code=event.code, reason=event.reason)
                answer = event.code if self._echo_close_code else ws.CloseCode.NORMAL
                self.close(answer)
                self._listener.ws_closing(event.code, event.reason)
            # a Pong answers nothing this side sent; ignored

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lost = True
        self.gate.stop()
        self._listener.ws_lost(reason)
