"""POST to a collection."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def create(scope: RequestScope) -> Response:
    scope.check_write_options("CreateOptions")
    manager = scope.field_manager("CreateOptions")
    obj = await scope.decode_body()
    created = await scope.creater().create_result(scope.info.namespace, obj, scope.context(manager))
    return Response(201, created.answer())
