"""Auditing as the configuration asks for it: the policy and the backends (``audit.*`` keys)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.audit.log_backend import LogBackend
from kapiserver.audit.metrics import AuditMetrics
from kapiserver.audit.policy import Policy, PolicyError, load_policy

log = Logger()


class AuditConfigError(Exception):
    """The audit configuration is unusable; ``str()`` is one line for the operator."""


class UnionBackend:
    """Every backend gets every event (upstream's ``audit.Union``)."""

    def __init__(self, backends: list[Any]) -> None:
        self.backends = backends

    def process_events(self, events: list[dict]) -> bool:
        ok = True
        for backend in self.backends:
            ok = backend.process_events(events) and ok
        return ok

    def start(self) -> None:
        for backend in self.backends:
            backend.start()

    def shutdown(self) -> defer.Deferred:
        return defer.DeferredList([defer.maybeDeferred(b.shutdown) for b in self.backends], consumeErrors=True)

    def __str__(self) -> str:
        return "union[" + ",".join(str(b) for b in self.backends) + "]"


class CountedBackend:
    """Counts the events handed to the backend (``apiserver_audit_event_total``)."""

    def __init__(self, backend: Any, metrics: AuditMetrics) -> None:
        self.backend = backend
        self.events = metrics.events

    def process_events(self, events: list[dict]) -> bool:
        self.events.inc(len(events))
        return self.backend.process_events(events)

    def start(self) -> None:
        self.backend.start()

    def shutdown(self) -> defer.Deferred:
        return defer.maybeDeferred(self.backend.shutdown)

    def __str__(self) -> str:
        return str(self.backend)


@dataclass(eq=False, repr=False)
class Auditing:
    """What the audit filters need: the policy, where events go and the audit metrics."""

    policy: Policy
    sink: Any
    metrics: AuditMetrics

    def start(self) -> None:
        self.sink.start()

    def shutdown(self) -> defer.Deferred:
        return self.sink.shutdown()


def build_auditing(audit: Any, metrics: AuditMetrics, reactor: Optional[IReactorTime] = None) -> Optional[Auditing]:
    """From the ``audit`` section of the configuration; None when nothing is audited
    (no policy, or no backend: upstream records nothing then either)."""
    if not audit.policy_file:
        if audit.log_path or audit.webhook_config_file:
            log.info("No audit policy file provided, no events will be recorded")
        return None
    try:
        policy = load_policy(audit.policy_file)
    except PolicyError as e:
        raise AuditConfigError(str(e)) from None
    backends: list[Any] = []
    if audit.log_path:
        backend = LogBackend(audit.log_path, audit.log_maxsize, audit.log_maxbackup, audit.log_maxage, reactor,
                             metrics=metrics)
        try:
            backend.check()
        except OSError as e:
            raise AuditConfigError(f"{audit.log_path}: cannot open the audit log: {e.strerror or e}") from None
        backends.append(backend)
    if audit.webhook_config_file:
        # the webhook's HTTP client loads only when configured: see kapiserver/machinery/go_http_client.py
        from kapiserver.audit.webhook_backend import WebhookBackend
        from kapiserver.auth.webhook_kubeconfig import WebhookConfigError, load_webhook_kubeconfig
        try:
            target = load_webhook_kubeconfig(audit.webhook_config_file)
        except WebhookConfigError as e:
            raise AuditConfigError(f"initializing audit webhook: {e}") from None
        backends.append(WebhookBackend(
            target, reactor, buffer_size=audit.webhook_batch_buffer_size,
            max_batch_size=audit.webhook_batch_max_size, max_batch_wait=audit.webhook_batch_max_wait_seconds,
            throttle_qps=audit.webhook_batch_throttle_qps, throttle_burst=audit.webhook_batch_throttle_burst,
            initial_backoff=audit.webhook_initial_backoff_seconds, metrics=metrics))
    if not backends:
        log.info("An audit policy but no audit backend: no events will be recorded")
        return None
    sink = backends[0] if len(backends) == 1 else UnionBackend(backends)
    log.info("Using audit backend: {backend}", backend=str(sink))
    return Auditing(policy, CountedBackend(sink, metrics), metrics)
