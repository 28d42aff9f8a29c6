"""The typed per-request context the filters fill in (upstream's request.Context values).

Each filter of the handler chain attaches what it learned: the request info,
the authenticated user, the user the request acts as after impersonation, the
audit event, the in-flight seat.  Later filters, the delegation chain and the
handlers read it through :func:`context_of`; nothing else is hung on the
Twisted request.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from twisted.logger import Logger
from twisted.web.server import Request

from kapiserver.audit.event import AuditEvent
from kapiserver.auth.decision import AuthenticationDecision
from kapiserver.machinery.user import UserInfo
from kapiserver.request.info import RequestInfo

_ATTRIBUTE = "kapiserver_context"

log = Logger()


@dataclass(eq=False, repr=False)
class RequestContext:
    # when the request was handed to the chain (monotonic seconds), for latency metrics
    received_at: float = field(default_factory=time.monotonic)
    # the same moment on the wall clock (audit events' requestReceivedTimestamp)
    received_wall: float = field(default_factory=time.time)
    # the request's audit ID (the audit-init filter: the client's Audit-ID or a new UUID)
    audit_id: str = ""
    # what the request is about (the request-info filter)
    info: Optional[RequestInfo] = None
    # the request's authentication, started by the connection when its headers were complete
    # (before its body was read); the authentication filter reads it
    authentication: Optional[AuthenticationDecision] = None
    # who sent it (the authentication filter) and who it acts as (impersonation)
    authenticated_user: Optional[UserInfo] = None
    user: Optional[UserInfo] = None
    # audiences the credential was valid for (service-account tokens)
    audiences: tuple[str, ...] = ()
    # the audit event being recorded for this request, if the policy asked for one
    # (handlers log what they decoded and answered)
    audit: Optional[AuditEvent] = None
    # audit annotations admission added (webhooks, policies), for the audit event
    audit_annotations: dict[str, str] = field(default_factory=dict)
    # set by the connection when the body exceeded the limit while it arrived
    body_too_large: bool = False
    # the timeout filter answered 504: nothing else may write
    timed_out: bool = False
    # priority and fairness: what a watch calls once initialized (its initial events
    # encoded), to give back its seats (upstream's WatchInitialized)
    watch_initialized: Optional[Callable[[], Any]] = None
    # what runs once the response is finished or the connection lost (when_finished)
    _finish_hooks: Optional[list[Callable[[], Any]]] = field(default=None, repr=False)
    _finish_hooks_ran: bool = field(default=False, repr=False)

    def require_info(self) -> RequestInfo:
        if self.info is None:
            raise RuntimeError("the request-info filter has not run")
        return self.info

    def when_finished(self, request: Any, hook: Callable[[], Any]) -> None:
        """Call ``hook()`` once the request is finished or its client gone, as
        ``request.notifyFinish().addBoth`` would, in the order hooks were added.

        The filters' hooks (metrics, flow control, timeout, wait group, audit) share
        one notifyFinish Deferred: a Deferred per hook cost every request a few
        percent of its CPU.  A hook added after the request finished runs at once.
        """
        if self._finish_hooks_ran:
            _run_hook(hook)
        elif self._finish_hooks is None:
            self._finish_hooks = [hook]
            request.notifyFinish().addBoth(self._run_finish_hooks)
        else:
            self._finish_hooks.append(hook)

    def _run_finish_hooks(self, result: Any) -> None:
        # a failure (the client went away) is what notifyFinish reports then: consumed here
        self._finish_hooks_ran = True
        for hook in self._finish_hooks or ():
            _run_hook(hook)
        self._finish_hooks = None


def _run_hook(hook: Callable[[], Any]) -> None:
    try:
        hook()
    except Exception:  # one failing hook must not keep the others from running
        log.failure("a request's finish hook failed")


def client_gone(request: Request) -> bool:
    """Whether the request was answered or its client went away (twisted's Request sets
    ``_disconnected`` when the connection or HTTP/2 stream ends)."""
    return bool(request.finished or request._disconnected)


def writable(request: Request) -> bool:
    """Whether an answer may still be written (not finished, the client there, not timed out)."""
    return not (client_gone(request) or context_of(request).timed_out)


def context_of(request: Any) -> RequestContext:
    """The request's context, created on first use."""
    ctx = getattr(request, _ATTRIBUTE, None)
    if ctx is None:
        ctx = RequestContext()
        setattr(request, _ATTRIBUTE, ctx)
    return ctx
