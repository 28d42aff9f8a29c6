"""One request's audit event, filled in as the request goes and emitted at each stage.

Upstream's ``AuditContext``: the audit filter creates it (with the policy's
decision) and emits ``RequestReceived``; the handlers add what they decoded
(:meth:`AuditEvent.log_request_object`, :meth:`log_request_patch`) and what
they answered (:meth:`log_response_object`, called for every object written,
Status errors included); long-running requests emit ``ResponseStarted`` when
their first bytes go out; ``ResponseComplete`` is emitted when the response
ends, ``Panic`` if the handler raised.  Each emitted event is a fresh dict
(``audit.k8s.io/v1`` ``Event``, upstream's field order), so backends may keep it.

Request and response bodies are encoded to JSON once, when logged, and carried
as ``orjson.Fragment``; they are only kept at the levels that record them.
Credentials never enter the record: a TokenRequest's issued token and a
TokenReview's reviewed token are blanked in the recorded copies (upstream
records them at RequestResponse level; only the policy keeps them out there).
"""
from __future__ import annotations

import copy
import datetime
import ipaddress
import time
from typing import Any, Callable, Optional, Protocol

import orjson
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.logger import Logger

from kapiserver.audit.policy import (LEVEL_METADATA, LEVEL_REQUEST, LEVEL_REQUEST_RESPONSE, STAGE_REQUEST_RECEIVED,
                                     RequestAuditConfig, at_least)
from kapiserver.machinery.user import UserInfo

log = Logger()

API_VERSION = "audit.k8s.io/v1"
MAX_USER_AGENT = 1024
# ObjectReference's fields in upstream's order
OBJECT_REF_FIELDS = ("resource", "namespace", "name", "uid", "apiGroup", "apiVersion", "resourceVersion",
                     "subresource")
# Fields blanked in recorded copies: credentials a request or answer carries.
# (group, kind) -> (where, path inside the object)
REDACTED_FIELDS: dict[tuple[str, str], tuple[tuple[str, tuple[str, ...]], ...]] = {
    ("authentication.k8s.io", "TokenRequest"): (("response", ("status", "token")),),
    ("authentication.k8s.io", "TokenReview"): (("request", ("spec", "token")), ("response", ("spec", "token"))),
}


class Sink(Protocol):
    def process_events(self, events: list[dict]) -> bool:
        """Take the events (the caller will not touch them again); False if they were not accepted."""


def micro_time(seconds: float) -> str:
    """metav1.MicroTime: RFC 3339 in UTC with microseconds."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def user_dict(user: UserInfo) -> dict:
    """authentication/v1 UserInfo as JSON (empty fields left out, as Go's omitempty)."""
    out: dict = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def source_ips(request: Any) -> list[str]:
    """Upstream's ``utilnet.SourceIPs``: X-Forwarded-For, then X-Real-Ip, then the peer, without repeats."""
    found: list[str] = []

    def add(text: str) -> None:
        try:
            ip = str(ipaddress.ip_address(text.strip()))
        except ValueError:
            return
        if ip not in found:
            found.append(ip)
    forwarded = request.getHeader(b"x-forwarded-for")
    if forwarded:
        for part in forwarded.decode("latin-1").split(","):
            add(part)
    real = request.getHeader(b"x-real-ip")
    if real:
        add(real.decode("latin-1"))
    try:
        peer = request.getClientAddress()
        host = peer.host if isinstance(peer, (IPv4Address, IPv6Address)) else None
    except Exception:
        host = None
    if isinstance(host, str) and host not in found:
        found.append(host)  # from the socket: an address already (parsing costs more than the rest)
    return found


def _without_managed_fields(obj: Any) -> Any:
    """A copy without ``metadata.managedFields`` (for lists: of every item; tables: of every row's object)."""
    if not isinstance(obj, dict):
        return obj
    def strip(item: Any) -> Any:
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict) and "managedFields" in item["metadata"]:
            item = dict(item, metadata={k: v for k, v in item["metadata"].items() if k != "managedFields"})
        return item
    out = strip(obj)
    if isinstance(out.get("items"), list):
        out = dict(out, items=[strip(i) for i in out["items"]])
    if out.get("kind") == "Table" and isinstance(out.get("rows"), list):
        out = dict(out, rows=[dict(r, object=strip(r.get("object"))) if isinstance(r, dict) and "object" in r
                              else r for r in out["rows"]])
    return out


