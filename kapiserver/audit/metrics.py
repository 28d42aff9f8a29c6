"""Upstream's audit metrics, registered in a server's registry (``/metrics``)."""
from __future__ import annotations

from kapiserver.machinery.metrics import Counter, Registry


class AuditMetrics:
    def __init__(self, registry: Registry) -> None:
        self.events = Counter("apiserver_audit_event_total",
                              "Counter of audit events generated and sent to the audit backend.", registry=registry)
        self.errors = Counter("apiserver_audit_error_total",
                              "Counter of audit events that failed to be audited properly. Plugin identifies the "
                              "plugin affected by the error.", ["plugin"], registry=registry)
        self.levels = Counter("apiserver_audit_level_total",
                              "Counter of policy levels for audit events (1 per request).", ["level"],
                              registry=registry)
        self.rejected = Counter("apiserver_audit_requests_rejected_total",
                                "Counter of apiserver requests rejected due to an error in audit logging backend.",
                                registry=registry)
