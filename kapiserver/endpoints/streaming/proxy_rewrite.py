"""Upstream's proxy transport (``apimachinery/pkg/util/proxy/transport.go``), without the network:
the links of a proxied page made to go through the proxy again.

``pods/proxy``, ``services/proxy`` and ``nodes/proxy`` answer through
``UpgradeAwareHandler`` with ``WrapTransport``, i.e. ``defaultProxyTransport``:
``corsRemovingTransport`` around ``Transport``.  Its parts that do not touch
the network are here, for the connector to apply:

* :func:`path_prepend` (``defaultProxyTransport``): the request's path without
  the backend's path: ``/api/v1/namespaces/ns/pods/web:80/proxy``;
* :func:`forwarded_uri` (``Transport.RoundTrip``): ``X-Forwarded-Uri``;
* :class:`LinkRewriter` (``Transport.rewriteURL``): a link to the backend's
  host, to the host the client asked, or with no host, and an absolute path,
  gets the prefix (``/rewriteme`` becomes ``<prefix>/rewriteme``); anything
  else is only printed back as Go's ``URL.String`` prints it;
* :func:`rewrite_html` (``rewriteHTML``): every start tag printed back
  (``Token.String``), the URL attributes of ``atomsToAttrs`` rewritten,
  everything else byte for byte;
* :func:`rewrite_body` (``rewriteResponse``): gzip and deflate bodies decoded
  and encoded again, another coding left alone;
* :data:`CORS_HEADERS` (``removeCORSHeaders``).

Go strings are bytes; so is everything here.
"""
from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, replace
from typing import Callable, Optional

from kapiserver.machinery import go_html, go_url

# removeCORSHeaders: what the backend's answer loses
CORS_HEADERS = (b"access-control-allow-credentials", b"access-control-allow-headers",
                b"access-control-allow-methods", b"access-control-allow-origin")

# atomsToAttrs: which attributes of which tags hold a URL
URL_ATTRIBUTES: dict[bytes, frozenset[bytes]] = {
    tag.encode(): frozenset(a.encode() for a in attrs.split()) for tag, attrs in {
        "a": "href", "applet": "codebase", "area": "href", "audio": "src", "base": "href",
        "blockquote": "cite", "body": "background", "button": "formaction", "command": "icon",
        "del": "cite", "embed": "src", "form": "action", "frame": "longdesc src", "head": "profile",
        "html": "manifest", "iframe": "longdesc src", "img": "longdesc src usemap",
        "input": "src usemap formaction", "ins": "cite", "link": "href",
        "object": "classid codebase data usemap", "q": "cite", "script": "src", "source": "src",
        "video": "poster src",
    }.items()}


class RewriteError(Exception):
    """The body could not be decoded; ``str()`` is the error upstream's transport returns
    (which its handler answers as a 500)."""


def path_prepend(request_path: bytes, location_path: bytes) -> bytes:
    """defaultProxyTransport's PathPrepend: the (decoded) request path without the (decoded)
    path of the backend location, a trailing slash of the request counted in."""
    suffix = location_path
    if request_path.endswith(b"/") and not suffix.endswith(b"/"):
        suffix += b"/"
    if suffix and request_path.endswith(suffix):
        return request_path[:-len(suffix)]
    return request_path


def forwarded_uri(prepend: bytes, backend_path: bytes, backend_escaped_path: bytes) -> bytes:
    """Transport.RoundTrip's ``X-Forwarded-Uri``: the prefix joined with the backend request's
    escaped path (``path.Join``), its trailing slash kept."""
    uri = go_url.join(prepend, backend_escaped_path)
    if backend_path.endswith(b"/"):
        uri += b"/"
    return uri


@dataclass(frozen=True)
class LinkRewriter:
    """Transport.rewriteURL for one proxied request.

    ``scheme`` and ``host`` are those of the client's request URL (empty unless the request
    line named them, so links become paths); ``prefix`` is :func:`path_prepend`;
    ``source_host`` the backend's ``host:port`` as its URL names it; ``request_host`` the
    ``Host`` the client sent."""

    scheme: bytes
    host: bytes
    prefix: bytes
    source_host: bytes
    request_host: bytes

    def rewrite(self, url: go_url.URL) -> bytes:
        different_host = bool(url.host) and url.host != self.source_host and url.host != self.request_host
        if different_host or not url.path.startswith(b"/"):
            return url.string()
        if not (url.host == self.request_host and not self.scheme and not self.host):
            # Go assigns both fields: a URL that named the client's host loses it when ours is unknown
            url = _with_scheme_host(url, self.scheme, self.host)
        if url.path.startswith(self.prefix):
            return url.string()
        joined = go_url.join(self.prefix, url.path)
        if url.path.endswith(b"/"):
            joined += b"/"
        return url.with_path(joined).string()

    def rewrite_text(self, raw: bytes) -> bytes:
        """A link as text (``Location``); raises :class:`go_url.URLError` when Go's
        ``url.Parse`` refuses it."""
        return self.rewrite(go_url.URL.parse(raw))


