"""GET of a collection (list)."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.registry.options import ListOptions


async def list_objects(scope: RequestScope) -> Response:
    opts = ListOptions.from_args(scope.args)
    return Response(200, await scope.store.list_stored(scope.info.namespace, opts, scope.warnings))
