"""The handler chain around the delegation chain, in upstream's order.

kube-apiserver's ``DefaultBuildHandlerChain`` wraps its API handler so that a
request passes, outermost first:

    audit init → panic recovery → request info → metrics → wait group → timeout
      → authentication → audit → impersonation → max-in-flight → authorization
      → the delegation chain (aggregator → kube → CRD → 404)

Max-in-flight comes after authentication and impersonation, as upstream: the
``system:masters`` group is exempt from it, and priority-and-fairness (its
successor, which takes its place unless ``limits.enable_priority_and_fairness``
is false) classifies requests by user.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import IResource

from kapiserver.audit.build import Auditing
from kapiserver.auth.authenticator import Authenticator
from kapiserver.auth.authorizer import Authorizer
from kapiserver.endpoints.filters.audit import WithAudit
from kapiserver.endpoints.filters.audit_init import WithAuditInit
from kapiserver.endpoints.filters.authentication import WithAuthentication
from kapiserver.endpoints.filters.authorization import WithAuthorization
from kapiserver.endpoints.filters.impersonation import WithImpersonation
from kapiserver.endpoints.filters.inflight import InflightLimiter, WithMaxInFlightLimit
from kapiserver.endpoints.filters.metrics import Recorder, WithRequestMetrics
from kapiserver.endpoints.filters.panic_recovery import PanicRecovery
from kapiserver.endpoints.filters.priority_and_fairness import WithPriorityAndFairness
from kapiserver.endpoints.filters.request_info import WithRequestInfo
from kapiserver.endpoints.filters.timeout import WithTimeout
from kapiserver.endpoints.filters.waitgroup import RequestWaitGroup, WithWaitGroup
from kapiserver.flowcontrol.controller import APFController
from kapiserver.flowcontrol.work_estimate import ObjectCounter


class HandlerChainDeps(NamedTuple):
    reactor: IReactorTime
    authenticator: Authenticator
    authorizer: Authorizer
    inflight: InflightLimiter
    wait_group: RequestWaitGroup
    record_metrics: Recorder
    request_timeout_seconds: float
    max_body_bytes: int
    # the audit policy and backends; None = nothing is audited (Audit-Id is still answered)
    auditing: Optional[Auditing] = None
    # API Priority and Fairness, in max-in-flight's place when set
    flow_control: Optional[APFController] = None
    # (API group, resource) -> objects stored: the seats a LIST takes
    object_count: ObjectCounter = lambda group, resource: None


def build_handler_chain(api_handler: IResource, deps: HandlerChainDeps) -> IResource:
    """Wrap ``api_handler`` (the delegation chain) in the filters, innermost first."""
    handler: IResource = WithAuthorization(api_handler, deps.authorizer)
    if deps.flow_control is not None:
        handler = WithPriorityAndFairness(handler, deps.flow_control, deps.object_count, deps.reactor,
                                          deps.request_timeout_seconds)
    else:
        handler = WithMaxInFlightLimit(handler, deps.inflight)
    handler = WithImpersonation(handler, deps.authorizer)
    if deps.auditing is not None:
        handler = WithAudit(handler, deps.auditing)
    handler = WithAuthentication(handler, deps.authenticator)
    handler = WithTimeout(handler, deps.reactor, deps.request_timeout_seconds)
    handler = WithWaitGroup(handler, deps.wait_group)
    handler = WithRequestMetrics(handler, deps.record_metrics)
    handler = WithRequestInfo(handler, deps.max_body_bytes)
    return WithAuditInit(PanicRecovery(handler), deps.auditing)
