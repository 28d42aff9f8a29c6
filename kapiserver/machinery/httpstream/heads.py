"""HTTP/1.1 header lookups and the answers written by hand on a hijacked connection.

Once a client connection has left the HTTP channel (an upgrade request), any
answer but ``101`` is written here byte by byte, as the Go code upstream writes
it on its ``http.ResponseWriter`` or on the hijacked ``net.Conn``:

* :func:`text_error`: ``net/http.Error`` (``text/plain``, ``nosniff``, the text and a newline);
* :func:`json_answer`: a ``metav1.Status`` written by the handlers' responder;
* :func:`relayed_answer`: a backend's answer echoed as ``http.Response.Write`` does
  (``UpgradeAwareHandler`` on a failed upgrade);
* :func:`raw_rejection`: ``golang.org/x/net/websocket``'s refusal of a handshake
  (a status line, maybe one header, then the error text; no length: the
  connection closes).

Every answer but the raw one says ``Connection: close``: the connection cannot
go back to the HTTP channel, so it closes after the answer.

Header lookups follow Go's ``http.Header``: names compare case-insensitively,
``Get`` is the first value, lists are comma separated.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from http import HTTPStatus

from twisted.web.http import datetimeToString

HeaderList = Sequence[tuple[bytes, bytes]]

# Framing and hop-by-hop headers of a relayed answer: this side frames the body itself.
_NOT_RELAYED = frozenset({b"content-length", b"transfer-encoding", b"connection", b"keep-alive", b"trailer"})


def header_values(headers: HeaderList, name: bytes) -> list[bytes]:
    """Every value of ``name`` in order (``http.Header[name]``)."""
    lowered = name.lower()
    return [value for key, value in headers if key.lower() == lowered]


def header_get(headers: HeaderList, name: bytes) -> bytes:
    """The first value of ``name``, or ``b""`` (``http.Header.Get``)."""
    lowered = name.lower()
    for key, value in headers:
        if key.lower() == lowered:
            return value
    return b""


def comma_separated(values: Iterable[bytes]) -> list[str]:
    """Each value split at commas, spaces trimmed, empty items dropped
    (``httpstream.commaSeparatedHeaderValues``)."""
    items: list[str] = []
    for value in values:
        for item in value.decode("latin-1").split(","):
            item = item.strip(" ")
            if item:
                items.append(item)
    return items


def contains_token(headers: HeaderList, name: bytes, token: str) -> bool:
    """Whether a comma-separated token list in any ``name`` header holds ``token``,
    case-insensitively (gorilla/websocket's ``tokenListContainsValue``)."""
    wanted = token.lower()
    for value in header_values(headers, name):
        for item in value.decode("latin-1").split(","):
            if item.strip(" \t").lower() == wanted:
                return True
    return False


def reason_phrase(code: int) -> bytes:
    """Go's ``http.StatusText`` (the standard phrases; empty for unknown codes)."""
    try:
        return HTTPStatus(code).phrase.encode("ascii")
    except ValueError:
        return b""


def status_line(code: int, phrase: bytes | None = None) -> bytes:
    return b"HTTP/1.1 %03d %s\r\n" % (code, reason_phrase(code) if phrase is None else phrase)


def http_date(seconds: float) -> bytes:
    """The ``Date`` header's value Go's server writes (RFC 1123, GMT)."""
    return datetimeToString(seconds)


def _head(code: int, headers: Iterable[tuple[bytes, bytes]], phrase: bytes | None = None) -> bytes:
    lines = [status_line(code, phrase)]
    for name, value in headers:
        lines.append(name + b": " + value + b"\r\n")
    lines.append(b"\r\n")
    return b"".join(lines)


def _answer(code: int, content_type: bytes, body: bytes, extra_headers: HeaderList, date: bytes | None,
            handler_headers: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    # Go writes the handler's headers sorted by name, then Connection, Date and Content-Length
    headers = sorted([(b"Content-Type", content_type), *handler_headers, *extra_headers],
                     key=lambda item: item[0].lower())
    headers.append((b"Connection", b"close"))
    if date is not None:
        headers.append((b"Date", date))
    headers.append((b"Content-Length", b"%d" % len(body)))
    return _head(code, headers) + body


def text_error(code: int, text: str, *, extra_headers: HeaderList = (), date: bytes | None = None) -> bytes:
    """``http.Error(w, text, code)`` on a connection that closes after it."""
    return _answer(code, b"text/plain; charset=utf-8", text.encode() + b"\n", extra_headers, date,
                   handler_headers=((b"X-Content-Type-Options", b"nosniff"),))


def json_answer(code: int, body: bytes, *, extra_headers: HeaderList = (), date: bytes | None = None) -> bytes:
    """A JSON body (a ``metav1.Status``) with ``code``, on a connection that closes after it."""
    return _answer(code, b"application/json", body, extra_headers, date)


def relayed_answer(code: int, phrase: bytes, headers: HeaderList, body: bytes) -> bytes:
    """A backend's answer echoed to the client (``http.Response.Write``): its status line
    and headers, the body framed by its length, then the connection closes."""
    kept = [(name, value) for name, value in headers if name.lower() not in _NOT_RELAYED]
    kept.append((b"Content-Length", b"%d" % len(body)))
    kept.append((b"Connection", b"close"))
    return _head(code, kept, phrase or reason_phrase(code)) + body


def raw_rejection(code: int, text: str, extra_headers: HeaderList = ()) -> bytes:
    """``golang.org/x/net/websocket``'s refusal: status line, headers, blank line, the text."""
    return _head(code, extra_headers) + text.encode()


def upgrade_head(code: int, phrase: bytes, headers: HeaderList) -> bytes:
    """A ``101`` head as a backend sent it, to be replayed to the client."""
    return _head(code, headers, phrase or reason_phrase(code))
