"""A list answer in pieces: a head, one piece per item, a tail.

A list of 2,000 Pods is megabytes once encoded, and many times that as
decoded objects.  Instead of building the list object and encoding it whole,
the list handler writes it piece by piece (``endpoints/list_stream.py``):
each item is decoded, shaped (Table row, PartialObjectMetadata) and encoded
only when its turn comes, and the bytes are exactly those of encoding the
whole list at once (JSON compact or indented, YAML, protobuf, Table,
PartialObjectMetadataList).

The encoding of an item that is a stored value is memoized on its
``KeyValue`` (``KeyValue.encodings``), keyed by the Store that decoded it and
the form asked for: the watch cache keeps one ``KeyValue`` per unchanged
object, so the next LIST of it in the same form costs a lookup, and the
initial events of a watch-list reuse the same bytes (``item_json``,
``item_protobuf``).  Only the forms programs ask for are kept (compact JSON,
protobuf, each as the object or as PartialObjectMetadata), so the memory
this takes stays a small multiple of the stored objects; indented JSON and
YAML (people) are encoded anew, and Table rows (they hold the object's age)
always are.  The compact JSON of most objects is their stored value with the
``resourceVersion`` added: that one is kept as the point where it goes (an
int), and the bytes are spliced together when written.

A list of the watch cache's same page in the same form (nothing under it
changed since) reuses the whole run of encoded items, kept in the page's
``ListResult.memo``: a repeated list costs its head, its tail and the write,
whatever its length.  The run is dropped with the page at the next change; it
joins encodings each item keeps anyway, so it at most doubles what they take.

The items of a built-in kind's list carry no ``kind`` and ``apiVersion``, as
upstream's typed lists encode them (a custom resource's items, unstructured
upstream, keep theirs; so do watch events and GETs).  The compact JSON of
such an item is the memoized encoding of the object with that prefix cut
off (``Store._stamp_type`` puts it first), so a GET, a watch and a list share
one encoding per object.

Protobuf frames the items inside a length-prefixed envelope: every item's
size must be known before the first byte is written, so :meth:`ListBody.prepare`
encodes them all first (in slices, yielding to the reactor); memoized on
the watch cache's values they take no memory per request.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Hashable, Optional

from kapiserver.endpoints import partial_metadata, table
from kapiserver.endpoints.negotiation import PROTOBUF_SHAPE_KINDS, MediaTarget
from kapiserver.machinery import codec, cooperate, protobuf
from kapiserver.machinery.protobuf_tables import all_messages
from kapiserver.machinery.protobuf_types import split_api_version
from kapiserver.registry.store import StoredList, StoredObject
from kapiserver.storage.interface import DECODES, KeyValue

# Stands for the items while the rest of the list is encoded (plain letters:
# never quoted or escaped, in JSON or YAML).
_MARKER = "kapiserverlistitemsplaceholder"
# Encoding one slice of a protobuf list's items: at most this long before the
# reactor gets a turn.
PREPARE_SLICE_SECONDS = 0.005
# A memoized run of items is written in slices of this size (what the list stream writes at once).
RUN_SLICE = 256 * 1024


def memoized(item: Any, key: Hashable, make: Callable[[], bytes]) -> bytes:
    """``make()``, kept on ``item`` when it is a stored value (the next call with ``key`` reuses it).

    What is kept is the splice point (an int) when the encoding is the stored value itself with
    the object's ``resourceVersion`` added (:func:`_splice_point`), else the bytes."""
    if not isinstance(item, KeyValue):
        return make()
    memo = item.encodings
    found = memo.get(key) if memo is not None else None
    if found is None:
        found = make()  # first: a value that does not decode gets no memo (lists check for one)
        kept = _splice_point(item, found)
        if memo is None or memo is DECODES:
            object.__setattr__(item, "encodings", {key: found if kept is None else kept})
        else:
            memo[key] = found if kept is None else kept
        return found
    if type(found) is int:
        value = item.value
        return value[:found] + _resource_version_member(item) + value[found:]
    return found


def _resource_version_member(item: KeyValue) -> bytes:
    return b',"resourceVersion":"%d"' % item.mod_revision


