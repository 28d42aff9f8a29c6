"""Everything a REST handler needs about one request (upstream's RequestScope)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Coroutine, Optional, TypeVar

from twisted.internet.interfaces import IReactorTime
from twisted.web.server import Request

from kapiserver.endpoints import request_decoder
from kapiserver.endpoints.negotiation import MediaTarget, body_media_type
from kapiserver.endpoints.request_context import context_of
from kapiserver.endpoints.streaming.interfaces import ConnectStreams
from kapiserver.machinery import codec, collector_pause, errors
from kapiserver.machinery import fieldvalidation
from kapiserver.machinery.fields import EQUALS, FieldRequirement, FieldSelector
from kapiserver.machinery.managedfields.fieldmanager import manager_from_user_agent, validate_field_manager
from kapiserver.machinery.user import UserInfo
from kapiserver.registry.context import Context
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.rest import Creater, Getter, Lister, RESTStorage
from kapiserver.registry.store import Store, on_thread_if_large
from kapiserver.request.info import RequestInfo

_T = TypeVar("_T")


@dataclass(eq=False, repr=False)
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
    # a stream that answers the request itself (connect subresources served by a kubelet or a
    # backend: logs, exec, attach, port-forward, proxy); ``code`` and ``obj`` are unused then
    serve: Optional[Callable[[Request], Coroutine[Any, Any, None]]] = None


@dataclass(eq=False, repr=False)
class RequestScope:
    request: Request
    info: RequestInfo
    rtype: ResourceType
    store: RESTStorage
    target: MediaTarget
    reactor: IReactorTime
    user: Optional[UserInfo] = None
    warnings: list[str] = field(default_factory=list)
    bookmark_interval: float = 60.0
    schema_resolver: Any = None  # callable(ref) -> schema dict, for strict field validation / SMP
    # field numbers a protobuf body carried that no table knows (``metadata.#42``)
    unknown_protobuf_fields: list[str] = field(default_factory=list)
    # the Store of any served resource, ``stores(group, version, plural)`` (subresources
    # that touch other kinds: an eviction reads PodDisruptionBudgets)
    stores: Optional[Callable[[str, str, str], Store]] = None
    # connects connect subresources' locations (kubelets, pods, endpoints); None: none are
    streams: Optional[ConnectStreams] = None
    # the request handles a large body or stored object (handle_large): the cyclic collector is
    # held off until it ends (finished), and its answer is encoded off the reactor
    large: bool = False

    def handle_large(self) -> None:
        if not self.large:
            self.large = True
            collector_pause.PAUSE.hold(self.reactor)

    def finished(self, result: _T) -> _T:
        """(The request's last callback.)"""
        if self.large:
            collector_pause.PAUSE.release()
        return result

    # the REST storage as the verb's interface (registry/rest.py): a 405 for one without it.
    # The generic Store has every verb and serves nearly every request: it is told apart by its
    # class first, since isinstance against a runtime-checkable Protocol walks the protocol's
    # members on every call (10-17 µs on Python 3.11, 2-3 % of a create or a GET).

    def getter(self) -> Getter:
        store = self.store
        if isinstance(store, Store) or isinstance(store, Getter):
            return store
        raise self._unsupported()

    def lister(self) -> Lister:
        store = self.store
        if isinstance(store, Store) or isinstance(store, Lister):
            return store
        raise self._unsupported()

    def creater(self) -> Creater:
        store = self.store
        if isinstance(store, Store) or isinstance(store, Creater):
            return store
        raise self._unsupported()

    def generic_store(self) -> Store:
        """The generic Store, which every verb but get, list and create needs."""
        if isinstance(self.store, Store):
            return self.store
        raise self._unsupported()

    def _unsupported(self) -> errors.StatusError:
        return errors.method_not_supported(self.rtype.plural, self.rtype.group, self.info.verb)

    @property
    def args(self) -> dict:
        return self.request.args or {}

    def arg(self, name: str) -> Optional[str]:
        values = self.args.get(name.encode())
        return values[0].decode("utf-8", "replace") if values else None

    def arg_values(self, name: str) -> list[str]:
        return [v.decode("utf-8", "replace") for v in self.args.get(name.encode()) or ()]

    def list_options(self, watch: Optional[bool] = None) -> ListOptions:
        """The list or watch options of the query (``watch`` forces the flag), as upstream's
        ListResource completes them: the field selector's labels are checked against the kind
        (400), and a request with a name (a ``/watch/.../<name>`` path, or a selector naming
        one object, see request_info) selects that object: a selector that does not pin the
        same name is a 400."""
        opts = ListOptions.from_args(self.args, watch=watch)
        selector = self.lister().field_selector(opts)
        name = self.info.name
        if name:
            if selector.empty:
                opts.field_selector = FieldSelector([FieldRequirement("metadata.name", EQUALS, name)])
            elif selector.requires_exact_match("metadata.name") != name:
                raise errors.bad_request("fieldSelector metadata.name doesn't match requested name")
        return opts

    @property
    def dry_run(self) -> bool:
        return bool(self.arg_values("dryRun"))

    def check_write_options(self, options_kind: str, body_dry_run: Any = None, query: bool = True) -> None:
        """Upstream's Validate{Create,Update,Patch,Delete}Options: dryRun only ``All``, a known fieldValidation
        (the query's, unless ``query`` is False, and the body's ``body_dry_run``).

        A request that asks for something else must not be carried out as
        another request would be (a typo in dryRun must not write): 422 Invalid.
        """
        causes: list[errors.Cause] = []
        dry_run = self.arg_values("dryRun") if query else []
        if isinstance(body_dry_run, list):
            dry_run = dry_run + [v for v in body_dry_run if isinstance(v, str)]
        if any(v != "All" for v in dry_run):
            shown = ", ".join(request_decoder.go_quote(v) for v in dry_run)
            causes.append(errors.Cause(errors.NOT_SUPPORTED, f'Unsupported value: []string{{{shown}}}: supported '
                                       f'values: "All"', "dryRun"))
        mode = self.arg("fieldValidation")
        if options_kind != "DeleteOptions" and mode not in (None, "", "Ignore", "Strict", "Warn"):
            causes.append(errors.Cause(errors.NOT_SUPPORTED, f'Unsupported value: {request_decoder.go_quote(mode)}: '
                                       f'supported values: "", "Ignore", "Strict", "Warn"', "fieldValidation"))
        if causes:
            raise errors.invalid(options_kind, "meta.k8s.io", "", causes)

    def context(self, field_manager: str = "", managed_fields_set: bool = False,
                dry_run: Optional[bool] = None) -> Context:
        """The Store's context of this request (``dry_run``: the options' when they are not the query's)."""
        return Context(user=self.user, dry_run=self.dry_run if dry_run is None else dry_run,
                       warnings=self.warnings, field_manager=field_manager,
                       managed_fields_set=managed_fields_set, options=self.admission_options(),
                       audit_annotations=self.audit_annotations(), body_size=self.body_size(),
                       on_large_object=self.handle_large)

    def audit_annotations(self) -> dict:
        """Where admission's audit annotations go: the audit event's, when the request has one,
        else the request context's."""
        rc = context_of(self.request)
        return rc.audit.annotations if rc.audit is not None else rc.audit_annotations

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

    def body_size(self) -> int:
        content = self.request.content
        if content is None:
            return 0
        return content.seek(0, os.SEEK_END)

    def body_bytes(self) -> bytes:
        content = self.request.content
        if content is None:
            return b""
        content.seek(0)
        return content.read()

    def content_type(self) -> str:
        raw = self.request.getHeader(b"content-type")
        return body_media_type(raw.decode("latin-1") if raw else None)

    def decode_object(self, definition: str = "", kind: str = "", api_version: str = "") -> dict:
        """The body of a create/update decoded into the kind's schema (request_decoder.py).

        ``definition``/``kind``/``api_version`` name another type than the
        resource's own (the Scale of the scale subresource).
        """
        obj = self._decode_body(self.body_bytes(), definition, kind, api_version)
        self._audit_request_object(obj)
        return obj

    async def decode_body(self, definition: str = "", kind: str = "", api_version: str = "") -> dict:
        """:meth:`decode_object` on a thread when the body is large (store.on_thread_if_large): the
        protobuf, YAML and schema walks of 400,000 finalizers or 100,000 env vars take a while."""
        obj = await on_thread_if_large(self.body_size(), self._decode_body, self.body_bytes(), definition, kind,
                                       api_version)
        self._audit_request_object(obj)
        return obj

    def _decode_body(self, body: bytes, definition: str, kind: str, api_version: str) -> dict:
        kind = kind or self.rtype.kind
        media = self.content_type()
        if media not in request_decoder.DECODED_TYPES:
            raise errors.unsupported_media_type()
        if not body.strip() and media not in request_decoder.YAML_TYPES:  # empty YAML is the document null
            raise request_decoder.unrecognized(
                kind, "couldn't get version/kind; json parse error: unexpected end of JSON input", b"")
        parsed = request_decoder.parse(body, media, kind, self.rtype)
        self.unknown_protobuf_fields = parsed.unknown
        return self._typed(parsed, body, definition, kind, api_version)

    def _audit_request_object(self, obj: dict) -> None:
        audit = context_of(self.request).audit
        if audit is not None:  # the request object as decoded (patches log their patch document)
            rtype = self.rtype
            audit.log_request_object(obj, rtype.group, rtype.version, rtype.plural, self.info.subresource)

    def decode_patched(self, obj: Any, known: Optional[dict] = None, changed: Optional[frozenset[str]] = None
                       ) -> dict:
        """A patch's result decoded like a body; what does not fit is upstream's 422 ``patch: Invalid value``.
        ``known``: the stored object the patch was applied to (what it left unchanged was decoded when
        it was written, and is not decoded again); ``changed``: the top-level fields the patch can have
        changed (None: any), the others are ``known``'s, copied."""
        try:
            # the JSON of the result shows only in a refusal: encoded for one
            return self._typed(request_decoder.ParsedBody(obj), b"", "", self.rtype.kind, "", known, changed)
        except errors.StatusError:
            pass
        try:
            raw = codec.encode_json(obj) if isinstance(obj, (dict, list)) else b""
        except Exception:
            raw = b""
        try:
            return self._typed(request_decoder.ParsedBody(obj), raw, "", self.rtype.kind, "", known, changed)
        except errors.StatusError as e:
            if e.code != 400 or "strict decoding error" in e.message:
                raise
            if isinstance(e, request_decoder.UnrecognizedBody):
                detail = e.detail
            else:
                detail = e.message.split(": ", 1)[1] if " cannot be handled as a " in e.message else e.message
            shown = raw.decode("utf-8", "replace").rstrip("\n")
            if len(shown) > 1024:
                shown = shown[:1024] + "..."
            value = request_decoder.go_quote(shown)  # the field error prints the patched JSON with Go's %q
            raise errors.StatusError(422, "Invalid", f' "" is invalid: patch: Invalid value: {value}: {detail}',
                                     {"causes": [{"reason": errors.INVALID,
                                                  "message": f"Invalid value: {value}: {detail}",
                                                  "field": "patch"}]}) from None

    def _typed(self, parsed: "request_decoder.ParsedBody", body: bytes, definition: str, kind: str,
               api_version: str, known: Optional[dict] = None, changed: Optional[frozenset[str]] = None) -> dict:
        rtype = self.rtype
        custom = rtype.is_crd and not definition
        if parsed.obj is None and not custom:  # JSON null, or an empty YAML document: Go decodes the zero object
            parsed.obj = {}
        definition = definition or rtype.schema_name
        body_kind, version = request_decoder.check_type_meta(
            parsed.obj, rtype, body, kind, api_version, None if custom else _registered)
        mode = self.field_validation()
        obj = parsed.obj
        unknown = list(parsed.unknown)
        members = -1
        if definition and not custom:
            obj, found, members = request_decoder.decode_typed(obj, definition, body_kind, version, kind, known,
                                                               changed)
            unknown.extend(p for p in found if p not in unknown)
        else:
            obj = request_decoder.decode_custom(obj, body_kind, version, kind)
            if mode != fieldvalidation.IGNORE and rtype.schema is not None:
                unknown.extend(p for p in fieldvalidation.unknown_fields(obj, rtype.schema, self.schema_resolver
                                                                         or (lambda ref: {}))
                               if p not in unknown)
        duplicates = parsed.duplicates
        if parsed.raw_json is not None and mode != fieldvalidation.IGNORE:
            duplicates = request_decoder.json_duplicates(
                parsed.raw_json, members if members >= 0 and not unknown else request_decoder.count_keys(parsed.obj))
        self.warnings.extend(request_decoder.apply_field_validation(
            mode, request_decoder.field_problems(unknown, duplicates), body_kind, version, kind))
        return obj

    def delete_options(self) -> DeleteOptions:
        """A DELETE's options as upstream's DeleteResource reads them: from its body when it has one,
        the query's then counting for nothing (dryRun included), else from the query; validated."""
        body = self.body_bytes()
        given = bool(body.strip())
        options = self._decode_delete_options(body) if given else {}
        self.check_write_options("DeleteOptions", options.get("dryRun"), query=not given)
        return DeleteOptions.from_request({} if given else self.args, options)

    def _decode_delete_options(self, body: bytes) -> dict:
        """A DELETE body: a DeleteOptions decoded like any object."""
        parsed = request_decoder.parse(body, self.content_type(), "DeleteOptions")
        obj = parsed.obj
        if not isinstance(obj, dict) or obj.get("kind") not in (None, "", "DeleteOptions"):
            request_decoder.check_type_meta(obj, self.rtype, body, "DeleteOptions", "v1", _registered)
            body_kind = obj.get("kind") if isinstance(obj.get("kind"), str) else ""
            raise request_decoder.cannot_handle(body_kind, "v1", "DeleteOptions",
                                                "the body of a delete must be a DeleteOptions object")
        clean, _, _ = request_decoder.decode_typed(obj, DELETE_OPTIONS, "DeleteOptions", "v1", "DeleteOptions")
        return clean

    def field_validation(self) -> str:
        mode = self.arg("fieldValidation") or "Warn"
        if mode not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(f'fieldValidation must be one of "Ignore", "Warn", or "Strict", got {mode!r}')
        return mode


DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"


def _registered(group: str, version: str, kind: str) -> bool:
    """Whether upstream's scheme knows this kind (the built-in definitions say so)."""
    from kapiserver.machinery.openapi_definitions import load_definitions

    return (group, version, kind) in load_definitions().gvk_index()
