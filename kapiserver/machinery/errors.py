"""API errors as ``metav1.Status``: one exception type, constructors per reason.

Every error a client can see is a :class:`StatusError`.  Handlers raise it;
the endpoint layer turns it into the JSON ``Status`` body and HTTP code, the
same shape kube-apiserver sends (``k8s.io/apimachinery/pkg/api/errors``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence, overload

from kapiserver.machinery import gorepr


@dataclass(frozen=True, slots=True)
class Cause:
    """One ``StatusCause``: what is wrong with which field."""

    type: str  # e.g. FieldValueInvalid, FieldValueRequired, FieldValueNotSupported
    message: str
    field: str = ""

    def to_dict(self) -> dict:
        """The StatusCause as Go writes it: reason, message, field, the empty ones left out."""
        out = {}
        if self.type:
            out["reason"] = self.type
        if self.message:
            out["message"] = self.message
        if self.field:
            out["field"] = self.field
        return out


class IndexedCause(Cause):
    """A cause at ``path[index]``, its field written when read: the causes of 400,000 list items
    without as many field strings (half their memory)."""

    __slots__ = ("path", "index")
    path: str
    index: int

    def __init__(self, type: str, message: str, path: str, index: int) -> None:
        for name, value in (("type", type), ("message", message), ("path", path), ("index", index)):
            object.__setattr__(self, name, value)

    @property
    def field(self) -> str:
        return f"{self.path}[{self.index}]"

    def __eq__(self, other: object) -> bool:  # (equal to the Cause it stands for)
        if not isinstance(other, Cause):
            return NotImplemented
        return (self.type, self.message, self.field) == (other.type, other.message, other.field)

    def __hash__(self) -> int:
        return hash((self.type, self.message, self.field))


class CauseDicts(Sequence[dict]):
    """``details.causes`` of a Status: the causes' StatusCause dicts (:meth:`Cause.to_dict`, already
    in order and with upstream's omissions), made when read.  A Status of hundreds of thousands of
    causes keeps its Cause objects only: an answer streams them (``endpoints/status_stream.py``)."""

    def __init__(self, causes: Sequence[Cause]) -> None:
        self.causes = causes

    def __len__(self) -> int:
        return len(self.causes)

    @overload
    def __getitem__(self, index: int) -> dict: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict]: ...

    def __getitem__(self, index: int | slice) -> dict | list[dict]:
        if isinstance(index, slice):
            return [c.to_dict() for c in self.causes[index]]
        return self.causes[index].to_dict()

    def __iter__(self) -> Iterator[dict]:
        return (c.to_dict() for c in self.causes)


# StatusCause types, as upstream's field.ErrorType.String() produces them.
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
TYPE_INVALID = "FieldValueTypeInvalid"
NOT_FOUND = "FieldValueNotFound"
UNKNOWN_FIELD = "FieldValueUnknown"  # not upstream's enum, used for strict decoding reports


@dataclass
class StatusError(Exception):
    """An API error that is sent to the client as a ``metav1.Status``."""

    code: int
    reason: str
    message: str
    details: Optional[dict] = None
    headers: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)  # ListMeta, e.g. a fresh ``continue`` token

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def to_status(self) -> dict:
        return status_object("Failure", self.message, self.reason, self.details, self.code, self.metadata)


# Field order of metav1.Status and its parts as Go's encoding/json writes them (the
# struct order); clients compare error bodies as strings, so the order is part of
# the contract.  Empty values are left out as their ``omitempty`` tags do.
_LIST_META_ORDER = ("selfLink", "resourceVersion", "continue", "remainingItemCount")
_DETAILS_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")
_CAUSE_ORDER = ("reason", "message", "field")


def _ordered(obj: dict, order: tuple[str, ...]) -> dict:
    return {k: obj[k] for k in order if obj.get(k) not in (None, "", 0, [], {})}


def status_object(status: str, message: str = "", reason: str = "", details: Optional[dict] = None,
                  code: int = 0, metadata: Optional[dict] = None) -> dict:
    """A ``metav1.Status`` dict with upstream's field order and omissions
    (kind, apiVersion, metadata, status, message, reason, details, code)."""
    out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1",
                           "metadata": _ordered(metadata or {}, _LIST_META_ORDER)}
    for key, value in (("status", status), ("message", message), ("reason", reason)):
        if value:
            out[key] = value
    if details is not None:  # a non-nil pointer: written even when empty ("details":{})
        ordered = _ordered(details, _DETAILS_ORDER)
        if isinstance(ordered.get("causes"), CauseDicts):
            ordered["causes"] = list(ordered["causes"])  # (a plain list for the encoders)
        elif "causes" in ordered:
            ordered["causes"] = [_ordered(c, _CAUSE_ORDER) if isinstance(c, dict) else c
                                 for c in ordered["causes"]]
        out["details"] = ordered
    if code:
        out["code"] = code
    return out


def _details(name: str = "", group: str = "", kind: str = "", causes=None, **extra) -> dict:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    if causes:
        details["causes"] = CauseDicts(list(causes))
    details.update(extra)
    return details


def qualified_resource(resource: str, group: str) -> str:
    """``configmaps`` or ``leases.coordination.k8s.io``, as upstream prints them."""
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{qualified_resource(resource, group)} "{name}" not found',
                       _details(name=name, group=group, kind=resource))


def resource_not_found() -> StatusError:
    """A path that names no served resource (upstream's generic server response: empty details)."""
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(resource: str, group: str, name: str) -> StatusError:
    return StatusError(409, "AlreadyExists", f'{qualified_resource(resource, group)} "{name}" already exists',
                       _details(name=name, group=group, kind=resource))


def namespace_mismatch() -> StatusError:
    """An object naming another namespace than its request's (upstream's
    EnsureObjectNamespaceMatchesRequestNamespace, which creates, updates and patches all answer)."""
    return bad_request("the namespace of the provided object does not match the namespace sent on the request")


CONFLICT_MESSAGE = "the object has been modified; please apply your changes to the latest version and try again"


def storage_invalid_object(key: str, why: str) -> str:
    """Upstream's storage error for a failed write precondition (``NewInvalidObjError``), as its
    message reads inside the 409 the registry makes of it."""
    return f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {why}"


def conflict(resource: str, group: str, name: str, why: str = CONFLICT_MESSAGE) -> StatusError:
    return StatusError(409, "Conflict",
                       f'Operation cannot be fulfilled on {qualified_resource(resource, group)} "{name}": {why}',
                       _details(name=name, group=group, kind=resource))


class InvalidError(StatusError):
    """422 Invalid, message in upstream's ``Kind.group "name" is invalid: [a, b]`` form.

    As upstream's ``ErrorList.ToAggregate``, the message lists each distinct error once;
    ``details.causes`` keeps them all.  Both are rendered from ``causes`` when read: an object with
    400,000 invalid finalizers has as many causes, and its Status is ~100 MB of JSON, which an
    answer writes in slices (``endpoints/status_stream.py``) without ever holding it whole.
    """

    def __init__(self, kind: str, group: str, name: str, causes: Sequence[Cause]) -> None:
        qualified_kind = f"{kind}.{group}" if group else kind  # upstream's GroupKind.String()
        self.subject = f'{qualified_kind} "{name}" is invalid'
        self.causes = causes
        self._message: Optional[str] = None
        details = _details(name=name, group=group, kind=kind)
        if causes:
            details["causes"] = CauseDicts(causes)
        super().__init__(422, "Invalid", "", details)

    @property
    def message(self) -> str:
        if self._message is not None:
            return self._message
        rendered = list(dict.fromkeys(rendered_cause(c) for c in self.causes))
        if not rendered:
            return self.subject
        return f"{self.subject}: {rendered[0] if len(rendered) == 1 else '[' + ', '.join(rendered) + ']'}"

    @message.setter
    def message(self, value: str) -> None:
        # (StatusError's __init__ sets it empty: the message is then the rendered one)
        self._message = value or None

    @property
    def message_set(self) -> bool:
        """Whether the message was set to another than the one rendered from the causes."""
        return self._message is not None


def invalid(kind: str, group: str, name: str, causes: Sequence[Cause]) -> StatusError:
    return InvalidError(kind, group, name, causes)


def rendered_cause(cause: Cause) -> str:
    """The cause as the aggregate's message shows it (field.Error.Error())."""
    return f"{cause.field}: {cause.message}" if cause.field else cause.message


def bad_request(message: str, causes: Optional[list[Cause]] = None) -> StatusError:
    return StatusError(400, "BadRequest", message, _details(causes=causes) or None)


def unauthorized(message: str = "Unauthorized") -> StatusError:
    return StatusError(401, "Unauthorized", message)


def forbidden(resource: str, group: str, name: str, why: str) -> StatusError:
    """403 in upstream's NewForbidden form (``forbidden: ...`` when no resource is involved)."""
    if not resource and not group:
        return StatusError(403, "Forbidden", f"forbidden: {why}", _details(name=name))
    target = f'{qualified_resource(resource, group)} "{name}"' if name else qualified_resource(resource, group)
    return StatusError(403, "Forbidden", f"{target} is forbidden: {why}",
                       _details(name=name, group=group, kind=resource))


def method_not_supported(resource: str, group: str, verb: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed",
                       f'{verb} is not supported on resources of kind "{qualified_resource(resource, group)}"',
                       _details(group=group, kind=resource))


def method_not_allowed() -> StatusError:
    """A method the resource's path does not serve (upstream's router answer: empty details)."""
    return StatusError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                       {})


