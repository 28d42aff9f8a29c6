"""Backpressure plumbing shared by the relays: a transport paused for several reasons at once,
and a protocol that holds its first bytes until its relay is ready.

Upstream's relays are goroutines copying between connections: a copy that
cannot write stops reading.  Here each side's transport is registered as the
streaming producer of the other side's transport, so a full write buffer on
one side pauses reading on the other.  A relay also pauses a side for its
own reasons (the kubelet has not answered yet; the SPDY streams are not all
open), and a plain ``pauseProducing``/``resumeProducing`` pair cannot tell
those apart: :class:`PauseGate` keeps the set of reasons and resumes the
transport only when none is left.
"""
from __future__ import annotations

from typing import Protocol as TypingProtocol, cast

from twisted.internet.interfaces import IPushProducer, IReactorTime
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

log = Logger()


class Wire(TypingProtocol):
    """What the relays use of a connection's transport: an ``ITCPTransport``-like object
    that is also a push producer (its reading) and a consumer (its writing)."""

    def write(self, data: bytes) -> None: ...

    def loseConnection(self) -> None: ...

    def abortConnection(self) -> None: ...

    def pauseProducing(self) -> None: ...

    def resumeProducing(self) -> None: ...

    def stopProducing(self) -> None: ...

    def registerProducer(self, producer: IPushProducer, streaming: bool) -> None: ...

    def unregisterProducer(self) -> None: ...


def default_clock() -> IReactorTime:
    from twisted.internet import reactor
    return cast(IReactorTime, reactor)


class PauseGate:
    """Pauses ``producer`` (a transport) while at least one reason holds."""

    def __init__(self, producer: Wire) -> None:
        self._producer = producer
        self._reasons: set[str] = set()
        self._stopped = False

    @property
    def paused(self) -> bool:
        return bool(self._reasons)

    def pause(self, reason: str) -> None:
        if self._stopped:
            return
        if not self._reasons:
            self._producer.pauseProducing()
        self._reasons.add(reason)

    def resume(self, reason: str) -> None:
        if self._stopped or reason not in self._reasons:
            return
        self._reasons.discard(reason)
        if not self._reasons:
            self._producer.resumeProducing()

    def stop(self) -> None:
        """No more pausing or resuming (the transport is closing)."""
        self._stopped = True
        self._reasons.clear()

    def producer_for(self, reason: str) -> "GateProducer":
        """An ``IPushProducer`` to register on a consumer: its pauses count as ``reason``."""
        return GateProducer(self, reason)


@implementer(IPushProducer)
class GateProducer:
    """A consumer's view of a :class:`PauseGate`: pausing with one reason."""

    def __init__(self, gate: PauseGate, reason: str) -> None:
        self._gate = gate
        self._reason = reason

    def pauseProducing(self) -> None:
        self._gate.pause(self._reason)

    def resumeProducing(self) -> None:
        self._gate.resume(self._reason)

    def stopProducing(self) -> None:
        # the consumer is closing: the relay tears both sides down from connectionLost
        self._gate.resume(self._reason)


class HeldProtocol(Protocol):
    """A protocol paused from its first moment until ``release()``: what arrives before is
    kept (at most ``max_held`` bytes: a paused transport delivers little more) and replayed.

    Subclasses implement ``received`` (for ``dataReceived``) and use ``gate``.
    """

    max_held = 1 << 20
    gate: PauseGate
    wire: Wire  # the transport, as the relays use it

    def __init__(self) -> None:
        self._held: list[bytes] | None = []
        self._held_size = 0
        self._overflowed = False

    def connectionMade(self) -> None:
        self.wire = cast(Wire, self.transport)
        self.gate = PauseGate(self.wire)
        self.gate.pause("held")

    @property
    def released(self) -> bool:
        return self._held is None

    def dataReceived(self, data: bytes) -> None:
        if self._overflowed:
            return
        if self._held is None:
            self.received(data)
            return
        self._held_size += len(data)
        if self._held_size > self.max_held:
            log.warn("{what}: {size} bytes arrived before the relay was ready (at most {limit}); aborting",
                     what=type(self).__name__, size=self._held_size, limit=self.max_held)
            self._overflowed = True
            self._held = []
            self.wire.abortConnection()
            return
        self._held.append(data)

    def release(self) -> None:
        """Hand over what arrived so far and read on."""
        if self._overflowed:
            return
        held, self._held = self._held, None
        for data in held or ():
            if self.transport is None or not self.connected:
                return
            self.received(data)
        self.gate.resume("held")

    def received(self, data: bytes) -> None:
        raise NotImplementedError


class KubeletListener(TypingProtocol):
    """A relay as its kubelet connection sees it."""

    @property
    def finished(self) -> bool: ...

    def kubelet_bytes(self, data: bytes) -> None: ...

    def kubelet_lost(self, reason: Failure) -> None: ...


class KubeletConnection(HeldProtocol):
    """A relay's upgraded kubelet connection (the translator's and the tunnel's): held until the
    relay is ready; its bytes and its end go to the relay."""

    def __init__(self, relay: KubeletListener) -> None:
        super().__init__()
        self.relay = relay
        self.lost = False

    def connectionMade(self) -> None:
        super().connectionMade()
        if self.relay.finished:
            self.wire.loseConnection()

    def received(self, data: bytes) -> None:
        self.relay.kubelet_bytes(data)

    def write(self, data: bytes) -> None:
        if data and self.connected and not self.lost:
            self.wire.write(data)

    def close(self) -> None:
        if self.connected and not self.lost:
            self.gate.stop()
            self.wire.loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lost = True
        self.gate.stop()
        self.relay.kubelet_lost(reason)
