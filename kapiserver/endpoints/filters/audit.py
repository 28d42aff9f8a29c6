"""Audit: record the request as the policy says (upstream's ``WithAudit``).

Between authentication and impersonation, as upstream: the policy is
evaluated for the authenticated user, ``RequestReceived`` is written at once,
``ResponseStarted`` when a long-running request (a watch) sends its first
bytes, ``ResponseComplete`` when the response ends (or the client went
away), ``Panic`` if the rest of the chain raised.  The handlers add the
objects they decoded and answered through ``ctx.audit``; with the level
``None`` it stays None and they pay one attribute test.  An event the
backends refuse at ``RequestReceived`` fails the request with 500, as upstream.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.audit.build import Auditing
from kapiserver.audit.event import AuditEvent
from kapiserver.audit.policy import (LEVEL_NONE, STAGE_PANIC, STAGE_REQUEST_RECEIVED, STAGE_RESPONSE_COMPLETE,
                                     STAGE_RESPONSE_STARTED)
from kapiserver.endpoints.filters.authorization import attributes_for
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext, context_of
from kapiserver.machinery import errors


def _long_running(request: Any, ctx: RequestContext) -> bool:
    info = ctx.require_info()
    if info.is_long_running:
        return True
    values = (request.args or {}).get(b"watch") or []
    return info.verb == "list" and bool(values) and values[0].lower() in (b"true", b"1")


class WithAudit(Filter):
    def __init__(self, wrapped, auditing: Auditing) -> None:
        super().__init__(wrapped)
        self.auditing = auditing

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        info = ctx.require_info()
        config = self.auditing.policy.evaluate(ctx.authenticated_user, attributes_for(info))
        self.auditing.metrics.levels.labels(level=config.level).inc()
        if config.level == LEVEL_NONE:
            return None
        event = AuditEvent(ctx.audit_id, config, self.auditing.sink, ctx.authenticated_user, lambda: ctx.user)
        event.log_request_metadata(request, info.verb, info, received=ctx.received_wall)
        if not event.process_stage(STAGE_REQUEST_RECEIVED):
            self.auditing.metrics.rejected.inc()
            raise errors.internal_error("failed to store audit event")
        ctx.audit = event
        event.long_running = _long_running(request, ctx)
        if event.long_running:
            self._watch_first_write(request, event)
        ctx.when_finished(request, lambda: self._complete(request, event))
        return None

    def proceed(self, request: server.Request) -> Any:
        try:
            return super().proceed(request)
        except errors.StatusError:
            raise  # an answer (authorization's 403, priority and fairness' 429): ResponseComplete
        except Exception as e:
            event = context_of(request).audit
            if event is not None:
                event.log_response_object({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                           "reason": "InternalError", "code": 500,
                                           "message": f"APIServer panic'd: {e}"})
                event.process_stage(STAGE_PANIC)
                event.panicked = True
            raise

    @staticmethod
    def _watch_first_write(request: Any, event: AuditEvent) -> None:
        """ResponseStarted when the first bytes go out (upstream: when the header is written)."""
        original = request.write

        def write(data: bytes) -> None:
            if event.long_running and not event.response_started:
                event.response_started = True
                event.set_response_code(request.code)
                event.process_stage(STAGE_RESPONSE_STARTED)
            original(data)
        request.write = write

    @staticmethod
    def _complete(request: Any, event: AuditEvent) -> None:
        if event.panicked:
            return
        if request.startedWriting or request.finished:
            event.set_response_code(request.code)
        else:  # the client went away before anything was answered
            event.response_status = {"metadata": {}, "status": "Success", "message": "Connection closed early",
                                     "code": 200}
            if event.long_running and not event.response_started:
                event.response_started = True
                event.process_stage(STAGE_RESPONSE_STARTED)
        event.process_stage(STAGE_RESPONSE_COMPLETE)
