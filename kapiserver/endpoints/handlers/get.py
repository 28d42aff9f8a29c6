"""GET of one object."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def get(scope: RequestScope) -> Response:
    info = scope.info
    obj = await scope.store.get(info.namespace, info.name, scope.arg("resourceVersion") or "")
    return Response(200, obj)
