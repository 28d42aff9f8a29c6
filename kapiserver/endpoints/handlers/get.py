"""GET of one object."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def get(scope: RequestScope) -> Response:
    info = scope.info
    return Response(200, await scope.getter().get_stored(info.namespace, info.name, scope.arg("resourceVersion") or ""))