BUILTIN_MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")


def not_acceptable(message: str = "", accepted: tuple[str, ...] = BUILTIN_MEDIA_TYPES) -> StatusError:
    return StatusError(406, "NotAcceptable",
                       message or f"only the following media types are accepted: {', '.join(accepted)}")


def gone(message: str) -> StatusError:
    return StatusError(410, "Gone", message)


def expired(message: str, continue_token: str = "") -> StatusError:
    """410 Expired: a resourceVersion or continue token older than compaction."""
    return StatusError(410, "Expired", message, metadata={"continue": continue_token} if continue_token else {})


def too_large(message: str = "the request body is too large") -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(accepted: tuple[str, ...] = BUILTIN_MEDIA_TYPES) -> StatusError:
    """A create or update body in a media type no serializer reads (upstream's NegotiateInputSerializer:
    it lists the serializers, custom resources' too; patch types have their own answer)."""
    return StatusError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                       f"accepted media types include: {', '.join(accepted)}")


def too_many_requests(message: str = "Too many requests, please try again later.",
                      retry_after: int = 1) -> StatusError:
    return StatusError(429, "TooManyRequests", message, _details(retryAfterSeconds=retry_after),
                       headers={"Retry-After": str(retry_after)})


def internal_error(message: str = "an error on the server has prevented the request from succeeding") -> StatusError:
    # upstream's NewInternalError: the cause carries the message alone
    return StatusError(500, "InternalError", f"Internal error occurred: {message}",
                       _details(causes=[Cause("", message)]))


