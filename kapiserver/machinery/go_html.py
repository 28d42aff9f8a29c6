"""The HTML tokenizer of Go's ``golang.org/x/net/html`` (``Tokenizer.Next``, ``Raw``, ``Token``),
for rewriting a page as upstream's proxy transport does.

Upstream's ``rewriteHTML`` runs that tokenizer over a page and writes every
token back: start and self-closing tags re-serialized (``Token.String``),
everything else as its raw bytes.  Where a tag begins and ends, which text is
raw (``script``, ``style``, ``textarea``, ``title``, ``iframe``, ``noembed``,
``noframes``, ``noscript``, ``xmp``, ``plaintext``), how a comment or a
``<!DOCTYPE>`` ends, how attributes are split and their entities decoded: all
of it decides the bytes a client gets, so this module follows the Go code
(x/net v0.30.0, ``token.go`` and ``escape.go``) state for state, over a whole
body held in memory.  Scans that only look for a byte (text up to ``<``, a
quoted value up to its quote, raw text up to its end tag) use ``bytes.find``
and regular expressions instead of Go's byte loop; they stop where it stops.

A tag cut off by the end of the input is no token (Go's tokenizer returns its
error instead), so it is not written back: upstream drops it too.
"""
from __future__ import annotations

import enum
import html.entities
import re
from dataclasses import dataclass, field
from typing import Iterator

_WS = b" \n\r\t\f"
_LETTERS = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ALNUM = _LETTERS | frozenset(b"0123456789")

_TAG_NAME = re.compile(rb"[^ \n\r\t\f/>]*")
_SPACES = re.compile(rb"[ \n\r\t\f]*")
_ATTR_KEY = re.compile(rb"[^ \n\r\t\f/>=]*")
_UNQUOTED_VALUE = re.compile(rb"[^ \n\r\t\f>]*")
_DASH_OR_LT = re.compile(rb"[-<]")
_COMMENT_SPECIAL = re.compile(rb"[-!>]")
# the elements whose content is raw text (or RCDATA): read up to their end tag
RAW_TEXT_ELEMENTS = (b"iframe", b"noembed", b"noframes", b"noscript", b"plaintext", b"script", b"style",
                     b"textarea", b"title", b"xmp")


class TokenType(enum.Enum):
    TEXT = "Text"
    START_TAG = "StartTag"
    END_TAG = "EndTag"
    SELF_CLOSING_TAG = "SelfClosingTag"
    COMMENT = "Comment"
    DOCTYPE = "Doctype"


@dataclass
class Token:
    """One token: its raw bytes are ``source[start:end]``; a start or self-closing tag also has
    its lower-cased ``name`` and its attributes (lower-cased keys, values unescaped), as Go's
    ``Tokenizer.Token`` gives them."""

    type: TokenType
    start: int
    end: int
    name: bytes = b""
    attrs: list[tuple[bytes, bytes]] = field(default_factory=list)

    def tag_string(self) -> bytes:
        """Go's ``Token.String`` of a start or self-closing tag."""
        out = bytearray(b"<" + self.name)
        for key, value in self.attrs:
            out += b" " + key + b'="' + escape(value) + b'"'
        out += b"/>" if self.type is TokenType.SELF_CLOSING_TAG else b">"
        return bytes(out)


def escape(value: bytes) -> bytes:
    """Go's html ``escape``: ``& ' < > "`` and CR as entities."""
    if not any(c in value for c in b"&'<>\"\r"):
        return value
    return (value.replace(b"&", b"&amp;").replace(b"'", b"&#39;").replace(b"<", b"&lt;").replace(b">", b"&gt;")
            .replace(b'"', b"&#34;").replace(b"\r", b"&#13;"))


def tokens(source: bytes) -> Iterator[Token]:
    """The tokens of ``source`` up to its end (Go's ``Next`` until its ``ErrorToken``)."""
    tokenizer = _Tokenizer(source)
    while True:
        token = tokenizer.next()
        if token is None:
            return
        yield token