def _splice_point(item: KeyValue, encoded: bytes) -> Optional[int]:
    """Where ``encoded`` is ``item``'s stored value with ``,"resourceVersion":"N"`` inserted, if it is.

    The Store writes an object's compact JSON without its resourceVersion and reads it back with
    the resourceVersion appended to its metadata (``registry/store.py`` ``encode``, ``decode``), so
    the compact JSON of an object that nothing changed on the way out (no conversion, no escaping)
    is its stored value plus those bytes: kept as the point where they go, the memo costs an int
    instead of a second copy of the object.  The comparison is exact, so anything else keeps its bytes.
    """
    value = item.value
    member = _resource_version_member(item)
    if len(encoded) != len(value) + len(member):
        return None
    at = encoded.find(member)
    while at != -1:
        if encoded.startswith(value[:at]) and encoded.endswith(value[at:]):
            return at
        at = encoded.find(member, at + 1)
    return None


def _json_value(obj: Any) -> bytes:
    return codec.encode_json(obj)[:-1]  # without the newline a whole body ends with


def _indent(body: bytes, spaces: bytes) -> bytes:
    return spaces + body.replace(b"\n", b"\n" + spaces)


def _without_type_meta(obj: Any) -> Any:
    return {k: v for k, v in obj.items() if k != "kind" and k != "apiVersion"}


class _TypeMetaTrim:
    """Cuts a built-in kind's ``kind`` and ``apiVersion`` from the compact JSON of its objects."""

    def __init__(self, kind: str, api_version: str) -> None:
        self._prefix = b'{"kind":' + _json_value(kind) + b',"apiVersion":' + _json_value(api_version) + b","

    def __call__(self, body: bytes) -> bytes:
        if body.startswith(self._prefix):
            return b"{" + body[len(self._prefix):]
        # not stamped by the Store (cannot happen for a stored value): decode and encode anew
        return _json_value(_without_type_meta(codec.decode_json(body)))