_GENERIC_RESPONSES = {
    400: ("BadRequest", "the server rejected our request for an unknown reason"),
    401: ("Unauthorized", "the server has asked for the client to provide credentials"),
    404: ("NotFound", "the server could not find the requested resource"),
    405: ("MethodNotAllowed", "the server does not allow this method on the requested resource"),
    409: ("Conflict", "the server reported a conflict"),
    422: ("Invalid", "the server rejected our request due to an error in our request"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted, but may still be "
                     "processing the request"),
}


def generic_server_response(code: int, verb: str, resource: str, group: str, name: str,
                            server_message: str) -> StatusError:
    """Upstream's NewGenericServerResponse: what a backend's (a kubelet's) failed answer becomes."""
    reason, message = _GENERIC_RESPONSES.get(
        code, ("Unknown", f"the server responded with the status code {code} but did not return more information"))
    if code == 409 and verb == "POST":
        reason = "AlreadyExists"
    elif code in (403, 415):
        reason = "Forbidden" if code == 403 else "UnsupportedMediaType"
        message = server_message
    elif code == 406:
        reason = "NotAcceptable"
        message = server_message if server_message not in ("", "unknown") else \
            "the server was unable to respond with a content type that the client supports"
    elif code >= 500 and code not in (503, 504):
        reason = "InternalError"
        message = f"an error on the server ({gorepr.quote(server_message)}) has prevented the request from succeeding"
    if resource:
        qualified = qualified_resource(resource, group)
        message = f"{message} ({verb.lower()} {qualified} {name})" if name else f"{message} ({verb.lower()} {qualified})"
    return StatusError(code, reason, message, _details(name=name, group=group, kind=resource))


