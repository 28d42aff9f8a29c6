"""DELETE of a collection, filtered by label and field selectors."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.registry.options import DeleteOptions, ListOptions


async def delete_collection(scope: RequestScope) -> Response:
    body = scope.decode_delete_options()
    scope.check_write_options("DeleteOptions", body.get("dryRun"))
    opts = DeleteOptions.from_request(scope.args, body)
    list_opts = ListOptions.from_args(scope.args)
    deleted = await scope.generic_store().delete_collection(scope.info.namespace, list_opts, opts, scope.context())
    return Response(200, deleted)