class _Run:
    """The items of a list, encoded and joined, as the watch cache's page memo keeps them.

    ``encoded`` is the run when an earlier list of the same page in the same form left it;
    otherwise the pieces of this list are gathered (:meth:`keep`) and left for the next.
    """

    def __init__(self, memo: Optional[dict], key: Optional[Hashable]) -> None:
        self._memo = memo if key is not None else None
        self._key = key
        self.encoded: Optional[bytes] = self._memo.get(key) if self._memo is not None else None
        self._pieces: Optional[list[bytes]] = [] if self._memo is not None and self.encoded is None else None

    def keep(self, piece: bytes, last: bool) -> None:
        if self._pieces is None:
            return
        self._pieces.append(piece)
        if last:
            assert self._memo is not None
            self._memo[self._key] = b"".join(self._pieces)
            self._pieces = None

    def slice_count(self) -> int:
        assert self.encoded is not None
        return -(-len(self.encoded) // RUN_SLICE)

    def slice(self, index: int) -> bytes:
        assert self.encoded is not None
        return self.encoded[index * RUN_SLICE:(index + 1) * RUN_SLICE]


class ListBody:
    """The pieces of one list answer: a head, ``piece(i)`` for each i below ``piece_count()``
    (one per item, with what separates it from the previous one; or slices of the items'
    memoized run), a tail."""

    content_type: str = codec.JSON

    def __init__(self, listed: StoredList, run_key: Optional[Hashable] = None) -> None:
        self.listed = listed
        self.kind = f"list of {listed.kind}"
        self.items = listed.items
        self.run = _Run(listed.memo, run_key)

    async def prepare(self) -> None:
        """Work needed before the head can be written (protobuf: every item's size)."""

    def head(self) -> bytes:
        raise NotImplementedError

    def piece_count(self) -> int:
        return self.run.slice_count() if self.run.encoded is not None else len(self.items)

    def piece(self, index: int) -> bytes:
        if self.run.encoded is not None:
            return self.run.slice(index)
        piece = self.item(index)
        self.run.keep(piece, index == len(self.items) - 1)
        return piece

    def item(self, index: int) -> bytes:
        """The piece of the item at ``index``."""
        raise NotImplementedError

    def tail(self) -> bytes:
        raise NotImplementedError


class _TextList(ListBody):
    """JSON (compact or indented) or YAML: the list's envelope encoded with a
    placeholder where the items go, split around it."""

    def __init__(self, listed: StoredList, target: MediaTarget, envelope: dict, items_key: str,
                 shape: Callable[[Any], Any], memo_key: Optional[Hashable], pretty: bool,
                 trim: Optional[_TypeMetaTrim] = None) -> None:
        yaml = target.media_type == codec.YAML
        pretty = pretty and not yaml
        memo_key = None if memo_key is None or yaml or pretty else (memo_key, "json")
        super().__init__(listed, memo_key)
        self.content_type = target.content_type
        self.yaml = yaml
        self.pretty = pretty
        self.shape = shape
        self.memo_key = memo_key
        self.trim = trim
        whole = codec.encode({**envelope, items_key: _MARKER}, target.media_type, self.pretty)
        if self.yaml:
            placeholder = f"{items_key}: {_MARKER}\n".encode()
        else:
            placeholder = f'"{_MARKER}"'.encode()
        before, found, after = whole.partition(placeholder)
        if not found:  # cannot happen: the envelope holds nothing that quotes the marker
            raise ValueError("list envelope without its items placeholder")
        empty = not self.items
        if self.yaml:
            self._head = before + (f"{items_key}: []\n" if empty else f"{items_key}:\n").encode()
        else:
            self._head = before + b"["
            after = (b"]" if empty or not self.pretty else b"\n  ]") + after
        self._tail = after

    def head(self) -> bytes:
        return self._head

    def tail(self) -> bytes:
        return self._tail

    def _encode(self, obj: Any) -> bytes:
        if self.yaml:
            return codec.encode_yaml([obj])  # "- key: ..." lines, as inside the list
        if self.pretty:
            return _indent(codec.encode_json(obj, pretty=True), b"    ")
        return _json_value(obj)

    def item(self, index: int) -> bytes:
        item = self.items[index]
        if self.memo_key is None:
            obj = self.shape(self.listed.external(item))
            body = self._encode(obj if self.trim is None else _without_type_meta(obj))
        else:
            body = memoized(item, self.memo_key, lambda: self._encode(self.shape(self.listed.external(item))))
            if self.trim is not None:
                body = self.trim(body)
        if self.yaml:
            return body
        if self.pretty:
            return (b"\n" if index == 0 else b",\n") + body
        return body if index == 0 else b"," + body


class _ProtobufList(ListBody):
    """``k8s\\0`` + the runtime.Unknown envelope around the list message, whose
    items are length-delimited item messages."""

    content_type = protobuf.MEDIA_TYPE

    def __init__(self, listed: StoredList, api_version: str, kind: str, list_message: str, envelope: dict,
                 shape: Callable[[Any], Any], memo_key: Hashable) -> None:
        super().__init__(listed, (memo_key, "protobuf"))
        self.api_version = api_version
        self.kind = kind
        self.shape = shape
        self.memo_key = (memo_key, "protobuf")
        fields = all_messages()[list_message]
        items_field = next(f for f in fields if f.name == "items")
        self.item_message = items_field.message
        self.items_tag = bytearray()
        protobuf.write_tag(self.items_tag, items_field.number, protobuf.LENGTH_DELIMITED)
        # the list's other fields (its ListMeta) come before or after the items, in number order
        rest = protobuf.encode_message(list_message, {k: v for k, v in envelope.items() if k != "items"})
        others = [f.number for f in fields if f.name != "items"]
        items_last = all(n < items_field.number for n in others)
        if not items_last and not all(n > items_field.number for n in others):
            raise ValueError(f"{list_message}: items are neither the first nor the last field")
        self.before, self.after = (rest, b"") if items_last else (b"", rest)
        self.encoded: list[bytes] = []

    def _encode(self, item: Any) -> bytes:
        return protobuf.encode_message(self.item_message, self.shape(self.listed.external(item)))

    async def prepare(self) -> None:
        if self.run.encoded is not None:
            return
        deadline = time.monotonic() + PREPARE_SLICE_SECONDS
        encoded = self.encoded
        for item in self.items:
            encoded.append(memoized(item, self.memo_key, lambda: self._encode(item)))
            if time.monotonic() > deadline:
                await cooperate.yield_to_reactor()
                deadline = time.monotonic() + PREPARE_SLICE_SECONDS

    def _framed(self, raw: bytes) -> bytes:
        out = bytearray(self.items_tag)
        protobuf.write_varint(out, len(raw))
        return bytes(out)

    def head(self) -> bytes:
        size = len(self.before) + len(self.after)
        if self.run.encoded is not None:
            size += len(self.run.encoded)
        for raw in self.encoded:
            size += len(self._framed(raw)) + len(raw)
        type_meta = bytearray()
        protobuf.write_bytes_field(type_meta, 1, self.api_version.encode())
        protobuf.write_bytes_field(type_meta, 2, self.kind.encode())
        out = bytearray(protobuf.MAGIC)
        protobuf.write_bytes_field(out, 1, bytes(type_meta))
        protobuf.write_tag(out, 2, protobuf.LENGTH_DELIMITED)
        protobuf.write_varint(out, size)
        out += self.before
        return bytes(out)

    def item(self, index: int) -> bytes:
        raw = self.encoded[index]
        return self._framed(raw) + raw

    def tail(self) -> bytes:
        out = bytearray(self.after)
        protobuf.write_bytes_field(out, 3, b"")  # contentEncoding, contentType: empty, as Go writes them
        protobuf.write_bytes_field(out, 4, b"")
        return bytes(out)


def item_json(item: Any, store: Any, external: Callable[[Any], dict]) -> bytes:
    """The compact JSON of one stored object as its list carries it (the memoized bytes)."""
    return memoized(item, ((store.encoding_token, ""), "json"), lambda: _json_value(external(item)))


def item_protobuf(item: Any, store: Any, external: Callable[[Any], dict], message: str) -> bytes:
    """The protobuf message of one stored object, without envelope (the memoized bytes)."""
    return memoized(item, ((store.encoding_token, ""), "protobuf"),
                    lambda: protobuf.encode_message(message, external(item)))


def stored_body(stored: StoredObject, target: MediaTarget) -> Optional[tuple[str, bytes]]:
    """A GET's answer (content type, body) from the encodings memoized on the stored value:
    the object itself in compact JSON, or in protobuf when preferred.  None for any other
    form (the caller encodes the decoded object)."""
    if target.as_kind:
        return None
    store, rtype = stored.store, stored.store.rtype

    def external(_: Any) -> dict:
        return stored.external()
    if target.prefer_protobuf:
        message = _list_message(rtype.api_version, rtype.kind)
        if message is not None:
            try:
                raw = item_protobuf(stored.item, store, external, message)
            except protobuf.ProtobufError:
                return None  # the caller tries again, logs it and answers JSON
            return protobuf.MEDIA_TYPE, protobuf.wrap(rtype.api_version, rtype.kind, raw)
    if target.media_type != codec.JSON:
        return None
    return target.content_type, item_json(stored.item, store, external) + b"\n"


def _list_message(api_version: str, kind: str) -> Optional[str]:
    group, version = split_api_version(api_version)
    from kapiserver.machinery.protobuf_tables import message_for
    return message_for(group, version, kind)


def list_body(listed: StoredList, target: MediaTarget, pretty: bool,
              include_object: Callable[[], str]) -> ListBody:
    """The pieces of ``listed`` in the negotiated encoding and shape (upstream's
    transformResponseObject, then the serializer).  ``include_object`` reads
    ``?includeObject=`` (asked only for Tables: it may answer 400)."""
    token = listed.store.encoding_token
    meta_version = f"{target.group}/{target.version}"
    trim: Optional[_TypeMetaTrim] = None
    if target.as_kind == "Table":
        include = include_object()
        rtype = listed.store.rtype
        cols = table.table_columns(rtype)
        if rtype.table_row_order is not None:  # a printer that sorts: the rows need every object first
            ordered = sorted((listed.external(item) for item in listed.items), key=rtype.table_row_order)
            listed = StoredList(listed.kind, listed.api_version, listed.metadata, ordered, listed.store)
        envelope = table.to_table(rtype, [], include, listed.metadata, meta_version)
        return _TextList(listed, target, envelope, "rows",
                         lambda obj: table.row(cols, obj, include, meta_version), None, pretty)
    if target.as_kind == "PartialObjectMetadataList":
        envelope = partial_metadata.to_partial_object_metadata_list([], meta_version, listed.metadata)
        shape: Callable[[Any], Any] = lambda obj: partial_metadata.to_partial_object_metadata(obj, meta_version)
        memo_key: Hashable = (token, "PartialObjectMetadata", meta_version)
    else:
        envelope = {"kind": listed.kind, "apiVersion": listed.api_version, "metadata": listed.metadata,
                    "items": []}
        shape = _unchanged
        memo_key = (token, "")
        if not listed.store.rtype.is_crd:  # a typed list: its items without TypeMeta
            trim = _TypeMetaTrim(listed.store.rtype.kind, listed.store.rtype.api_version)
    if target.prefer_protobuf and (not target.as_kind or target.as_kind in PROTOBUF_SHAPE_KINDS):
        message = _list_message(envelope["apiVersion"], envelope["kind"])
        if message is not None:
            return _ProtobufList(listed, envelope["apiVersion"], envelope["kind"], message, envelope, shape,
                                 memo_key)
    return _TextList(listed, target, envelope, "items", shape, memo_key, pretty, trim)


def _unchanged(obj: Any) -> Any:
    return obj

