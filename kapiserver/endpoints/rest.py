"""The REST endpoint of a resource type: route a resource request to its verb handler.

Used by the kube (built-in) API resource and by the CRD resource alike: one
model for every resource type.
"""
from __future__ import annotations

from typing import Any

from twisted.internet import defer
from twisted.web import resource, server

from kapiserver.endpoints import respond
from kapiserver.endpoints.deps import EndpointDeps
from kapiserver.registry.groups import APIGroupSet
from kapiserver.endpoints.handlers import create, delete, deletecollection, get, list as list_handler
from kapiserver.endpoints.handlers import scale, subresource, update, watch as watch_handler
from kapiserver.endpoints.negotiation import check_route_accepts, negotiate, route_produces
from kapiserver.endpoints.request_context import context_of
from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.endpoints.list_encoding import list_body
from kapiserver.endpoints.transform import allowed_shapes, include_object, transform_object
from kapiserver.machinery import errors
from kapiserver.registry.store import LARGE_BODY_ON_THREAD_BYTES, StoredList, StoredObject
from kapiserver.request.info import RequestInfo


async def patch(scope: RequestScope) -> Response:
    """PATCH: its handler and the patch codecs (JSON patch, merge and strategic merge patch) load
    with the first one; a server that is never patched does not hold their code."""
    from kapiserver.endpoints.handlers import patch as patch_handler
    return await patch_handler.patch(scope)


HANDLERS = {
    "get": get.get,
    "list": list_handler.list_objects,
    "create": create.create,
    "update": update.update,
    "patch": patch,
    "delete": delete.delete,
    "deletecollection": deletecollection.delete_collection,
}
SCALE_HANDLERS = {"get": scale.get_scale, "update": scale.update_scale, "patch": scale.patch_scale}
# the verbs served on an object's own path: without any of them upstream registers no such path (a
# create-only kind such as SelfSubjectReview), so a request naming an object is 404, not 405
ITEM_VERBS = frozenset(("get", "update", "patch", "delete"))
# verbs each subresource answers
SUBRESOURCE_VERBS = {"status": ("get", "update", "patch"), "scale": ("get", "update", "patch")}


class RESTEndpoint(resource.Resource):
    """A leaf answering one resource request for a type in ``groups``."""

    isLeaf = True

    def __init__(self, groups: APIGroupSet, deps: EndpointDeps) -> None:
        super().__init__()
        self.groups = groups
        self.deps = deps

    def render(self, request: server.Request):
        ctx = context_of(request)
        info = ctx.require_info()
        target = None
        try:
            found = self.groups.lookup(info.group, info.version, info.resource)
            if found is None:
                raise errors.resource_not_found()
            rtype, store = found
            verb = info.verb
            self._check_scope(info, rtype)
            sub = None
            if info.subresource:
                sub = rtype.subresource(info.subresource)
                if sub is not None:
                    if verb not in sub.verbs and not (sub.proxy and verb == "options"):
                        raise errors.method_not_allowed()
                elif info.subresource not in rtype.subresources:
                    raise errors.resource_not_found()
                elif verb not in SUBRESOURCE_VERBS[info.subresource]:
                    raise errors.method_not_allowed()
            elif info.name and not info.name_from_selector and ITEM_VERBS.isdisjoint(rtype.verbs):
                raise errors.resource_not_found()  # no route for an object's path (a selector's name is no path)
            elif verb not in rtype.verbs:
                if verb == "watch" and "list" in rtype.verbs:  # the route exists, the storage cannot watch
                    raise errors.method_not_supported(rtype.plural, rtype.group, verb)
                raise errors.method_not_allowed()
            accept = request.getHeader(b"accept")
            if not rtype.is_crd and (sub is None or info.subresource in SUBRESOURCE_VERBS):
                # go-restful's route check (custom resources have no routes; other subresources
                # declare their own types)
                check_route_accepts(accept.decode("latin-1") if accept else None, route_produces(verb))
            printable = rtype.table_convertor and (sub is None or (sub.create is None and sub.connect is None))
            target = negotiate(accept.decode("latin-1") if accept else None, allowed_shapes(verb, printable),
                               protobuf_objects=not rtype.is_crd)
            scope = RequestScope(request=request, info=info, rtype=rtype, store=store, target=target,
                                 user=ctx.user, reactor=self.deps.reactor,
                                 bookmark_interval=self.deps.bookmark_interval,
                                 schema_resolver=self.deps.schema_resolver, stores=self.deps.stores,
                                 streams=self.deps.streams)
            if rtype.deprecated:
                scope.warnings.append(rtype.deprecation_warning)
        except Exception as e:
            respond.write_failure(request, e, target)
            return server.NOT_DONE_YET
        if verb == "watch":  # the request info decided it as upstream (``?watch=`` with any value but 0/false)
            streaming = defer.Deferred.fromCoroutine(watch_handler.watch(scope, self.deps.watches.register))
            streaming.addErrback(respond.failure_writer(request, target))
            return server.NOT_DONE_YET
        if sub is not None and (sub.create is not None or sub.connect is not None):
            handler = subresource.handler_for(sub)
        else:
            handler = SCALE_HANDLERS[verb] if info.subresource == "scale" else HANDLERS[verb]
        if scope.body_size() >= LARGE_BODY_ON_THREAD_BYTES:
            scope.handle_large()
        answering = defer.Deferred.fromCoroutine(handler(scope))
        answering.addCallback(self._answer, scope)
        answering.addErrback(respond.failure_writer(request, target))
        answering.addBoth(scope.finished)
        return server.NOT_DONE_YET

    def _answer(self, response: Response, scope: RequestScope) -> Any:
        if response.serve is not None:  # a stream to a kubelet or a backend answers for itself
            return defer.Deferred.fromCoroutine(response.serve(scope.request))
        if isinstance(response.obj, StoredList):  # a list: written piece by piece
            body = list_body(response.obj, scope.target, respond.wants_pretty(scope.request),
                             lambda: include_object(scope))
            return defer.Deferred.fromCoroutine(
                respond.stream_list(scope.request, body, self.deps.reactor, scope.warnings))
        return self._answer_object(response, scope)

    @staticmethod
    def _check_scope(info: RequestInfo, rtype) -> None:
        if rtype.namespaced:
            if not info.namespace and info.verb not in ("list", "watch"):
                raise errors.resource_not_found()
        elif info.namespace:
            raise errors.resource_not_found()

    @staticmethod
    def _answer_object(response: Response, scope: RequestScope) -> Any:
        if response.raw is not None:
            respond.write_raw(scope.request, response.code, response.content_type, response.raw, scope.warnings)
            return
        obj = response.obj
        large = scope.large or (isinstance(obj, StoredObject) and respond.is_large(obj))
        if large and response.convertible and not scope.target.as_kind:
            return defer.Deferred.fromCoroutine(
                respond.write_large(scope.request, scope.target, response.code, obj, scope.warnings))
        if isinstance(obj, StoredObject):  # a GET: its memoized encoding when the answer allows
            if respond.write_stored(scope.request, scope.target, response.code, obj, scope.warnings):
                return
            obj = obj.external()
        if response.convertible:
            obj, target = transform_object(scope, obj), scope.target
        else:  # a Status: same encoding, never another shape
            target = scope.target.for_status()
        respond.write_object(scope.request, target, response.code, obj, scope.warnings)
