"""Content negotiation: which encoding and which object shape to answer with.

Clients ask for a media type (JSON, YAML, or protobuf for built-in kinds: see
``MediaTarget.prefer_protobuf``; custom resources are never protobuf, but their
errors and PartialObjectMetadata are, as upstream) and,
through ``as``/``g``/``v`` parameters, for a different shape of the object:
``Table``, ``PartialObjectMetadata(List)`` (meta.k8s.io) or aggregated
discovery (``APIGroupDiscoveryList`` of apidiscovery.k8s.io).
"""
from __future__ import annotations

import functools
from typing import Iterable, NamedTuple, Optional

from kapiserver.machinery import codec, errors
from kapiserver.machinery.protobuf import MEDIA_TYPE as PROTOBUF

_SERVED = {"application/json": codec.JSON, "application/yaml": codec.YAML,
           "application/*": codec.JSON, "*/*": codec.JSON}


class MediaTarget(NamedTuple):
    media_type: str  # codec.JSON or codec.YAML
    as_kind: str = ""  # "" = the object itself
    group: str = ""
    version: str = ""
    # The client listed protobuf first: a plain object (or PartialObjectMetadata)
    # whose kind has a protobuf table is answered in protobuf, watches as
    # protobuf frames; everything else (Tables, kinds without a table) in
    # ``media_type``.
    prefer_protobuf: bool = False
    # Status answers (errors, delete results) in protobuf: protobuf came first
    # in Accept, even where objects cannot be protobuf (custom resources).
    status_protobuf: bool = False

    @property
    def content_type(self) -> str:
        if not self.as_kind:
            return self.media_type
        return f"{self.media_type};as={self.as_kind};g={self.group};v={self.version}"

    def for_status(self) -> "MediaTarget":
        """The target of a Status answer: same encodings, never another shape."""
        return MediaTarget(self.media_type, prefer_protobuf=self.prefer_protobuf or self.status_protobuf,
                           status_protobuf=self.status_protobuf)


class _Clause(NamedTuple):
    media_type: str
    params: dict
    q: float


def _parse_accept(header: str) -> list[_Clause]:
    clauses = []
    for raw in header.split(","):
        pieces = [p.strip() for p in raw.split(";")]
        if not pieces[0]:
            continue
        params = {}
        for p in pieces[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                params[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        clauses.append(_Clause(pieces[0].lower(), params, q))
    # stable sort: preference order is the client's order among equal q
    return sorted(clauses, key=lambda c: -c.q)


def negotiate(accept: Optional[str], allowed_as: Iterable[tuple[str, str, str]] = (),
              protobuf_objects: bool = True) -> MediaTarget:
    """Pick the first acceptable clause (see :func:`_negotiate`).

    Remembered for the last few hundred Accept headers: clients send the same
    one with every request, and parsing it was a few percent of a GET.
    """
    if not accept:
        return MediaTarget(codec.JSON)
    return _negotiate(accept, tuple(allowed_as), protobuf_objects)


@functools.lru_cache(maxsize=512)
def _negotiate(accept: str, allowed_as: tuple[tuple[str, str, str], ...], protobuf_objects: bool) -> MediaTarget:
    """Pick the first acceptable clause.

    ``allowed_as`` lists the (kind, group, version) shapes this endpoint can
    produce besides the plain object.  A clause asking for another shape is
    skipped, like upstream; if nothing fits the answer is 406.
    ``protobuf_objects`` is False for custom resources: a protobuf clause for
    the plain object is skipped (upstream's CR handler does not offer it),
    though Status answers and PartialObjectMetadata still come as protobuf.
    ``stream=watch`` is accepted on any clause (the watch handler frames the
    chosen encoding).
    """
    allowed = set(allowed_as)
    prefer_protobuf = False
    status_protobuf = False
    for clause in _parse_accept(accept):
        if clause.params.get("stream", "watch") != "watch":
            continue
        as_kind = clause.params.get("as", "")
        shape = (as_kind, clause.params.get("g", ""), clause.params.get("v", ""))
        if clause.media_type == PROTOBUF:
            if not as_kind:
                status_protobuf = True
                # answered with the next acceptable clause's type where protobuf cannot be
                prefer_protobuf = prefer_protobuf or protobuf_objects
            elif shape in allowed and as_kind in PROTOBUF_SHAPE_KINDS and not prefer_protobuf:
                return MediaTarget(codec.JSON, *shape, prefer_protobuf=True, status_protobuf=True)
            continue
        media = _SERVED.get(clause.media_type)
        if media is None:
            continue
        if not as_kind:
            return MediaTarget(media, prefer_protobuf=prefer_protobuf, status_protobuf=status_protobuf)
        if prefer_protobuf:
            continue  # protobuf of the plain object comes first; other shapes only after it
        if shape in allowed:
            return MediaTarget(media, *shape, status_protobuf=status_protobuf)
    if prefer_protobuf:
        return MediaTarget(codec.JSON, prefer_protobuf=True, status_protobuf=True)
    raise errors.not_acceptable()


STREAM_MEDIA_TYPES = ("application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")


def route_produces(verb: str) -> tuple[str, ...]:
    """The media types upstream's route of a built-in kind declares (installer.go): a list's route adds the
    watch streams."""
    if verb in ("list", "watch"):
        return errors.BUILTIN_MEDIA_TYPES + STREAM_MEDIA_TYPES
    return errors.BUILTIN_MEDIA_TYPES


def check_route_accepts(accept: Optional[str], produces: tuple[str, ...]) -> None:
    """406 as go-restful's router answers before any handler runs, for the routes of built-in kinds.

    It compares each Accept type, parameters cut off, with the route's types literally: only ``*/*`` is a
    wildcard (``application/*`` is not), no case folding.  What passes is negotiated by :func:`negotiate`.
    """
    if not accept:
        return
    for part in accept.split(","):
        mime = part.split(";", 1)[0].strip(" ")
        if mime == "*/*" or mime in produces:
            return
    # (the router's error becomes a generic server response: empty details, unlike the handler's 406)
    raise errors.StatusError(406, "NotAcceptable",
                             f"406: Not Acceptable\n\nAvailable representations: {', '.join(produces)}", {})


TABLE_SHAPES = (("Table", "meta.k8s.io", "v1"), ("Table", "meta.k8s.io", "v1beta1"))
PARTIAL_SHAPES = (("PartialObjectMetadata", "meta.k8s.io", "v1"),
                  ("PartialObjectMetadata", "meta.k8s.io", "v1beta1"),
                  ("PartialObjectMetadataList", "meta.k8s.io", "v1"),
                  ("PartialObjectMetadataList", "meta.k8s.io", "v1beta1"))
OBJECT_SHAPES = TABLE_SHAPES + PARTIAL_SHAPES
# shapes upstream also serves as protobuf (Table has no protobuf form)
PROTOBUF_SHAPE_KINDS = ("PartialObjectMetadata", "PartialObjectMetadataList")


def body_media_type(content_type: Optional[str]) -> str:
    """The media type of a request body, without parameters (``charset``)."""
    if not content_type:
        return codec.JSON
    return content_type.split(";", 1)[0].strip().lower()
