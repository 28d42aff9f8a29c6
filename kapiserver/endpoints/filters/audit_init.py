"""Audit init: every request gets an audit ID, echoed in the ``Audit-Id`` response header.

Upstream's ``WithAuditInit``, the outermost filter: a client-sent ``Audit-ID``
is kept as is (so a request can be followed through an aggregating server),
otherwise a new UUID is made.  With auditing on it also records requests
that failed authentication (upstream's ``WithFailedAuthenticationAudit``):
they never reach the audit filter, which runs after authentication, so once
such a request is answered 401 one ``ResponseStarted`` event is written for
it, with the policy evaluated for no user.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer
from twisted.web import server

from kapiserver.audit.build import Auditing
from kapiserver.audit.event import AuditEvent
from kapiserver.audit.policy import LEVEL_NONE, STAGE_RESPONSE_STARTED
from kapiserver.endpoints.filters.authorization import attributes_for
from kapiserver.endpoints.filters.chain import Filter
from kapiserver.endpoints.request_context import RequestContext
from kapiserver.machinery.meta import new_uid

HEADER = b"audit-id"


class WithAuditInit(Filter):
    def __init__(self, wrapped, auditing: Optional[Auditing] = None) -> None:
        super().__init__(wrapped)
        self.auditing = auditing

    def apply(self, request: server.Request, ctx: RequestContext) -> Optional[defer.Deferred]:
        sent = request.getHeader(HEADER)
        ctx.audit_id = sent.decode("utf-8", "replace") if sent else new_uid()
        if not request.responseHeaders.hasHeader(HEADER):
            request.setHeader(b"Audit-Id", ctx.audit_id.encode("utf-8"))
        if self.auditing is not None:
            ctx.when_finished(request, lambda: self._failed_authentication(request, ctx))
        return None

    def _failed_authentication(self, request: Any, ctx: RequestContext) -> None:
        if ctx.audit is not None or ctx.authenticated_user is not None or ctx.info is None or request.code != 401:
            return
        assert self.auditing is not None
        config = self.auditing.policy.evaluate(None, attributes_for(ctx.info))
        if config.level == LEVEL_NONE:
            return
        event = AuditEvent(ctx.audit_id, config, self.auditing.sink, None, lambda: None)
        event.log_request_metadata(request, ctx.info.verb, ctx.info, received=ctx.received_wall)
        event.log_response_object({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
        event.process_stage(STAGE_RESPONSE_STARTED)
