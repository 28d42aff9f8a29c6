"""DELETE of a collection, filtered by label and field selectors."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.registry.options import ListOptions


async def delete_collection(scope: RequestScope) -> Response:
    opts = scope.delete_options()
    list_opts = ListOptions.from_args(scope.args)
    deleted = await scope.generic_store().delete_collection(scope.info.namespace, list_opts, opts,
                                                            scope.context(dry_run=opts.dry_run))
    return Response(200, deleted)
