"""PUT of one object (or of its status)."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def update(scope: RequestScope) -> Response:
    info = scope.info
    scope.check_write_options("UpdateOptions")
    manager = scope.field_manager("UpdateOptions")
    obj = await scope.decode_body()
    result = await scope.generic_store().update_result(info.namespace, info.name, obj, info.subresource,
                                                       scope.context(manager))
    return Response(201 if result.created else 200, result.answer())
