"""DELETE of one object."""
from __future__ import annotations

from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.machinery import errors


def success_status(rtype, obj: dict) -> dict:
    """The Status upstream answers when a deleted object is not returned."""
    md = obj.get("metadata") or {}
    details = {"name": md.get("name", ""), "group": rtype.group, "kind": rtype.plural, "uid": md.get("uid", "")}
    return errors.status_object("Success", details=details)


async def delete(scope: RequestScope) -> Response:
    info = scope.info
    opts = scope.delete_options()
    obj, deleted_now = await scope.generic_store().delete(info.namespace, info.name, opts,
                                                          scope.context(dry_run=opts.dry_run))
    if not deleted_now:
        return Response(200, obj)  # marked for deletion; finalizers still hold it
    if scope.rtype.return_deleted_object:
        return Response(200, obj)
    return Response(200, success_status(scope.rtype, obj), convertible=False)
