"""RequestInfo: what a request is about, parsed once before routing.

Same rules as upstream's ``k8s.io/apiserver/pkg/endpoints/request.RequestInfoFactory``:
``/api/v1/...`` and ``/apis/<group>/<version>/...`` are resource requests,
everything else is a non-resource request whose verb is the lowercase method.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote

from kapiserver.registry.options import query_bool

_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update",
                 "PATCH": "patch", "DELETE": "delete"}
# /namespaces/<name>/<these> address the namespace object itself.
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
LONG_RUNNING_VERBS = {"watch", "proxy"}


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

    @property
    def is_long_running(self) -> bool:
        return self.verb in LONG_RUNNING_VERBS

    @property
    def scope(self) -> str:
        """Metrics label: resource / namespace / cluster."""
        if self.name:
            return "resource"
        return "namespace" if self.namespace else "cluster"


def _truthy(args: dict[bytes, list[bytes]], key: bytes) -> bool:
    values = args.get(key) or []
    return bool(values) and query_bool(values[0].decode("utf-8", "replace"))


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
    if rest and rest[0] == "watch":
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
    if not info.name and info.verb == "get":
        info.verb = "watch" if _truthy(args, b"watch") else "list"
    if not info.name and info.verb == "delete":
        info.verb = "deletecollection"
    return info
