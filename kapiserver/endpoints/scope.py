"""Everything a REST handler needs about one request (upstream's RequestScope)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from twisted.web.server import Request

from kapiserver.endpoints.negotiation import MediaTarget, body_media_type
from kapiserver.endpoints.request_context import context_of
from kapiserver.endpoints.request_info import RequestInfo
from kapiserver.machinery import codec, errors
from kapiserver.machinery import fieldvalidation
from kapiserver.machinery import protobuf
from kapiserver.machinery.managedfields.fieldmanager import manager_from_user_agent, validate_field_manager
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Context, Store


@dataclass
class Response:
    """What a handler answers: a code and an object (encoded by the endpoint)."""

    code: int
    obj: Any
    # True when ``obj`` is one object or list of the resource type (eligible for
    # Table / PartialObjectMetadata conversion); False for Status and the like.
    convertible: bool = True
    # bytes sent as they are (connect subresources: logs), with their content type
    raw: Optional[bytes] = None
    content_type: str = ""


@dataclass
class RequestScope:
    request: Request
    info: RequestInfo
    rtype: ResourceType
    store: Store
    target: MediaTarget
    user: Any = None
    warnings: list[str] = field(default_factory=list)
    reactor: Any = None
    bookmark_interval: float = 60.0
    schema_resolver: Any = None  # callable(ref) -> schema dict, for strict field validation / SMP
    # field numbers a protobuf body carried that no table knows (``metadata.#42``)
    unknown_protobuf_fields: list[str] = field(default_factory=list)
    # the Store of any served resource, ``stores(group, version, plural)`` (subresources
    # that touch other kinds: an eviction reads PodDisruptionBudgets)
    stores: Optional[Callable[[str, str, str], Store]] = None

    @property
    def args(self) -> dict:
        return self.request.args or {}

    def arg(self, name: str) -> Optional[str]:
        values = self.args.get(name.encode())
        return values[0].decode("utf-8", "replace") if values else None

    @property
    def dry_run(self) -> bool:
        return bool(self.arg("dryRun"))

    def context(self, field_manager: str = "", managed_fields_set: bool = False) -> Context:
        return Context(user=self.user, dry_run=self.dry_run, warnings=self.warnings, field_manager=field_manager,
                       managed_fields_set=managed_fields_set, options=self.admission_options(),
                       audit_annotations=self.audit_annotations())

    def audit_annotations(self) -> dict:
        """Where admission's audit annotations go: the audit event's, when the request has one,
        else the request context's."""
        rc = context_of(self.request)
        event_annotations = getattr(rc.audit, "annotations", None)
        return event_annotations if isinstance(event_annotations, dict) else rc.audit_annotations

    def admission_options(self) -> dict:
        """The request's write options as admission shows them (without kind and apiVersion)."""
        out: dict[str, Any] = {}
        dry_run = [v.decode("utf-8", "replace") for v in self.args.get(b"dryRun") or []]
        if dry_run:
            out["dryRun"] = dry_run
        for name in ("fieldManager", "fieldValidation"):
            value = self.arg(name)
            if value:
                out[name] = value
        return out

    def field_manager(self, options_kind: str, required: bool = False) -> str:
        """The manager this write is recorded under: ``?fieldManager=`` (validated as upstream,
        422 on the request's ``options_kind``: CreateOptions, UpdateOptions, PatchOptions), or
        else derived from the User-Agent."""
        name = self.arg("fieldManager") or ""
        causes = validate_field_manager(name)
        if required and not name:
            causes.insert(0, errors.field_required("fieldManager", "is required for apply patch"))
        if causes:
            raise errors.invalid(options_kind, "meta.k8s.io", "", causes)
        if name:
            return name
        agent = self.request.getHeader(b"user-agent")
        return manager_from_user_agent(agent.decode("utf-8", "replace") if agent else "")

    def body_bytes(self) -> bytes:
        content = self.request.content
        if content is None:
            return b""
        content.seek(0)
        return content.read()

    def content_type(self) -> str:
        raw = self.request.getHeader(b"content-type")
        return body_media_type(raw.decode("latin-1") if raw else None)

    def decode_body(self, allow_empty: bool = False) -> Any:
        """Decode a JSON, YAML or (built-in kinds with a field table) protobuf body."""
        body = self.body_bytes()
        if not body.strip():
            if allow_empty:
                return None
            raise errors.bad_request("the body of the request was empty")
        media = self.content_type()
        if media == codec.JSON:
            obj = codec.decode_json(body)
        elif media in (codec.YAML, "application/x-yaml", "text/yaml"):
            obj = codec.decode_yaml(body)
        elif media == protobuf.MEDIA_TYPE:
            if self.rtype.is_crd:
                # custom resources are JSON/YAML only (upstream v1.32 drops the connection here)
                raise errors.StatusError(
                    415, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types include: "
                    "application/json, application/yaml")
            decoded = protobuf.decode_request_body(body, self.rtype.kind)
            self.unknown_protobuf_fields = decoded.unknown_fields
            obj = decoded.obj
        else:
            raise errors.unsupported_media_type(media)
        return obj

    def field_validation(self) -> str:
        mode = self.arg("fieldValidation") or "Warn"
        if mode not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", got {mode!r}')
        return mode

    def check_fields(self, obj: Any) -> None:
        """Report unknown and duplicate fields per ``fieldValidation`` (Strict → 400, Warn → warnings)."""
        mode = self.field_validation()
        if mode == "Ignore" or not isinstance(obj, dict):
            return
        schema = self.rtype.schema
        if schema is None and self.rtype.schema_name and self.schema_resolver is not None:
            schema = {"$ref": f"#/definitions/{self.rtype.schema_name}"}
        if schema is None:
            return
        raw = self.body_bytes() if self.content_type() == codec.JSON else None
        self.warnings.extend(fieldvalidation.check_fields(obj, raw, schema, self.schema_resolver, mode,
                                                          extra_unknown=self.unknown_protobuf_fields))
