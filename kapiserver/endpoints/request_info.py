"""RequestInfo: what a request is about, parsed once before routing.

Same rules as upstream's ``k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory``:
``/api/v1/...`` and ``/apis/<group>/<version>/...`` are resource requests,
everything else is a non-resource request whose verb is the lowercase method.
A list or watch whose ``fieldSelector`` pins ``metadata.name`` is about that
name (so RBAC's resourceNames and the Node authorizer can allow a kubelet's
watch of one Secret); the raw ``fieldSelector`` of a list, watch or
deletecollection is kept for the authorizers (AuthorizeWithSelectors), but
not for the deprecated ``/watch/`` paths, as upstream.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.validation import is_path_segment_name

_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
                 "PATCH": "patch", "DELETE": "delete"}
# /namespaces/<name>/<these> address the namespace object itself.
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
LONG_RUNNING_VERBS = {"watch", "proxy"}
# upstream's BasicLongRunningRequestCheck: these subresources stream for as long as they last
LONG_RUNNING_SUBRESOURCES = {"attach", "exec", "proxy", "log", "portforward"}


@dataclass
class RequestInfo:
    path: str
    verb: str
    is_resource_request: bool = False
    api_prefix: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)
    field_selector: str = ""  # the raw fieldSelector of a list, watch or deletecollection

    @property
    def is_long_running(self) -> bool:
        return self.verb in LONG_RUNNING_VERBS or self.subresource in LONG_RUNNING_SUBRESOURCES

    @property
    def scope(self) -> str:
        """Metrics label: resource / namespace / cluster."""
        if self.name:
            return "resource"
        return "namespace" if self.namespace else "cluster"


def _truthy(args: dict[bytes, list[bytes]], key: bytes) -> bool:
    values = args.get(key) or []
    return bool(values) and values[0].lower() in (b"true", b"1")


def parse_request_info(method: str, path: str, args: dict[bytes, list[bytes]]) -> RequestInfo:
    """Parse ``method`` + URL path + query arguments (twisted's ``request.args``)."""
    verb = _METHOD_VERBS.get(method.upper(), method.lower())
    parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
    info = RequestInfo(path=path, verb=method.lower(), parts=parts)
    if not parts or parts[0] not in ("api", "apis"):
        return info
    # /api/<version> and /apis/<group>/<version> (discovery) are non-resource requests, as upstream
    if len(parts) < 3 or (parts[0] == "apis" and len(parts) < 4):
        return info
    info.api_prefix = parts[0]
    rest = parts[1:]
    if info.api_prefix == "apis":
        info.group, info.version, rest = rest[0], rest[1], rest[2:]
    else:
        info.version, rest = rest[0], rest[1:]
    info.is_resource_request = True
    info.verb = verb
    verb_via_path = bool(rest) and rest[0] == "watch"
    if verb_via_path:
        if verb == "get":
            info.verb = "watch"
        rest = rest[1:]
    if rest and rest[0] == "namespaces":
        if len(rest) > 1:
            info.namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    if rest:
        info.resource = rest[0]
    if len(rest) > 1:
        info.name = rest[1]
    if len(rest) > 2:
        info.subresource = rest[2]
    if info.resource == "namespaces" and info.namespace and not info.name:
        info.name = info.namespace
    if info.resource == "namespaces":
        info.namespace = ""
    selector = args.get(b"fieldSelector")
    raw_selector = selector[0].decode("utf-8", "replace") if selector else ""
    if not info.name and info.verb == "get":
        info.verb = "watch" if _truthy(args, b"watch") else "list"
        if raw_selector:
            info.name = _selected_name(raw_selector)
    if not info.name and info.verb == "delete":
        info.verb = "deletecollection"
    if raw_selector and not verb_via_path and info.verb in ("list", "watch", "deletecollection"):
        info.field_selector = raw_selector
    return info


def _selected_name(raw_selector: str) -> str:
    """The name a field selector pins (``metadata.name=x``), if it parses and is a valid path segment."""
    try:
        name = parse_field_selector(raw_selector).requires_exact_match("metadata.name")
    except errors.StatusError:  # the list handler answers the bad selector
        return ""
    return name if name is not None and not is_path_segment_name(name) else ""
