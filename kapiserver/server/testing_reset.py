"""``POST /debug/kapiserver/{snapshot,reset}``: the store back to a snapshot between tests.

Served only with ``testing.enable_reset`` (off by default: the paths answer 404, as any
unknown path). Like every non-resource path they are authorized first (verb ``post``), so
only an identity granted that, e.g. ``system:masters``, may call them; anyone else gets 403.

``snapshot`` saves the live keys of the store (``ServerProcess(reset=True)`` asks for one
once the server is ready: the bootstrap state); ``reset`` writes the store back to them in one transaction at new
revisions (:class:`~kapiserver.storage.interface.Snapshots`), so resourceVersions keep
growing and watchers (the watch cache, a controller's informers) see the DELETED,
MODIFIED and ADDED events of that return as of any change. Both answer a small JSON
document.
"""
from __future__ import annotations

import json
from typing import Any

from twisted.internet import defer
from twisted.web import resource, server

from kapiserver.endpoints import respond, static
from kapiserver.endpoints.request_context import context_of
from kapiserver.machinery import errors
from kapiserver.storage.interface import NoSnapshotError, RestoreResult, Snapshots

ACTIONS = ("snapshot", "reset")


class SnapshotResource(resource.Resource):
    """``/debug/kapiserver/<action>`` (a leaf below the server's ``debug`` path)."""

    isLeaf = True

    def __init__(self, store: Snapshots) -> None:
        super().__init__()
        self.store = store

    def render(self, request: server.Request) -> Any:
        parts = context_of(request).require_info().parts
        action = parts[2] if len(parts) == 3 and parts[1] == "kapiserver" else ""
        if action not in ACTIONS:
            return static.not_found().render(request)
        if request.method != b"POST":
            respond.write_status(request, errors.StatusError(
                405, "MethodNotAllowed", "the server does not allow this method on the requested resource"))
            return server.NOT_DONE_YET
        d = defer.Deferred.fromCoroutine(self._run(action))
        d.addCallbacks(lambda body: respond.write_raw(request, 200, "application/json", body),
                       lambda failure: respond.write_failure(request, _status_error(failure.value)))
        return server.NOT_DONE_YET

    async def _run(self, action: str) -> bytes:
        if action == "snapshot":
            revision: int = await self.store.snapshot()
            return json.dumps({"revision": revision}).encode()
        done: RestoreResult = await self.store.restore()
        return json.dumps({"revision": done.revision, "deleted": done.deleted, "rewritten": done.rewritten,
                           "recreated": done.recreated}).encode()


def _status_error(error: BaseException) -> BaseException:
    if isinstance(error, NoSnapshotError):
        return errors.StatusError(409, "Conflict", f"cannot reset: {error}; POST /debug/kapiserver/snapshot first")
    return error


class DebugResource(resource.Resource):
    """``/debug/<area>/...``: each area's leaf (``api_priority_and_fairness``, ``kapiserver``), else 404."""

    isLeaf = True

    def __init__(self, areas: dict[str, resource.Resource]) -> None:
        super().__init__()
        self.areas = areas

    def render(self, request: server.Request) -> Any:
        parts = context_of(request).require_info().parts
        area = self.areas.get(parts[1]) if len(parts) > 1 else None
        return (area or static.not_found()).render(request)
