"""Byte relays between a client and a kubelet: upstream's ``UpgradeAwareHandler`` after the upgrade.

Once both sides speak the same upgraded protocol (SPDY or WebSocket passed
through unchanged), the relay copies bytes both ways.  Upstream does it with
two ``io.Copy`` goroutines and closes both connections when either copy ends;
here a :class:`Splice` joins two protocols, :class:`SpliceEnd`:

* backpressure: each end's transport is the streaming producer of the other
  end's transport, so a side that does not read pauses the side that writes;
* half-close: an end whose peer ended its writing (``readConnectionLost``,
  ``IHalfCloseableProtocol``) ends the other end's writing with
  ``loseWriteConnection`` when that transport is an ``ITCPTransport`` (TLS
  transports are not); otherwise it closes it, as upstream does when a copy
  ends; an end closed both ways closes;
* teardown: either end's loss closes the other (after what it has to write).

:func:`serve_upgrade` is the whole upgrade-aware path for a hijacked client:
dial the kubelet with the client's upgrade request, answer the client as
upstream does when the kubelet does not upgrade (:mod:`.answers`), else replay
the kubelet's ``101`` head and splice.
"""
from __future__ import annotations

from twisted.internet import defer
from twisted.internet.interfaces import IHalfCloseableProtocol, IReactorTime, ITCPTransport
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from kapiserver.endpoints.streaming import answers
from kapiserver.endpoints.streaming.flow import HeldProtocol, default_clock
from kapiserver.endpoints.streaming.interfaces import HijackedConnection, UpgradeDialer, UpgradeResponse
from kapiserver.machinery.httpstream import heads

log = Logger()


@implementer(IHalfCloseableProtocol)
class SpliceEnd(HeldProtocol):
    """One side of a :class:`Splice`: what it reads is written to the other side."""

    def __init__(self, splice: "Splice", name: str) -> None:
        super().__init__()
        self.splice = splice
        self.name = name
        self.read_closed = False
        self.write_closed = False
        self.lost = False
        self.has_producer = False  # the other end's transport is registered on this one's

    @property
    def peer(self) -> "SpliceEnd":
        return self.splice.backend if self is self.splice.client else self.splice.client

    def connectionMade(self) -> None:
        super().connectionMade()
        if self.splice.finished:  # the other side went away while this one was connecting
            self.wire.loseConnection()

    def received(self, data: bytes) -> None:
        peer = self.peer
        if peer.connected and not peer.write_closed and not peer.lost:
            peer.wire.write(data)

    def readConnectionLost(self) -> None:
        self.read_closed = True
        log.debug("{label}: the {name} side ended its writing", label=self.splice.label, name=self.name)
        self.peer.end_writing()
        if self.write_closed:
            self.wire.loseConnection()

    def writeConnectionLost(self) -> None:
        self.write_closed = True
        if self.read_closed:
            self.wire.loseConnection()

    def end_writing(self) -> None:
        """The other side will send nothing more: half-close towards this side, or close."""
        if not self.connected or self.lost or self.write_closed:
            return
        transport = self.transport
        if ITCPTransport.providedBy(transport):
            self.write_closed = True
            transport.loseWriteConnection()
        else:
            self.close()

    def close(self) -> None:
        if self.connected and not self.lost:
            self.gate.stop()
            if self.has_producer:
                self.has_producer = False
                self.wire.unregisterProducer()
            self.wire.loseConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.lost = True
        self.connected = False
        self.gate.stop()
        self.splice.end_lost(self, reason)


class Splice:
    """Two :class:`SpliceEnd` protocols relaying bytes; ``start()`` once both are connected
    (and whatever must reach the client first, the ``101``, is written)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.client = SpliceEnd(self, "client")
        self.backend = SpliceEnd(self, "kubelet")
        self.started = False
        self.finished = False
        self.done: defer.Deferred[None] = defer.Deferred()

    def start(self) -> None:
        client, backend = self.client, self.backend
        if self.finished or not (client.connected and backend.connected):
            self.stop()
            return
        self.started = True
        client.wire.registerProducer(backend.gate.producer_for("client-full"), True)
        client.has_producer = True
        backend.wire.registerProducer(client.gate.producer_for("kubelet-full"), True)
        backend.has_producer = True
        client.release()
        backend.release()

    def stop(self) -> None:
        """Close both sides (they flush what they have to write)."""
        self.finished = True
        for end in (self.client, self.backend):
            end.close()
        self._check_done()

    def end_lost(self, end: SpliceEnd, reason: Failure) -> None:
        if not self.finished:
            log.info("{label}: the {name} side closed ({reason}); closing the other",
                     label=self.label, name=end.name, reason=reason.getErrorMessage())
        self.finished = True
        end.peer.close()
        self._check_done()

    def _check_done(self) -> None:
        if self.done.called:
            return
        if all(end.lost or not end.connected for end in (self.client, self.backend)):
            self.done.callback(None)


def serve_upgrade(client: HijackedConnection, dialer: UpgradeDialer, kubelet_path: bytes,
                  kubelet_headers: heads.HeaderList, *, method: bytes = b"GET",
                  response_headers: heads.HeaderList = (),
                  clock: IReactorTime | None = None) -> "defer.Deferred[int]":
    """Pass an upgrade request through to the kubelet, as ``UpgradeAwareHandler`` does.

    ``method`` and ``kubelet_headers`` are sent as they are (the client's method; the
    headers carry the client's ``Connection`` and ``Upgrade``); ``response_headers`` go on any answer this side writes itself.
    Fires with the code the client got (101 once the relay has ended).
    """
    if clock is None:
        clock = default_clock()
    label = f"upgrade {kubelet_path.decode('latin-1')}"
    splice = Splice(label)
    client.attach(splice.client)
    result: defer.Deferred[int] = defer.Deferred()

    def answer(reply: answers.Answer) -> None:
        log.info("{label}: answering {code}: {message}", label=label, code=reply.code, message=reply.log_message)
        if splice.client.connected:
            splice.client.wire.write(reply.data)
        splice.stop()
        splice.done.addCallback(lambda _: result.callback(reply.code))

    def upgraded(response: UpgradeResponse) -> None:
        if response.code != 101:
            answer(answers.not_upgraded(response, extra_headers=response_headers, clock=clock))
            return
        if not splice.client.connected or splice.finished:
            splice.stop()
        else:
            splice.client.transport.write(heads.upgrade_head(  # type: ignore[union-attr]
                response.code, response.phrase, response.headers))
            splice.start()
        splice.done.addCallback(lambda _: result.callback(101))

    def failed(failure: Failure) -> None:
        log.info("{label}: the kubelet could not be reached: {error}", label=label, error=failure.getErrorMessage())
        answer(answers.dial_failed(failure, extra_headers=response_headers, clock=clock))

    dialed = dialer.upgrade(kubelet_path, list(kubelet_headers), splice.backend, method=method)
    dialed.addCallbacks(upgraded, failed)
    return result
