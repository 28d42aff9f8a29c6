"""A 422 Invalid of many causes written as a stream.

Upstream lists every cause of an Invalid error in ``details.causes`` and again in the message
(``[a, b, ...]``, each distinct one once): an object with 400,000 bad finalizers gets a ~100 MB
Status.  :class:`StatusBody` writes that Status in pieces (``list_stream.PiecedBody``) under the
transport's flow control, rendering each slice of causes when it is written, so neither the
rendered causes nor the encoded answer are ever held whole, and the reactor gets a turn between
slices.  The bytes are those of the whole Status encoded at once (``respond.write_status``'s):
the encoded Status of a placeholder message and one placeholder cause is cut around them, and
the pieces go where they were; a JSON string's escaping, character by character, is the same
for the whole as for its parts.

Compact JSON and protobuf are streamed; indented JSON and YAML are written whole.
"""
from __future__ import annotations

from array import array
from typing import Sequence

from kapiserver.endpoints.negotiation import MediaTarget
from kapiserver.machinery import codec, cooperate, errors, protobuf

# a Status of fewer causes is written whole (it is small)
STREAMED_CAUSES = 1_000
# causes rendered per piece (~50 KB of JSON) and per turn of the preparing pass
CAUSES_PER_PIECE = 500
_PREPARE_BATCH = 5_000

_MESSAGE_MARK = "kapiserver-status-stream-message"
_CAUSE_MARK = "kapiserver-status-stream-cause"
_RAW_MARK = b"kapiserver-status-stream-raw"
_LENGTH_DELIMITED = 2


def streamable(err: errors.StatusError, target: MediaTarget, pretty: bool) -> bool:
    """Whether ``err`` is written as a stream: an Invalid error with many causes, its message and
    causes still those rendered from them, in compact JSON or protobuf."""
    if not isinstance(err, errors.InvalidError) or len(err.causes) < STREAMED_CAUSES:
        return False
    causes = (err.details or {}).get("causes")
    if not isinstance(causes, errors.CauseDicts) or causes.causes is not err.causes or err.message_set:
        return False
    if target.prefer_protobuf:
        return True
    return target.media_type == codec.JSON and not pretty


def _escaped(value: object) -> bytes:
    """The compact JSON of ``value`` without its newline and its outer quotes or brackets."""
    return codec.encode_json(value)[1:-2]


def _field_head(number: int, length: int) -> bytes:
    out = bytearray()
    protobuf.write_tag(out, number, _LENGTH_DELIMITED)
    protobuf.write_varint(out, length)
    return bytes(out)


def _cut(whole: bytes, mark: bytes) -> tuple[bytes, bytes]:
    before, found, after = whole.partition(mark)
    if not found:  # cannot happen: nothing else in the Status quotes the marks
        raise ValueError("status template without its placeholder")
    return before, after


async def first_occurrences(causes: Sequence[errors.Cause]) -> tuple[bytearray, int]:
    """For each cause whether its rendering (``errors.rendered_cause``) is the first of its text,
    and how many are: the message lists each distinct cause once.  An open-addressing table of
    cause indices and 32 bits of their rendering's hash (8 bytes a slot, twice as many slots as
    causes) instead of a set of the rendered strings; equal hashes are compared in full."""
    count = len(causes)
    size = 1 << max(4, (2 * count).bit_length())
    mask = size - 1
    slots = array("i", [-1]) * size
    checks = array("I", [0]) * size
    first = bytearray(count)
    distinct = 0
    render = errors.rendered_cause
    for index, cause in enumerate(causes):
        if index and index % _PREPARE_BATCH == 0:
            await cooperate.yield_to_reactor()
        text = render(cause)
        hashed = hash(text)
        check = (hashed >> 32) & 0xFFFFFFFF
        slot = hashed & mask
        while True:
            other = slots[slot]
            if other < 0:
                slots[slot] = index
                checks[slot] = check
                first[index] = 1
                distinct += 1
                break
            if checks[slot] == check and render(causes[other]) == text:
                break
            slot = (slot + 1) & mask
    return first, distinct