class _Tokenizer:
    """Go's ``Tokenizer`` over bytes in memory: ``raw_end`` is the read position; ``eof`` is
    Go's ``z.err`` (set by a read past the end, which does not move the position)."""

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.n = len(buf)
        self.raw_start = 0
        self.raw_end = 0
        self.data_start = 0
        self.data_end = 0
        self.eof = False
        self.raw_tag = b""
        self.attrs: list[tuple[int, int, int, int]] = []

    def read_byte(self) -> int:
        if self.raw_end >= self.n:
            self.eof = True
            return 0
        c = self.buf[self.raw_end]
        self.raw_end += 1
        return c

    def skip_white_space(self) -> None:
        if self.eof:
            return
        self.raw_end = _SPACES.match(self.buf, self.raw_end).end()  # type: ignore[union-attr]
        if self.raw_end >= self.n:
            self.eof = True

    # ---------------------------------------------------------------- Next

    def next(self) -> Token | None:
        self.raw_start = self.raw_end
        self.data_start = self.data_end = self.raw_end
        if self.eof:
            return None
        if self.raw_tag:
            if self.raw_tag == b"plaintext":
                self.raw_end = self.n
                self.eof = True
                self.data_end = self.raw_end
            else:
                self.read_raw_or_rcdata()
            if self.data_end > self.data_start:
                return self._token(TokenType.TEXT)
        buf = self.buf
        while True:
            lt = buf.find(b"<", self.raw_end)
            if lt < 0:
                self.raw_end = self.n
                self.eof = True
                break
            self.raw_end = lt + 1
            c = self.read_byte()
            if self.eof:
                break
            if c in _LETTERS:
                kind = TokenType.START_TAG
            elif c == 0x2F:  # /
                kind = TokenType.END_TAG
            elif c in (0x21, 0x3F):  # ! ?
                kind = TokenType.COMMENT
            else:
                self.raw_end -= 1
                continue
            # text before the tag is a token of its own, returned first
            x = self.raw_end - 2
            if self.raw_start < x:
                self.raw_end = x
                self.data_end = x
                return self._token(TokenType.TEXT)
            if kind is TokenType.START_TAG:
                return self.read_start_tag()
            if kind is TokenType.END_TAG:
                c = self.read_byte()
                if self.eof:
                    break
                if c == 0x3E:  # "</>": an empty comment, so that its bytes pass through
                    return self._token(TokenType.COMMENT)
                if c in _LETTERS:
                    self.read_tag(False)
                    return None if self.eof else self._token(TokenType.END_TAG)
                self.raw_end -= 1
                self.read_until_close_angle()
                return self._token(TokenType.COMMENT)
            if c == 0x21:
                return self._token(self.read_markup_declaration())
            self.raw_end -= 1
            self.read_until_close_angle()
            return self._token(TokenType.COMMENT)
        if self.raw_start < self.raw_end:
            self.data_end = self.raw_end
            return self._token(TokenType.TEXT)
        return None

    def _token(self, kind: TokenType) -> Token:
        return Token(kind, self.raw_start, self.raw_end)

    # ---------------------------------------------------------------- raw text

    def read_raw_or_rcdata(self) -> None:
        if self.raw_tag == b"script":
            self.read_script()
            self.raw_tag = b""
            return
        end_tag = re.compile(rb"</" + re.escape(self.raw_tag) + rb"[ \n\r\t\f/>]", re.IGNORECASE)
        found = end_tag.search(self.buf, self.raw_end)
        if found is None:
            self.raw_end = self.n
            self.eof = True
        else:
            self.raw_end = found.start()
        self.data_end = self.raw_end
        self.raw_tag = b""

    def read_raw_end_tag(self) -> bool:
        """After ``</``: whether ``raw_tag`` and a delimiter follow (then the position is
        back before the ``</``)."""
        for expected in self.raw_tag:
            c = self.read_byte()
            if self.eof:
                return False
            if c != expected and c != expected - 0x20:
                self.raw_end -= 1
                return False
        c = self.read_byte()
        if self.eof:
            return False
        if c in _WS or c in (0x2F, 0x3E):
            self.raw_end -= 3 + len(self.raw_tag)
            return True
        self.raw_end -= 1
        return False

    def read_script(self) -> None:
        """Go's ``readScript``: up to ``</script>``, past ``<!--`` ... ``-->`` escapes."""
        try:
            self._script_states()
        finally:
            self.data_end = self.raw_end

    def _script_states(self) -> None:
        state = "data"
        buf = self.buf
        while True:
            if state == "data":
                lt = buf.find(b"<", self.raw_end)
                if lt < 0:
                    self.raw_end = self.n
                    self.eof = True
                    return
                self.raw_end = lt + 1
                state = "less_than"
            elif state == "less_than":
                c = self.read_byte()
                if self.eof:
                    return
                if c == 0x2F:
                    if self.read_raw_end_tag() or self.eof:
                        return
                    state = "data"
                elif c == 0x21:
                    state = "escape_start"
                else:
                    self.raw_end -= 1
                    state = "data"
            elif state in ("escape_start", "escape_start_dash"):
                c = self.read_byte()
                if self.eof:
                    return
                if c == 0x2D:
                    state = "escape_start_dash" if state == "escape_start" else "escaped_dash_dash"
                else:
                    self.raw_end -= 1
                    state = "data"
            elif state == "escaped":
                found = _DASH_OR_LT.search(buf, self.raw_end)
                if found is None:
                    self.raw_end = self.n
                    self.eof = True
                    return
                self.raw_end = found.end()
                state = "escaped_dash" if buf[found.start()] == 0x2D else "escaped_less_than"
            elif state in ("escaped_dash", "escaped_dash_dash"):
                c = self.read_byte()
                if self.eof:
                    return
                if c == 0x2D:
                    state = "escaped_dash_dash"
                elif c == 0x3C:
                    state = "escaped_less_than"
                elif c == 0x3E and state == "escaped_dash_dash":
                    state = "data"
                else:
                    state = "escaped"
            elif state == "escaped_less_than":
                c = self.read_byte()
                if self.eof:
                    return
                if c == 0x2F:
                    if self.read_raw_end_tag() or self.eof:
                        return
                    state = "escaped"
                elif c in _LETTERS:
                    state = "double_escape_start"
                else:
                    self.raw_end -= 1
                    state = "data"
            elif state == "double_escape_start":
                self.raw_end -= 1
                state = "double_escaped"
                for lower, upper in zip(b"script", b"SCRIPT"):
                    c = self.read_byte()
                    if self.eof:
                        return
                    if c != lower and c != upper:
                        self.raw_end -= 1
                        state = "escaped"
                        break
                if state == "double_escaped":
                    c = self.read_byte()
                    if self.eof:
                        return
                    if not (c in _WS or c in (0x2F, 0x3E)):
                        self.raw_end -= 1
                        state = "escaped"
            elif state == "double_escaped":
                found = _DASH_OR_LT.search(buf, self.raw_end)
                if found is None:
                    self.raw_end = self.n
                    self.eof = True
                    return
                self.raw_end = found.end()
                state = "double_escaped_dash" if buf[found.start()] == 0x2D else "double_escaped_less_than"
            elif state in ("double_escaped_dash", "double_escaped_dash_dash"):
                c = self.read_byte()
                if self.eof:
                    return
                if c == 0x2D:
                    state = "double_escaped_dash_dash"
                elif c == 0x3C:
                    state = "double_escaped_less_than"
                elif c == 0x3E and state == "double_escaped_dash_dash":
                    state = "data"
                else:
                    state = "double_escaped"
            elif state == "double_escaped_less_than":
                c = self.read_byte()
                if self.eof:
                    return
                if c == 0x2F:
                    if self.read_raw_end_tag():
                        self.raw_end += len(b"</script>")
                        state = "escaped"
                    elif self.eof:
                        return
                    else:
                        state = "double_escaped"
                else:
                    self.raw_end -= 1
                    state = "double_escaped"

    # ---------------------------------------------------------------- comments, doctypes

    def read_comment(self) -> None:
        """After ``<!--``: up to ``-->`` (or ``--!>``, or ``>`` right at the start)."""
        self.data_start = self.raw_end
        dash_count = 0
        beginning = True
        buf = self.buf
        while True:
            found = _COMMENT_SPECIAL.search(buf, self.raw_end)
            if found is None:
                self.raw_end = self.n
                self.eof = True
                self.data_end = self._abrupt_comment_data_end()
                break
            if found.start() > self.raw_end:  # other bytes: no dashes in a row any more
                dash_count = 0
                beginning = False
            self.raw_end = found.end()
            c = buf[found.start()]
            if c == 0x2D:
                dash_count += 1
                continue
            if c == 0x3E:
                if dash_count >= 2 or beginning:
                    self.data_end = self.raw_end - 3
                    break
            elif c == 0x21 and dash_count >= 2:
                c = self.read_byte()
                if self.eof:
                    self.data_end = self._abrupt_comment_data_end()
                    break
                if c == 0x3E:
                    self.data_end = self.raw_end - 4
                    break
                if c == 0x2D:
                    dash_count = 1
                    beginning = False
                    continue
            dash_count = 0
            beginning = False
        if self.data_end < self.data_start:
            self.data_end = self.data_start

    def _abrupt_comment_data_end(self) -> int:
        raw = self.buf[self.raw_start:self.raw_end]
        if len(raw) >= 4:
            raw = raw[4:]
            for suffix in (b"--!", b"--", b"-"):
                if raw.endswith(suffix):
                    return self.raw_end - len(suffix)
        return self.raw_end

    def read_until_close_angle(self) -> None:
        self.data_start = self.raw_end
        if self.eof:
            self.data_end = self.raw_end
            return
        gt = self.buf.find(b">", self.raw_end)
        if gt < 0:
            self.raw_end = self.n
            self.eof = True
            self.data_end = self.raw_end
        else:
            self.raw_end = gt + 1
            self.data_end = gt

    def read_markup_declaration(self) -> TokenType:
        """After ``<!``: a comment, a doctype, or a bogus comment (CDATA is not allowed)."""
        self.data_start = self.raw_end
        pair = []
        for _ in range(2):
            pair.append(self.read_byte())
            if self.eof:
                self.data_end = self.raw_end
                return TokenType.COMMENT
        if pair == [0x2D, 0x2D]:
            self.read_comment()
            return TokenType.COMMENT
        self.raw_end -= 2
        if self.read_doctype():
            return TokenType.DOCTYPE
        self.read_until_close_angle()
        return TokenType.COMMENT

    def read_doctype(self) -> bool:
        for expected in b"DOCTYPE":
            c = self.read_byte()
            if self.eof:
                self.data_end = self.raw_end
                return False
            if c != expected and c != expected + 0x20:
                self.raw_end = self.data_start
                return False
        self.skip_white_space()
        if self.eof:
            self.data_start = self.data_end = self.raw_end
            return True
        self.read_until_close_angle()
        return True

    # ---------------------------------------------------------------- tags

    def read_start_tag(self) -> Token | None:
        self.read_tag(True)
        if self.eof:
            return None
        name = self.buf[self.data_start:self.data_end].lower()
        if name in RAW_TEXT_ELEMENTS:
            self.raw_tag = name
        kind = TokenType.SELF_CLOSING_TAG if self.buf[self.raw_end - 2] == 0x2F else TokenType.START_TAG
        token = self._token(kind)
        token.name = _lower(self.buf[self.data_start:self.data_end])
        token.attrs = [(_lower(self.buf[ks:ke]), unescape_attribute(_convert_newlines(self.buf[vs:ve])))
                       for ks, ke, vs, ve in self.attrs]
        return token

    def read_tag(self, save_attrs: bool) -> None:
        self.attrs = []
        self.read_tag_name()
        self.skip_white_space()
        if self.eof:
            return
        while True:
            c = self.read_byte()
            if self.eof or c == 0x3E:
                break
            self.raw_end -= 1
            key_start, key_end = self.read_tag_attr_key()
            value_start, value_end = self.read_tag_attr_val()
            if save_attrs and key_start != key_end:
                self.attrs.append((key_start, key_end, value_start, value_end))
            self.skip_white_space()
            if self.eof:
                break

    def read_tag_name(self) -> None:
        self.data_start = self.raw_end - 1
        end = _TAG_NAME.match(self.buf, self.raw_end).end()  # type: ignore[union-attr]
        if end >= self.n:
            self.raw_end = self.data_end = self.n
            self.eof = True
        elif self.buf[end] in _WS:
            self.raw_end = end + 1
            self.data_end = end
        else:  # / or >: read again
            self.raw_end = self.data_end = end

    def read_tag_attr_key(self) -> tuple[int, int]:
        start = self.raw_end
        # an = before the name begins is part of the name
        scan = start + 1 if self.buf[start] == 0x3D else start
        end = _ATTR_KEY.match(self.buf, scan).end()  # type: ignore[union-attr]
        if end >= self.n:
            self.raw_end = self.n
            self.eof = True
            return start, self.n
        self.raw_end = end
        return start, end

    def read_tag_attr_val(self) -> tuple[int, int]:
        here = self.raw_end
        self.skip_white_space()
        if self.eof:
            return here, here
        c = self.read_byte()
        if self.eof or c == 0x2F:  # a / is consumed: the self-closing state
            return here, here
        if c != 0x3D:
            self.raw_end -= 1
            return here, here
        self.skip_white_space()
        if self.eof:
            return here, here
        quote = self.read_byte()
        if self.eof:
            return here, here
        if quote == 0x3E:
            self.raw_end -= 1
            return here, here
        if quote in (0x22, 0x27):
            start = self.raw_end
            close = self.buf.find(bytes((quote,)), start)
            if close < 0:
                self.raw_end = self.n
                self.eof = True
                return start, self.n
            self.raw_end = close + 1
            return start, close
        start = self.raw_end - 1
        end = _UNQUOTED_VALUE.match(self.buf, start).end()  # type: ignore[union-attr]
        if end >= self.n:
            self.raw_end = self.n
            self.eof = True
            return start, self.n
        if self.buf[end] == 0x3E:
            self.raw_end = end
        else:
            self.raw_end = end + 1
        return start, end