def _with_scheme_host(url: go_url.URL, scheme: bytes, host: bytes) -> go_url.URL:
    return replace(url, scheme=scheme, host=host)


def rewrite_url(url: str, source_url: str, source_request_host: str, scheme: str, host: str,
                path_prepend: str) -> str:
    """Transport.rewriteURL on texts: ``url`` (a link) as seen on the page fetched from
    ``source_url``, for a client that asked ``source_request_host``; ValueError when
    ``url.Parse`` refuses ``url``."""
    source = go_url.URL.parse(source_url.encode())
    rewriter = LinkRewriter(scheme.encode(), host.encode(), path_prepend.encode(), source.host,
                            source_request_host.encode())
    return rewriter.rewrite_text(url.encode()).decode("utf-8", "surrogateescape")


def rewrite_html(body: bytes, rewriter: Callable[[go_url.URL], bytes]) -> bytes:
    """rewriteHTML: ``body`` tokenized as Go's html tokenizer does; start and self-closing tags
    printed back as ``Token.String`` prints them, with the URL attributes of
    :data:`URL_ATTRIBUTES` that ``url.Parse`` accepts replaced by ``rewriter``'s answer;
    every other token as it came."""
    out = bytearray()
    for token in go_html.tokens(body):
        if token.type in (go_html.TokenType.START_TAG, go_html.TokenType.SELF_CLOSING_TAG):
            url_attributes = URL_ATTRIBUTES.get(token.name)
            if url_attributes:
                for i, (key, value) in enumerate(token.attrs):
                    if key in url_attributes:
                        try:
                            parsed = go_url.URL.parse(value)
                        except go_url.URLError:
                            continue  # left as it is, as upstream leaves a link it cannot parse
                        token.attrs[i] = (key, rewriter(parsed))
            out += token.tag_string()
        else:
            out += body[token.start:token.end]
    return bytes(out)


def rewrites_coding(content_encoding: bytes) -> bool:
    """Whether a body in this ``Content-Encoding`` is rewritten (upstream: none, gzip, deflate;
    another coding is passed on as it is, its links unchanged)."""
    return content_encoding in (b"", b"gzip", b"deflate")


def rewrite_body(body: bytes, content_encoding: bytes, rewriter: Callable[[go_url.URL], bytes]) -> bytes:
    """rewriteResponse: the HTML body decoded from its coding (``gzip``, ``deflate`` as Go's
    compress/flate reads it: raw DEFLATE, or none), rewritten, and encoded again.  Raises
    :class:`RewriteError` (Go's text) when the body cannot be decoded."""
    if content_encoding == b"gzip":
        return gzip.compress(rewrite_html(_gunzip(body), rewriter), compresslevel=6, mtime=0)
    if content_encoding == b"deflate":
        encoder = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        return encoder.compress(rewrite_html(_inflate(body), rewriter)) + encoder.flush()
    return rewrite_html(body, rewriter)


_GZIP_HEADER = 10


def _gunzip(body: bytes) -> bytes:
    """Go's gzip.Reader (multistream) over a whole body, with its errors' texts."""
    if len(body) < _GZIP_HEADER:
        # gzip.NewReader reads the first header: nothing at all is io.EOF
        raise RewriteError("errorf making gzip reader: " + ("EOF" if not body else "unexpected EOF"))
    if body[:3] != b"\x1f\x8b\x08":
        raise RewriteError("errorf making gzip reader: gzip: invalid header")
    out: list[bytes] = []
    rest = body
    while rest:
        if len(rest) < _GZIP_HEADER:
            raise RewriteError("unexpected EOF")
        if rest[:3] != b"\x1f\x8b\x08":
            raise RewriteError("gzip: invalid header")
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out.append(decoder.decompress(rest))
        except zlib.error as e:
            raise RewriteError(_zlib_error_text(str(e))) from None
        if not decoder.eof:
            raise RewriteError("unexpected EOF")
        rest = decoder.unused_data
    return b"".join(out)


def _inflate(body: bytes) -> bytes:
    """Go's flate.NewReader (raw DEFLATE, no zlib header) over a whole body."""
    decoder = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        data = decoder.decompress(body)
    except zlib.error as e:
        raise RewriteError(_zlib_error_text(str(e))) from None
    if not decoder.eof:
        raise RewriteError("unexpected EOF")
    return data


def _zlib_error_text(message: str) -> str:
    """Go's words for what zlib found: a checksum or length mismatch is gzip's ErrChecksum;
    anything else is a corrupt stream (Go's CorruptInputError also names the offset, which
    zlib does not tell)."""
    if "incorrect data check" in message or "incorrect length check" in message:
        return "gzip: invalid checksum"
    if "incorrect header check" in message or "unknown compression method" in message:
        return "gzip: invalid header"
    return "flate: corrupt input"


def content_type_is_html(content_type: Optional[bytes]) -> bool:
    """Transport.RoundTrip's test: the media type (before any ``;``, spaces trimmed) is exactly
    ``text/html`` (Go compares case-sensitively)."""
    return (content_type or b"").split(b";", 1)[0].strip() == b"text/html"