class StatusBody:
    """The pieces of one Invalid Status: the head up to the message's list, a piece per
    ``CAUSES_PER_PIECE`` causes of the message, the part between the message and the causes,
    a piece per ``CAUSES_PER_PIECE`` causes of ``details.causes``, the tail."""

    kind = "Status"

    def __init__(self, err: errors.InvalidError, target: MediaTarget) -> None:
        self.err = err
        self.causes = err.causes
        self.protobuf = target.prefer_protobuf
        self.content_type = protobuf.MEDIA_TYPE if self.protobuf else target.content_type
        self.first = bytearray()
        self.distinct = 0
        self.slices = -(-len(self.causes) // CAUSES_PER_PIECE)
        self._listed = False  # whether a cause of the message was written
        self._head = self._middle = self._tail = b""

    def _template(self) -> dict:
        details = dict(self.err.details or {}, causes=[{"reason": _CAUSE_MARK}])
        return errors.status_object("Failure", _MESSAGE_MARK, self.err.reason, details, self.err.code,
                                    self.err.metadata)

    def _message_edges(self) -> tuple[str, str]:
        """What the message holds before its causes and after them."""
        if self.distinct == 1:
            return f"{self.err.subject}: ", ""
        return f"{self.err.subject}: [", "]"

    async def prepare(self) -> None:
        self.first, self.distinct = await first_occurrences(self.causes)
        opening, closing = self._message_edges()
        if self.protobuf:
            await self._prepare_protobuf(opening, closing)
            return
        before, after = _cut(codec.encode_json(self._template()), f'"{_MESSAGE_MARK}"'.encode())
        between, rest = _cut(after, codec.encode_json([{"reason": _CAUSE_MARK}])[:-1])
        self._head = before + b'"' + _escaped(opening)
        self._middle = _escaped(closing) + b'"' + between + b"["
        self._tail = b"]" + rest

    async def _prepare_protobuf(self, opening: str, closing: str) -> None:
        """The lengths protobuf writes before the message and the causes: one more pass."""
        template = self._template()
        mark_cause = template["details"]["causes"][0]
        details = protobuf.encode_message("meta.StatusDetails", template["details"])
        details_a, details_c = _cut(details, self._cause_field(mark_cause))
        raw = protobuf.encode_message("meta.Status", template)
        raw_a, raw_rest = _cut(raw, _field_head(3, len(_MESSAGE_MARK)) + _MESSAGE_MARK.encode())
        raw_b, raw_c = _cut(raw_rest, _field_head(5, len(details)) + details)
        envelope_a, envelope_c = _cut(protobuf.wrap(template["apiVersion"], template["kind"], _RAW_MARK),
                                      _field_head(2, len(_RAW_MARK)) + _RAW_MARK)
        message_length = len(opening.encode()) + len(closing.encode()) + 2 * max(0, self.distinct - 1)
        causes_length = 0
        for index, cause in enumerate(self.causes):
            if index and index % _PREPARE_BATCH == 0:
                await cooperate.yield_to_reactor()
            if self.first[index]:
                message_length += len(errors.rendered_cause(cause).encode())
            causes_length += len(self._cause_field(cause.to_dict()))
        details_length = len(details_a) + causes_length + len(details_c)
        raw_length = (len(raw_a) + len(_field_head(3, message_length)) + message_length + len(raw_b)
                      + len(_field_head(5, details_length)) + details_length + len(raw_c))
        self._head = (envelope_a + _field_head(2, raw_length) + raw_a + _field_head(3, message_length)
                      + opening.encode())
        self._middle = closing.encode() + raw_b + _field_head(5, details_length) + details_a
        self._tail = details_c + raw_c + envelope_c

    @staticmethod
    def _cause_field(cause: dict) -> bytes:
        encoded = protobuf.encode_message("meta.StatusCause", cause)
        return _field_head(4, len(encoded)) + encoded

    def head(self) -> bytes:
        return self._head

    def piece_count(self) -> int:
        return 2 * self.slices + 1

    def piece(self, index: int) -> bytes:
        if index < self.slices:
            return self._message_piece(index)
        if index == self.slices:
            return self._middle
        return self._causes_piece(index - self.slices - 1)

    def tail(self) -> bytes:
        return self._tail

    def _message_piece(self, index: int) -> bytes:
        start = index * CAUSES_PER_PIECE
        first = self.first
        rendered = [errors.rendered_cause(cause)
                    for offset, cause in enumerate(self.causes[start:start + CAUSES_PER_PIECE])
                    if first[start + offset]]
        if not rendered:
            return b""
        text = ", ".join(rendered)
        if self._listed:
            text = ", " + text
        self._listed = True
        return text.encode() if self.protobuf else _escaped(text)

    def _causes_piece(self, index: int) -> bytes:
        start = index * CAUSES_PER_PIECE
        chunk = self.causes[start:start + CAUSES_PER_PIECE]
        if self.protobuf:
            return b"".join(self._cause_field(cause.to_dict()) for cause in chunk)
        encoded = _escaped([cause.to_dict() for cause in chunk])
        return b"," + encoded if index else encoded
