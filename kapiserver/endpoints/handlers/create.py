"""POST to a collection."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def create(scope: RequestScope) -> Response:
    scope.check_write_options("CreateOptions")
    manager = scope.field_manager("CreateOptions")
    obj = scope.decode_object()
    ctx = scope.context(manager)
    creater = scope.creater()
    created = await creater.create(scope.info.namespace, obj, ctx)
    return Response(201, creater.stored_answer(created, ctx))