def _redacted(obj: Any, where: str) -> Any:
    if not isinstance(obj, dict):
        return obj
    api_version = obj.get("apiVersion") or ""
    group = api_version.rsplit("/", 1)[0] if "/" in api_version else ""
    fields = REDACTED_FIELDS.get((group, obj.get("kind") or ""))
    if not fields:
        return obj
    obj = copy.deepcopy(obj)
    for side, path in fields:
        if side != where:
            continue
        holder = obj
        for part in path[:-1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and path[-1] in holder:
            holder[path[-1]] = ""
    return obj


def _encode(obj: Any) -> orjson.Fragment:
    return orjson.Fragment(orjson.dumps(obj, default=str))


class AuditEvent:
    """The audit event of one request (create one per request whose level is not None)."""

    def __init__(self, audit_id: str, config: RequestAuditConfig, sink: Sink, user: Optional[UserInfo],
                 acting_as: Callable[[], Optional[UserInfo]], clock: Callable[[], float] = time.time) -> None:
        self.audit_id = audit_id
        self.config = config
        self.level = config.level
        self.sink = sink
        self.clock = clock
        self.user = user
        # the user the request acts as (changes once impersonation has run)
        self.acting_as = acting_as
        self.received = clock()
        self.request_uri = ""
        self.verb = ""
        self.source_ips: list[str] = []
        self.user_agent = ""
        self.object_ref: Optional[dict] = None
        self.response_status: Optional[dict] = None
        self.request_object: Optional[orjson.Fragment] = None
        self.response_object: Optional[orjson.Fragment] = None
        self.annotations: dict[str, str] = {}
        self.response_started = False
        self.long_running = False
        self.panicked = False

    # ------------------------------------------------------------ what the request says

    def log_request_metadata(self, request: Any, verb: str, info: Any, received: Optional[float] = None) -> None:
        """Request-level facts (upstream's LogRequestMetadata); ``info`` is the RequestInfo."""
        if received is not None:
            self.received = received
        self.verb = verb
        uri = request.uri
        self.request_uri = uri.decode("utf-8", "replace") if isinstance(uri, bytes) else str(uri)
        agent = request.getHeader(b"user-agent")
        if agent:
            text = agent.decode("utf-8", "replace")
            self.user_agent = text[:MAX_USER_AGENT] + "...TRUNCATED" if len(text) > MAX_USER_AGENT else text
        self.source_ips = source_ips(request)
        if info.is_resource_request:
            ref = {"resource": info.resource, "namespace": info.namespace, "name": info.name,
                   "apiGroup": info.group, "apiVersion": info.version, "subresource": info.subresource}
            self.object_ref = {k: v for k, v in ref.items() if v}

    def log_request_object(self, obj: Any, group: str, version: str, resource: str, subresource: str) -> None:
        """What the handler decoded from the body (upstream's LogRequestObject)."""
        ref = self.object_ref if self.object_ref is not None else {}
        md = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(md, dict):
            for key, field_name in (("namespace", "namespace"), ("name", "name"), ("uid", "uid"),
                                    ("resourceVersion", "resourceVersion")):
                value = md.get(field_name)
                if value and not ref.get(key) and isinstance(value, str):
                    ref[key] = value
        if not ref.get("apiVersion"):
            if group:
                ref["apiGroup"] = group
            ref["apiVersion"] = version
        ref.setdefault("resource", resource)
        if subresource:
            ref.setdefault("subresource", subresource)
        self.object_ref = {k: v for k, v in ref.items() if v}
        if at_least(self.level, LEVEL_REQUEST):
            if self.config.omit_managed_fields:
                obj = _without_managed_fields(obj)
            self.request_object = _encode(_redacted(obj, "request"))

    def log_request_patch(self, patch: bytes) -> None:
        """A patch body as the request object (upstream's LogRequestPatch)."""
        if not at_least(self.level, LEVEL_REQUEST):
            return
        try:
            orjson.loads(patch)
        except orjson.JSONDecodeError:
            return  # not JSON (an apply patch in YAML): nothing that fits the event's JSON
        self.request_object = orjson.Fragment(patch)

    def logs_response_object(self) -> bool:
        """Whether this event keeps the response body (RequestResponse level)."""
        return at_least(self.level, LEVEL_REQUEST_RESPONSE)

    def log_response_object(self, obj: Any) -> None:
        """What the handler answered (upstream's LogResponseObject): a Status becomes the response
        status; the object itself is kept at RequestResponse level."""
        if isinstance(obj, dict) and obj.get("kind") == "Status" and obj.get("apiVersion") in ("v1", None):
            status: dict = {"metadata": {}}
            for key in ("status", "message", "reason", "details", "code"):
                if obj.get(key):
                    status[key] = obj[key]
            self.response_status = status
        if not self.logs_response_object():
            return
        if self.config.omit_managed_fields:
            obj = _without_managed_fields(obj)
        self.response_object = _encode(_redacted(obj, "response"))

    def add_annotation(self, key: str, value: str) -> None:
        """Upstream's AddAuditAnnotation: the first value set for a key stays."""
        if key in self.annotations and self.annotations[key] != value:
            log.warn("Failed to set annotations[{key}] to {value} for audit:{id}, it has already been set to "
                     "{old}", key=key, value=value, id=self.audit_id, old=self.annotations[key])
            return
        self.annotations[key] = value

    def set_response_code(self, code: int) -> None:
        if self.response_status is None:
            self.response_status = {"metadata": {}}
        self.response_status["code"] = code

    # ------------------------------------------------------------ stages

    def to_event(self, stage: str, stage_time: float) -> dict:
        """The ``audit.k8s.io/v1`` Event at ``stage`` (a new dict)."""
        event: dict[str, Any] = {"kind": "Event", "apiVersion": API_VERSION, "level": self.level,
                                 "auditID": self.audit_id, "stage": stage, "requestURI": self.request_uri,
                                 "verb": self.verb,
                                 "user": user_dict(self.user) if self.user is not None else {}}
        acting = self.acting_as()
        if acting is not None and acting is not self.user and at_least(self.level, LEVEL_METADATA):
            event["impersonatedUser"] = user_dict(acting)
        if self.source_ips:
            event["sourceIPs"] = list(self.source_ips)
        if self.user_agent:
            event["userAgent"] = self.user_agent
        if self.object_ref:
            ref = self.object_ref
            event["objectRef"] = {k: ref[k] for k in OBJECT_REF_FIELDS if ref.get(k)}
        if self.response_status is not None and stage != STAGE_REQUEST_RECEIVED:
            event["responseStatus"] = dict(self.response_status)  # (its parts are never changed in place)
        if self.request_object is not None:
            event["requestObject"] = self.request_object
        if self.response_object is not None and stage != STAGE_REQUEST_RECEIVED:
            event["responseObject"] = self.response_object
        event["requestReceivedTimestamp"] = micro_time(self.received)
        event["stageTimestamp"] = micro_time(stage_time)
        if self.annotations:
            event["annotations"] = dict(self.annotations)
        return event

    def process_stage(self, stage: str) -> bool:
        """Emit the event at ``stage`` unless the policy omits it; False if the sink refused it."""
        if stage in self.config.omit_stages:
            return True
        stage_time = self.received if stage == STAGE_REQUEST_RECEIVED else self.clock()
        return self.sink.process_events([self.to_event(stage, stage_time)])
