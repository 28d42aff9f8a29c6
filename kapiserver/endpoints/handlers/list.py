"""GET of a collection (list)."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response


async def list_objects(scope: RequestScope) -> Response:
    opts = scope.list_options()
    return Response(200, await scope.lister().list_stored(scope.info.namespace, opts, scope.warnings))
