"""Go's ``net/url`` URL (``Parse``, ``String``) and ``path.Join``, on bytes as Go's strings are.

Upstream's proxy transport rewrites links by parsing them with ``url.Parse``,
changing the parsed URL and printing it back with ``URL.String``; the printed
form is not the text it read (``a b`` becomes ``a%20b``, ``HTTP://x`` becomes
``http://x``), and a text ``url.Parse`` refuses is left as it was.  To answer
the same bytes this module follows Go 1.24's ``net/url`` (``parse``,
``parseAuthority``, ``parseHost``, ``setPath``, ``setFragment``, ``escape``,
``unescape``, ``shouldEscape``, ``EscapedPath``, ``String``) and ``path.Clean``
step for step.  A failed parse raises :class:`URLError`, whose text is Go's
``*url.Error`` (``parse "<url>": <why>``).
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace
from typing import Optional

from kapiserver.machinery import gorepr

_UPPERHEX = b"0123456789ABCDEF"
_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

# encodings: which part of a URL is escaped or unescaped
PATH, PATH_SEGMENT, HOST, ZONE, USER_PASSWORD, QUERY_COMPONENT, FRAGMENT = range(1, 8)


class URLError(ValueError):
    """``url.Parse`` refused a text: ``str()`` is Go's ``*url.Error`` text."""


class _ParseError(ValueError):
    """The reason of a refusal, before it is wrapped as ``parse "<url>": <reason>``."""


def _ishex(c: int) -> bool:
    return 0x30 <= c <= 0x39 or 0x61 <= c <= 0x66 or 0x41 <= c <= 0x46


def _unhex(c: int) -> int:
    if 0x30 <= c <= 0x39:
        return c - 0x30
    if 0x61 <= c <= 0x66:
        return c - 0x61 + 10
    if 0x41 <= c <= 0x46:
        return c - 0x41 + 10
    return 0


def should_escape(c: int, mode: int) -> bool:
    """Go's ``shouldEscape``: whether byte ``c`` is escaped in the part ``mode`` of a URL."""
    if c in _ALNUM:
        return False
    if mode in (HOST, ZONE) and c in b"!$&'()*+,;=:[]<>\"":
        return False
    if c in b"-_.~":
        return False
    if c in b"$&+,/:;=?@":
        if mode == PATH:
            return c == ord("?")
        if mode == PATH_SEGMENT:
            return c in b"/;,?"
        if mode == USER_PASSWORD:
            return c in b"@/?:"
        if mode == QUERY_COMPONENT:
            return True
        if mode == FRAGMENT:
            return False
    if mode == FRAGMENT and c in b"!()*":
        return False
    return True


def escape(s: bytes, mode: int) -> bytes:
    """Go's ``escape``: bytes that ``should_escape`` as ``%XX`` (a space as ``+`` in a query)."""
    if _NEEDS_ESCAPE[mode].search(s) is None:
        return s
    table = _ESCAPES[mode]
    return b"".join([table[c] for c in s])


def _escape_table(mode: int) -> list[bytes]:
    table = []
    for c in range(256):
        if c == 0x20 and mode == QUERY_COMPONENT:
            table.append(b"+")
        elif should_escape(c, mode):
            table.append(b"%" + _UPPERHEX[c >> 4:(c >> 4) + 1] + _UPPERHEX[c & 15:(c & 15) + 1])
        else:
            table.append(bytes((c,)))
    return table


_ESCAPES = {mode: _escape_table(mode) for mode in range(PATH, FRAGMENT + 1)}
# a byte that escape() changes, per mode: most texts need no escaping at all
_NEEDS_ESCAPE = {mode: re.compile(b"[" + b"".join(b"\\x%02x" % c for c in range(256) if _ESCAPES[mode][c] != bytes((c,)))
                                  + b"]") for mode in _ESCAPES}


