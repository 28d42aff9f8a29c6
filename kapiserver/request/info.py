"""RequestInfo: what a request is about, parsed once before routing.

Same rules as upstream's ``k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory``:
``/api/v1/...`` and ``/apis/<group>/<version>/...`` are resource requests,
everything else is a non-resource request whose verb is the lowercase method.
A list or watch whose field selector requires ``metadata.name`` to equal a value
is about that one object: as upstream, the value is the request's name, so RBAC
rules with ``resourceNames`` and the Node authorizer can allow it (kube-scheduler
and the kubelet read single ConfigMaps and Secrets this way).  The raw ``fieldSelector`` of a list, watch or
deletecollection is kept for the authorizers (AuthorizeWithSelectors), but
not for the deprecated ``/watch/`` paths, as upstream.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import unquote

from kapiserver.machinery import errors, strconv
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import go_bool, query_arg

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
    # The name is the list's or watch's metadata.name selector, not a path segment (so a
    # list of namespaces it names is not in that namespace).
    name_from_selector: bool = False

    @property
    def is_long_running(self) -> bool:
        return self.verb in LONG_RUNNING_VERBS or self.subresource in LONG_RUNNING_SUBRESOURCES

    @property
    def scope(self) -> str:
        """Metrics label: resource / namespace / cluster."""
        if self.name:
            return "resource"
        return "namespace" if self.namespace else "cluster"


def _go_int64(value: Optional[str]) -> bool:
    """Whether an int64 query parameter decodes (strconv.ParseInt(value, 10, 64)); absent is fine."""
    if value is None:
        return True
    try:
        strconv.parse_int(value)
    except ValueError:
        return False
    return True


def _list_watch_name(args: dict[bytes, list[bytes]]) -> tuple[bool, Optional[str]]:
    """Whether a GET without a name is a watch, and the object its field selector names.

    Upstream decodes the query into ListOptions; when any parameter does not decode (a bad
    field or label selector, a ``limit`` or ``timeoutSeconds`` that is not an int64) it names
    nothing, and ``watch`` alone says whether it is a watch.  Otherwise the name is the value
    of the selector's first ``metadata.name=`` (or ``==``) requirement in sorted order, if it
    can be a path segment (not ``.`` or ``..``, no ``/`` or ``%``).
    """
    watch = query_arg(args, "watch")
    try:
        fields = parse_field_selector(query_arg(args, "fieldSelector") or "")
        parse_label_selector(query_arg(args, "labelSelector") or "")
        decoded = _go_int64(query_arg(args, "limit")) and _go_int64(query_arg(args, "timeoutSeconds"))
    except errors.StatusError:
        decoded = False
    if not decoded:
        return watch is not None and watch.lower() not in ("false", "0"), None
    name = fields.requires_exact_match("metadata.name")
    if name is not None and (name in (".", "..") or "/" in name or "%" in name):
        name = None
    return go_bool(watch), name


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
        is_watch, name = _list_watch_name(args)
        info.verb = "watch" if is_watch else "list"
        if name:
            info.name, info.name_from_selector = name, True
    if not info.name and info.verb == "delete":
        info.verb = "deletecollection"
    if raw_selector and not verb_via_path and info.verb in ("list", "watch", "deletecollection"):
        info.field_selector = raw_selector
    return info