def unexpected_error(message: str) -> StatusError:
    """What upstream answers for an error that is no API status (ErrorToAPIStatus's default):
    500 with the error's text and no reason (a failed dial to a kubelet, a node without address)."""
    return StatusError(500, "", message)


def service_unavailable(message: str) -> StatusError:
    return StatusError(503, "ServiceUnavailable", message)


def timeout(message: str = "the request did not complete within the allowed duration") -> StatusError:
    return StatusError(504, "Timeout", message)


# ---------------------------------------------------------------- field errors
#
# Cause messages carry upstream's field.Error "ErrorBody": the type in words
# and, where it applies, the offending value (``Invalid value: "X": detail``).
# ``invalid()`` prefixes the field path, which gives upstream's full message
# (``metadata.name: Invalid value: "X": a lowercase RFC 1123 ...``).


class _OmitValue:
    """Upstream's ``field.OmitValueType{}``: the error prints no value."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = _OmitValue()


def render_value(value: Any) -> str:
    """A value the way upstream's field errors print it (Go's %q / %v / %#v).

    Pointers are dereferenced first, as field.Error does (so a struct has no
    leading ``&``, and nil is ``"null"``).  Strings are quoted as Go quotes them;
    a :class:`~kapiserver.machinery.gorepr.GoRepr` (a struct, slice or map
    already in Go syntax) is printed as is; other composite values fall back
    to compact JSON.
    """
    if isinstance(value, gorepr.GoRepr):
        return str(value)
    if value is None:  # a nil value or pointer becomes the string "null", printed with %q
        return '"null"'
    if isinstance(value, (bool, int, float, str)):
        return gorepr.scalar(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _body(kind: str, detail: str) -> str:
    return f"{kind}: {detail}" if detail else kind


def field_invalid(path: str, value: Any, detail: str = "") -> Cause:
    if value is OMIT:
        return Cause(INVALID, _body("Invalid value", detail), path)
    return Cause(INVALID, _body(f"Invalid value: {render_value(value)}", detail), path)


def field_required(path: str, detail: str = "") -> Cause:
    return Cause(REQUIRED, _body("Required value", detail), path)


def field_forbidden(path: str, detail: str = "") -> Cause:
    return Cause(FORBIDDEN, _body("Forbidden", detail), path)


def field_duplicate(path: str, value: Any, detail: str = "") -> Cause:
    return Cause(DUPLICATE, _body(f"Duplicate value: {render_value(value)}", detail), path)


def field_not_found(path: str, value: Any, detail: str = "") -> Cause:
    return Cause(NOT_FOUND, _body(f"Not found: {render_value(value)}", detail), path)


def field_not_supported(path: str, value: Any, supported: list) -> Cause:
    detail = "supported values: " + ", ".join(render_value(v) for v in supported) if supported else ""
    return Cause(NOT_SUPPORTED, _body(f"Unsupported value: {render_value(value)}", detail), path)


def field_too_long(path: str, max_length: int) -> Cause:
    return Cause(TOO_LONG, f"Too long: may not be more than {max_length} bytes", path)


def field_too_many(path: str, actual: int, max_items: int) -> Cause:
    return Cause(TOO_MANY, f"Too many: {actual}: must have at most {max_items} items", path)


def field_type_invalid(path: str, value: Any, detail: str) -> Cause:
    return Cause(TYPE_INVALID, _body(f"Invalid value: {render_value(value)}", detail), path)
