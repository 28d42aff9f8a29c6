"""POST to a collection."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def create(scope: RequestScope) -> Response:
    scope.check_write_options("CreateOptions")
    manager = scope.field_manager("CreateOptions")
    obj = scope.decode_object()
    ctx = scope.context(manager)
    created = await scope.store.create(scope.info.namespace, obj, ctx)
    return Response(201, scope.store.stored_answer(created, ctx))
