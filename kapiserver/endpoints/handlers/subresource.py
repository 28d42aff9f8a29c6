"""Create and connect subresources (``pods/eviction``, ``pods/binding``, ``pods/log``...).

The HTTP side of :mod:`kapiserver.registry.subresources`: decode the body or
the query options, hand a :class:`SubresourceRequest` to the subresource and
turn its answer into a Response.  Update-style subresources (``status``,
``ephemeralcontainers``, ``finalize``) go through the ordinary get, update and
patch handlers instead.
"""
from __future__ import annotations

from typing import Any, Callable, Coroutine

from kapiserver.admission.resources import subresource_kind
from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.machinery import errors
from kapiserver.registry.admission import CONNECT, CREATE
from kapiserver.registry.subresources import Location, Subresource, SubresourceRequest


def _request(scope: RequestScope, body=None) -> SubresourceRequest:
    info = scope.info
    if scope.stores is None:  # pragma: no cover - every server sets it
        raise errors.internal_error("subresources need the server's stores")
    options = {k.decode("utf-8", "replace"): [v.decode("utf-8", "replace") for v in vs]
               for k, vs in scope.args.items()}
    marker = f"/{info.name}/{info.subresource}"
    tail = info.path.split(marker, 1)[1] if marker in info.path else ""
    return SubresourceRequest(store=scope.generic_store(), namespace=info.namespace, name=info.name,
                              ctx=scope.context(), stores=scope.stores, body=body, options=options, verb=info.verb, path=tail)


def _connect_options(scope: RequestScope, sub: Subresource) -> dict:
    """A connect request's options object (``PodExecOptions``...), what admission sees of it."""
    kind = subresource_kind(scope.rtype, sub.name)
    assert kind is not None
    obj: dict[str, Any] = {"kind": kind.kind, "apiVersion": kind.api_version}
    for key, values in scope.args.items():
        name = key.decode("utf-8", "replace")
        decoded = [v.decode("utf-8", "replace") for v in values]
        obj[name] = decoded if name == "command" else decoded[0]
    marker = f"/{scope.info.name}/{sub.name}"
    if marker in scope.info.path:
        path = scope.info.path.split(marker, 1)[1]
        if path:
            obj["path"] = path
    return obj


def handler_for(sub: Subresource) -> Callable[[RequestScope], Coroutine[Any, Any, Response]]:
    if sub.create is not None:
        create = sub.create

        async def create_handler(scope: RequestScope) -> Response:
            api_version = f"{sub.group}/{sub.version}" if sub.group else (sub.version or scope.rtype.api_version)
            body = await scope.decode_body(definition=sub.body_schema, kind=sub.kind or scope.rtype.kind,
                                             api_version=api_version)
            kind = subresource_kind(scope.rtype, sub.name)
            assert kind is not None
            info = scope.info
            await scope.generic_store().admit_subresource(CREATE, info.namespace, info.name, sub.name, body, kind,
                                                scope.context(), "CreateOptions")
            code, answer = await create(_request(scope, body))
            return Response(code, answer, convertible=False)
        return create_handler
    connect = sub.connect
    assert connect is not None

    async def connect_handler(scope: RequestScope) -> Response:
        if sub.name != "log":  # a log is read, not connected to: upstream admits no log request
            kind = subresource_kind(scope.rtype, sub.name)
            assert kind is not None
            info = scope.info
            await scope.generic_store().admit_subresource(CONNECT, info.namespace, info.name, sub.name,
                                                _connect_options(scope, sub), kind, scope.context())
        connected = await connect(_request(scope))
        if isinstance(connected, Location):
            streams, stores = scope.streams, scope.stores
            if streams is None or stores is None:
                raise errors.service_unavailable("this server does not connect to kubelets or backends")
            location = connected
            return Response(0, None, serve=lambda request: streams.serve(request, location, stores))
        return Response(connected.code, None, raw=connected.body, content_type=connected.content_type)
    return connect_handler