def unescape(s: bytes, mode: int) -> bytes:
    """Go's ``unescape``; raises :class:`_ParseError` with Go's reason on a bad escape."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:  # %
            if i + 2 >= len(s) or not _ishex(s[i + 1]) or not _ishex(s[i + 2]):
                raise _ParseError("invalid URL escape " + gorepr.quote(s[i:i + 3]))
            if mode == HOST and _unhex(s[i + 1]) < 8 and s[i:i + 3] != b"%25":
                raise _ParseError("invalid URL escape " + gorepr.quote(s[i:i + 3]))
            if mode == ZONE:
                v = _unhex(s[i + 1]) << 4 | _unhex(s[i + 2])
                if s[i:i + 3] != b"%25" and v != 0x20 and should_escape(v, HOST):
                    raise _ParseError("invalid URL escape " + gorepr.quote(s[i:i + 3]))
            i += 3
        else:
            if mode in (HOST, ZONE) and c < 0x80 and should_escape(c, mode):
                raise _ParseError("invalid character " + gorepr.quote(s[i:i + 1]) + " in host name")
            i += 1
    if b"%" not in s and not (mode == QUERY_COMPONENT and b"+" in s):
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == 0x25:
            out.append(_unhex(s[i + 1]) << 4 | _unhex(s[i + 2]))
            i += 3
            continue
        out.append(0x20 if c == 0x2B and mode == QUERY_COMPONENT else c)
        i += 1
    return bytes(out)


@dataclass(frozen=True)
class UserInfo:
    username: bytes
    password: bytes = b""
    password_set: bool = False

    def string(self) -> bytes:
        s = escape(self.username, USER_PASSWORD)
        if self.password_set:
            s += b":" + escape(self.password, USER_PASSWORD)
        return s


@dataclass(frozen=True)
class URL:
    """Go's ``url.URL``: ``path`` and ``fragment`` decoded, ``raw_path``/``raw_fragment`` the
    sent encoding when it is not the default one, ``raw_query`` as sent."""

    scheme: bytes = b""
    opaque: bytes = b""
    user: Optional[UserInfo] = None
    host: bytes = b""
    path: bytes = b""
    raw_path: bytes = b""
    omit_host: bool = False
    force_query: bool = False
    raw_query: bytes = b""
    fragment: bytes = b""
    raw_fragment: bytes = b""

    @classmethod
    def parse(cls, raw: bytes, *, via_request: bool = False) -> "URL":
        """``url.Parse`` (``url.ParseRequestURI`` with ``via_request``, which takes no fragment)."""
        if via_request:
            try:
                return _parse(raw, True)
            except _ParseError as e:
                raise URLError(f"parse {gorepr.quote(raw)}: {e}") from None
        u, sep, frag = raw.partition(b"#")
        try:
            url = _parse(u, False)
        except _ParseError as e:
            raise URLError(f"parse {gorepr.quote(u)}: {e}") from None
        if not frag:
            return url
        try:
            return url._with_fragment(frag)
        except _ParseError as e:
            raise URLError(f"parse {gorepr.quote(raw)}: {e}") from None

    def with_path(self, path: bytes) -> "URL":
        """The URL with ``Path`` set (its ``RawPath`` hint kept, as a Go assignment keeps it:
        :meth:`escaped_path` ignores a hint that no longer matches)."""
        return replace(self, path=path)

    def _with_fragment(self, f: bytes) -> "URL":
        frag = unescape(f, FRAGMENT)
        return replace(self, fragment=frag, raw_fragment=b"" if escape(frag, FRAGMENT) == f else f)

    def escaped_path(self) -> bytes:
        """``URL.EscapedPath``: the raw path when it is a valid encoding of the path."""
        if self.raw_path and _valid_encoded(self.raw_path, PATH):
            try:
                if unescape(self.raw_path, PATH) == self.path:
                    return self.raw_path
            except _ParseError:
                pass
        if self.path == b"*":
            return b"*"
        return escape(self.path, PATH)

    def escaped_fragment(self) -> bytes:
        if self.raw_fragment and _valid_encoded(self.raw_fragment, FRAGMENT):
            try:
                if unescape(self.raw_fragment, FRAGMENT) == self.fragment:
                    return self.raw_fragment
            except _ParseError:
                pass
        return escape(self.fragment, FRAGMENT)

    def string(self) -> bytes:
        """``URL.String``."""
        buf = bytearray()
        if self.scheme:
            buf += self.scheme + b":"
        if self.opaque:
            buf += self.opaque
        else:
            if self.scheme or self.host or self.user is not None:
                if not (self.omit_host and not self.host and self.user is None):
                    if self.host or self.path or self.user is not None:
                        buf += b"//"
                    if self.user is not None:
                        buf += self.user.string() + b"@"
                    if self.host:
                        buf += escape(self.host, HOST)
            path = self.escaped_path()
            if path and path[:1] != b"/" and self.host:
                buf += b"/"
            if not buf:
                # RFC 3986 4.2: a first segment with a colon would read as a scheme
                if b":" in path.partition(b"/")[0]:
                    buf += b"./"
            buf += path
        if self.force_query or self.raw_query:
            buf += b"?" + self.raw_query
        if self.fragment:
            buf += b"#" + self.escaped_fragment()
        return bytes(buf)


def _valid_encoded(s: bytes, mode: int) -> bool:
    for c in s:
        if c in b"!$&'()*+,;=:@[]%":
            continue
        if should_escape(c, mode):
            return False
    return True


def _get_scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                return b"", raw
            continue
        if c == 0x3A:  # :
            if i == 0:
                raise _ParseError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return b"", raw
    return b"", raw


def _parse(raw: bytes, via_request: bool) -> URL:
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise _ParseError("net/url: invalid control character in URL")
    if not raw and via_request:
        raise _ParseError("empty url")
    if raw == b"*":
        return URL(path=b"*")
    scheme, rest = _get_scheme(raw)
    scheme = scheme.lower()
    force_query = False
    raw_query = b""
    if rest.endswith(b"?") and rest.count(b"?") == 1:
        force_query, rest = True, rest[:-1]
    else:
        rest, _, raw_query = rest.partition(b"?")
    if not rest.startswith(b"/"):
        if scheme:
            return URL(scheme=scheme, opaque=rest, force_query=force_query, raw_query=raw_query)
        if via_request:
            raise _ParseError("invalid URI for request")
        if b":" in rest.partition(b"/")[0]:
            raise _ParseError("first path segment in URL cannot contain colon")
    user: Optional[UserInfo] = None
    host = b""
    omit_host = False
    if (scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, rest = rest[2:], b""
        slash = authority.find(b"/")
        if slash >= 0:
            authority, rest = authority[:slash], authority[slash:]
        user, host = _parse_authority(authority)
    elif scheme and rest.startswith(b"/"):
        omit_host = True
    path = unescape(rest, PATH)
    raw_path = b"" if escape(path, PATH) == rest else rest
    return URL(scheme=scheme, user=user, host=host, path=path, raw_path=raw_path, omit_host=omit_host,
               force_query=force_query, raw_query=raw_query)


_USERINFO_OK = _ALNUM | frozenset(b"-._:~!$&'()*+,;=%@")


def _parse_authority(authority: bytes) -> tuple[Optional[UserInfo], bytes]:
    i = authority.rfind(b"@")
    host = _parse_host(authority if i < 0 else authority[i + 1:])
    if i < 0:
        return None, host
    userinfo = authority[:i]
    # Go ranges over runes: any non-ASCII rune is refused, as each of its bytes is here
    if any(c not in _USERINFO_OK for c in userinfo):
        raise _ParseError("net/url: invalid userinfo")
    if b":" not in userinfo:
        return UserInfo(unescape(userinfo, USER_PASSWORD)), host
    username, _, password = userinfo.partition(b":")
    return UserInfo(unescape(username, USER_PASSWORD), unescape(password, USER_PASSWORD), True), host


def _valid_optional_port(port: bytes) -> bool:
    if not port:
        return True
    return port[:1] == b":" and all(0x30 <= c <= 0x39 for c in port[1:])


def _parse_host(host: bytes) -> bytes:
    open_bracket = host.rfind(b"[")
    if open_bracket != -1:
        close_bracket = host.rfind(b"]")
        if close_bracket < 0:
            raise _ParseError("missing ']' in host")
        colon_port = host[close_bracket + 1:]
        if not _valid_optional_port(colon_port):
            raise _ParseError(f"invalid port {gorepr.quote(colon_port)} after host")
        unescaped_port = unescape(colon_port, HOST)
        hostname = host[open_bracket + 1:close_bracket]
        zone = hostname.find(b"%25")
        if zone >= 0:
            unescaped = unescape(hostname[:zone], HOST) + unescape(hostname[zone:], ZONE)
        else:
            unescaped = unescape(hostname, HOST)
        _check_ip_literal(unescaped)
        return b"[" + unescaped + b"]" + unescaped_port
    colon = host.rfind(b":")
    if colon != -1 and not _valid_optional_port(host[colon:]):
        raise _ParseError(f"invalid port {gorepr.quote(host[colon:])} after host")
    return unescape(host, HOST)


def _check_ip_literal(text: bytes) -> None:
    """netip.ParseAddr, then no IPv4 (only an IPv6 address may be in brackets)."""
    try:
        literal = text.decode("ascii")
        if ":" not in literal:
            ipaddress.IPv4Address(literal)
            raise _ParseError("invalid IP-literal")
        address, _, zone = literal.partition("%")
        if "%" in literal and not zone:
            raise ValueError("zone must be a non-empty string")
        ipaddress.IPv6Address(address)
    except _ParseError:
        raise
    except ValueError:
        # netip's reasons are finer ("IPv6 field has value >=2^16"...); this is its most common one
        raise _ParseError(f"invalid host: ParseAddr({gorepr.quote(text)}): unable to parse IP") from None


def clean(path: bytes) -> bytes:
    """Go's ``path.Clean``: the shortest equivalent path, lexically."""
    if not path:
        return b"."
    rooted = path[:1] == b"/"
    segments = path.split(b"/")[1:] if rooted else path.split(b"/")
    if all(segment not in (b"", b".", b"..") for segment in segments):
        return path  # already clean: no empty, . or .. segment, no trailing slash
    n = len(path)
    out = bytearray(b"/" if rooted else b"")
    r, dotdot = (1, 1) if rooted else (0, 0)
    while r < n:
        if path[r:r + 1] == b"/":
            r += 1
        elif path[r:r + 1] == b"." and (r + 1 == n or path[r + 1:r + 2] == b"/"):
            r += 1
        elif path[r:r + 2] == b".." and (r + 2 == n or path[r + 2:r + 3] == b"/"):
            r += 2
            if len(out) > dotdot:
                w = len(out) - 1
                while w > dotdot and out[w:w + 1] != b"/":
                    w -= 1
                del out[w:]
            elif not rooted:
                if out:
                    out += b"/"
                out += b".."
                dotdot = len(out)
        else:
            if (rooted and len(out) != 1) or (not rooted and out):
                out += b"/"
            while r < n and path[r:r + 1] != b"/":
                out.append(path[r])
                r += 1
    return bytes(out) if out else b"."


def join(*elems: bytes) -> bytes:
    """Go's ``path.Join``: the non-empty elements joined with ``/`` and cleaned ("" for none)."""
    parts = [e for e in elems if e]
    return clean(b"/".join(parts)) if parts else b""
