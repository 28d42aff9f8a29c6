"""POST to a collection, or to a named object's create-only subresource."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def create(scope: RequestScope) -> Response:
    manager = scope.field_manager("CreateOptions")
    obj = scope.decode_body()
    scope.check_fields(obj)
    created = await scope.store.create(scope.info.namespace, obj, scope.context(manager))
    return Response(201, created)


async def create_subresource(scope: RequestScope) -> Response:
    """POST to a named object's subresource of another kind (``serviceaccounts/<name>/token``)."""
    info = scope.info
    obj = scope.decode_body()
    created = await scope.store.create_subresource(info.subresource, info.namespace, info.name, obj,
                                                   scope.context())
    return Response(201, created, convertible=False)