def _lower(b: bytes) -> bytes:
    """Go's html ``lower``: A-Z only (``bytes.lower`` is ASCII-only too)."""
    return b.lower()


def _convert_newlines(b: bytes) -> bytes:
    return b.replace(b"\r\n", b"\n").replace(b"\r", b"\n") if b"\r" in b else b


# Windows-1252 for numeric references 0x80-0x9F (the WHATWG table Go uses)
_REPLACEMENT_TABLE = ("\u20AC\u0081\u201A\u0192\u201E\u2026\u2020\u2021\u02C6\u2030\u0160\u2039\u0152\u008D"
                      "\u017D\u008F\u0090\u2018\u2019\u201C\u201D\u2022\u2013\u2014\u02DC\u2122\u0161\u203A"
                      "\u0153\u009D\u017E\u0178")
# WHATWG's named references, with and without semicolon: the same table as Go's entity.go
_ENTITIES = {name.encode("ascii"): value.encode("utf-8") for name, value in html.entities.html5.items()}


def _int32(x: int) -> int:
    """A Go ``rune`` (int32) after arithmetic that may wrap."""
    return (x + 0x80000000) % 0x100000000 - 0x80000000


def _unescape_entity(s: bytes, src: int) -> tuple[bytes, int]:
    """Go's ``unescapeEntity`` in an attribute value: what ``&...`` at ``src`` becomes, and
    where reading goes on."""
    rest = len(s) - src
    if rest <= 1:
        return b"&", src + 1
    i = 1
    if s[src + 1] == 0x23:  # #
        if rest <= 3:
            return b"&", src + 1
        i = 2
        hex_digits = s[src + i] in (0x78, 0x58)
        if hex_digits:
            i += 1
        x = 0
        while i < rest:
            c = s[src + i]
            i += 1
            if hex_digits and c in b"0123456789abcdefABCDEF":
                x = _int32(16 * x + int(chr(c), 16))
                continue
            if not hex_digits and 0x30 <= c <= 0x39:
                x = _int32(10 * x + c - 0x30)
                continue
            if c != 0x3B:
                i -= 1
            break
        if i <= 3:
            return b"&", src + 1
        if 0x80 <= x <= 0x9F:
            ch = _REPLACEMENT_TABLE[x - 0x80]
        elif x <= 0 or 0xD800 <= x <= 0xDFFF or x > 0x10FFFF:
            ch = "\uFFFD"
        else:
            ch = chr(x)
        return ch.encode("utf-8"), src + i
    while i < rest:
        c = s[src + i]
        i += 1
        if c in _ALNUM:
            continue
        if c != 0x3B:
            i -= 1
        break
    name = s[src + 1:src + i]
    if name and not (name[-1] != 0x3B and rest > i and s[src + i] == 0x3D):
        value = _ENTITIES.get(name)
        if value is not None:
            return value, src + i
    return s[src:src + i], src + i


def unescape_attribute(value: bytes) -> bytes:
    """Go's ``unescape(b, attribute=true)``: character references decoded, those without a
    semicolon only when whole (``&amp=``, ``&ampx`` stay as they are)."""
    amp = value.find(b"&")
    if amp < 0:
        return value
    out = bytearray(value[:amp])
    src = amp
    while src < len(value):
        if value[src] == 0x26:
            produced, src = _unescape_entity(value, src)
            out += produced
        else:
            nxt = value.find(b"&", src)
            nxt = len(value) if nxt < 0 else nxt
            out += value[src:nxt]
            src = nxt
    return bytes(out)
