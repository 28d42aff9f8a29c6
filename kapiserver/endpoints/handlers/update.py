"""PUT of one object (or of its status)."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def update(scope: RequestScope) -> Response:
    info = scope.info
    scope.check_write_options("UpdateOptions")
    manager = scope.field_manager("UpdateOptions")
    obj = scope.decode_object()
    ctx = scope.context(manager)
    result, created = await scope.generic_store().update(info.namespace, info.name, obj, info.subresource, ctx)
    return Response(201 if created else 200, scope.generic_store().stored_answer(result, ctx))
