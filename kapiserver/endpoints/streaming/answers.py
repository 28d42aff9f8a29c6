"""What a client is answered when its upgrade to a kubelet does not happen.

Upstream (``UpgradeAwareHandler.tryUpgrade``, which the tunnelling handler
also goes through): a backend that cannot be reached is an error given to the
handler's responder (a ``metav1.Status``, 500 unless the error is a Status);
a backend answering neither ``101`` nor an error code (< 400) is the error
``invalid upgrade response: status code N``; an error answer (>= 400) is
echoed to the client as the backend wrote it.  The connection closes after
any of them.
"""
from __future__ import annotations

from dataclasses import dataclass

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure

from kapiserver.endpoints.streaming.dialer import DialError
from kapiserver.endpoints.streaming.interfaces import HijackedConnection, UpgradeResponse
from kapiserver.machinery import codec, errors
from kapiserver.machinery.httpstream import heads


@dataclass(frozen=True)
class Answer:
    code: int
    data: bytes
    log_message: str


def status_answer(status_error: errors.StatusError, *, extra_headers: heads.HeaderList = (),
                  clock: IReactorTime | None = None) -> Answer:
    """A Status error as the handlers' responder writes it (JSON)."""
    body = codec.encode_json(status_error.to_status())
    date = heads.http_date(clock.seconds()) if clock is not None else None
    headers = [*extra_headers, *((name.encode(), value.encode()) for name, value in status_error.headers.items())]
    return Answer(status_error.code, heads.json_answer(status_error.code, body, extra_headers=headers, date=date),
                  status_error.message)


def error_to_status(error: BaseException) -> errors.StatusError:
    """``responsewriters.ErrorToAPIStatus``: a Status error as it is, anything else a 500
    with no reason and the error's text."""
    if isinstance(error, errors.StatusError):
        return error
    return errors.StatusError(500, "", str(error) or type(error).__name__)


def dial_failed(failure: Failure, *, extra_headers: heads.HeaderList = (), clock: IReactorTime | None = None) -> Answer:
    """The answer when the kubelet could not be reached (upstream's dial: ``error dialing backend: ...``)."""
    assert failure.value is not None
    if isinstance(failure.value, DialError):
        error = errors.StatusError(500, "", f"error dialing backend: {failure.value}")
    else:
        error = error_to_status(failure.value)
    return status_answer(error, extra_headers=extra_headers, clock=clock)


def not_upgraded(response: UpgradeResponse, *, extra_headers: heads.HeaderList = (),
                 clock: IReactorTime | None = None) -> Answer:
    """The answer when the kubelet answered something else than 101."""
    if response.code < 400:
        error = errors.StatusError(500, "", f"invalid upgrade response: status code {response.code}")
        return status_answer(error, extra_headers=extra_headers, clock=clock)
    return Answer(response.code, heads.relayed_answer(response.code, response.phrase, response.headers, response.body),
                  f"the kubelet answered {response.code} {response.phrase.decode('latin-1')}")


class _Answering(Protocol):
    """A client connection that only gets an answer, then closes."""

    def __init__(self, answer: bytes, finished: "defer.Deferred[None]") -> None:
        self._answer = answer
        self._finished = finished

    def connectionMade(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]
        self.transport.write(self._answer)  # type: ignore[union-attr]
        self.transport.loseConnection()  # type: ignore[union-attr]

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if not self._finished.called:
            self._finished.callback(None)


def answer_and_close(client: HijackedConnection, answer: bytes) -> "defer.Deferred[None]":
    """Write ``answer`` on a hijacked connection and close it; fires once it is closed."""
    finished: defer.Deferred[None] = defer.Deferred()
    client.attach(_Answering(answer, finished))
    return finished
