"""DELETE of a collection, filtered by label and field selectors."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.registry.options import DeleteOptions, ListOptions


async def delete_collection(scope: RequestScope) -> Response:
    body = scope.decode_body(allow_empty=True)
    opts = DeleteOptions.from_request(scope.args, body if isinstance(body, dict) else None)
    list_opts = ListOptions.from_args(scope.args)
    deleted = await scope.store.delete_collection(scope.info.namespace, list_opts, opts, scope.context())
    return Response(200, deleted)
