"""Upstream's audit metrics, in the server's registry (``/metrics``)."""
from __future__ import annotations

from prometheus_client import Counter
from kapiserver.machinery.metrics import METRICS


EVENTS = Counter("apiserver_audit_event_total",
                 "Counter of audit events generated and sent to the audit backend.", registry=METRICS.registry)
ERRORS = Counter("apiserver_audit_error_total",
                 "Counter of audit events that failed to be audited properly. Plugin identifies the plugin "
                 "affected by the error.", ["plugin"], registry=METRICS.registry)
LEVELS = Counter("apiserver_audit_level_total",
                 "Counter of policy levels for audit events (1 per request).", ["level"], registry=METRICS.registry)
REJECTED = Counter("apiserver_audit_requests_rejected_total",
                   "Counter of apiserver requests rejected due to an error in audit logging backend.",
                   registry=METRICS.registry)
