"""twistd's ``kapiserver`` subcommand: command-line options and the service maker.

Flags override keys of the configuration file; the mapping below is the one
place that says which flag sets which key.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

from twisted.application import service
from twisted.internet.interfaces import IReactorTime
from twisted.logger import FilteringLogObserver, LogLevel, LogLevelFilterPredicate, globalLogBeginner
from twisted.python import usage

from kapiserver.machinery import strconv
from kapiserver.machinery.duration import parse_go_duration
from kapiserver.server.config import Config, ConfigError, load_config, worker_count


def _list(value: str) -> list[str]:
    """A comma-separated flag value (upstream's string slices)."""
    return [s.strip() for s in value.split(",") if s.strip()]


def _seconds(value: str) -> int:
    """A Go duration (``24h``) as whole seconds."""
    seconds = parse_go_duration(value)
    if seconds is None:
        raise ValueError(value)
    return int(seconds)


def _duration(value: str) -> float:
    """A Go duration (``5m``, ``30s``; ``0`` as Go allows it) in seconds."""
    seconds = 0.0 if value == "0" else parse_go_duration(value)
    if seconds is None:
        raise ValueError(value)
    return seconds


# flag name -> (config key, converter)
_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "secure-port": ("secure_port", int),
    "bind-address": ("bind_address", str),
    "workers": ("workers", int),
    "advertise-address": ("advertise_address", str),
    "service-cluster-ip-range": ("service_cluster_ip_range", str),
    "goaway-chance": ("connections.goaway_chance", float),
    "cert-dir": ("cert_dir", str),
    "data-dir": ("data_dir", str),
    "storage-backend": ("storage.backend", str),
    "etcd-servers": ("storage.etcd.servers", _list),
    "etcd-prefix": ("storage.etcd.prefix", str),
    "etcd-cafile": ("storage.etcd.cafile", str),
    "etcd-certfile": ("storage.etcd.certfile", str),
    "etcd-keyfile": ("storage.etcd.keyfile", str),
    "anonymous-auth": ("authentication.anonymous", strconv.parse_bool),
    "client-ca-file": ("authentication.client_ca_file", str),
    "token-auth-file": ("authentication.token_auth_file", str),
    "enable-bootstrap-token-auth": ("authentication.enable_bootstrap_token_auth", strconv.parse_bool),
    "authentication-config": ("authentication.config_file", str),
    "api-audiences": ("authentication.api_audiences", _list),
    "service-account-signing-key-file": ("authentication.service_account.signing_key_file", str),
    "service-account-key-file": ("authentication.service_account.key_files", _list),
    "service-account-issuer": ("authentication.service_account.issuers", _list),
    "service-account-max-token-expiration": ("authentication.service_account.max_token_expiration_seconds",
                                             _seconds),
    "service-account-extend-token-expiration": ("authentication.service_account.extend_token_expiration", strconv.parse_bool),
    "service-account-lookup": ("authentication.service_account.lookup", strconv.parse_bool),
    "service-account-jwks-uri": ("authentication.service_account.jwks_uri", str),
    "requestheader-client-ca-file": ("authentication.requestheader.client_ca_file", str),
    "requestheader-allowed-names": ("authentication.requestheader.allowed_names", _list),
    "requestheader-username-headers": ("authentication.requestheader.username_headers", _list),
    "requestheader-group-headers": ("authentication.requestheader.group_headers", _list),
    "requestheader-extra-headers-prefix": ("authentication.requestheader.extra_headers_prefix", _list),
    "proxy-client-cert-file": ("proxy_client_cert_file", str),
    "proxy-client-key-file": ("proxy_client_key_file", str),
    "authorization-mode": ("authorization.modes", _list),
    "authorization-webhook-config-file": ("authorization.webhook.config_file", str),
    "authorization-webhook-version": ("authorization.webhook.version", str),
    "authorization-webhook-cache-authorized-ttl": ("authorization.webhook.cache_authorized_ttl_seconds",
                                                   _duration),
    "authorization-webhook-cache-unauthorized-ttl": ("authorization.webhook.cache_unauthorized_ttl_seconds",
                                                     _duration),
    "encryption-provider-config": ("encryption_provider_config", str),
    "cluster-signing-duration": ("controllers.cluster_signing_duration_seconds", _seconds),
    "audit-policy-file": ("audit.policy_file", str),
    "audit-log-path": ("audit.log_path", str),
    "audit-log-maxage": ("audit.log_maxage", int),
    "audit-log-maxbackup": ("audit.log_maxbackup", int),
    "audit-log-maxsize": ("audit.log_maxsize", int),
    "audit-webhook-config-file": ("audit.webhook_config_file", str),
    "audit-webhook-initial-backoff": ("audit.webhook_initial_backoff_seconds", _duration),
    "audit-webhook-batch-buffer-size": ("audit.webhook_batch_buffer_size", int),
    "audit-webhook-batch-max-size": ("audit.webhook_batch_max_size", int),
    "audit-webhook-batch-max-wait": ("audit.webhook_batch_max_wait_seconds", _duration),
    "audit-webhook-batch-throttle-qps": ("audit.webhook_batch_throttle_qps", float),
    "audit-webhook-batch-throttle-burst": ("audit.webhook_batch_throttle_burst", int),
    "enable-admission-plugins": ("admission.enable_plugins", _list),
    "disable-admission-plugins": ("admission.disable_plugins", _list),
    "admission-control-config-file": ("admission.config_file", str),
    "kubelet-client-certificate": ("kubelet.client_certificate", str),
    "kubelet-client-key": ("kubelet.client_key", str),
    "kubelet-certificate-authority": ("kubelet.certificate_authority", str),
    "kubelet-preferred-address-types": ("kubelet.preferred_address_types", _list),
    "kubelet-timeout": ("kubelet.timeout_seconds", _duration),
    "controllers": ("controllers.names", _list),
    "enable-priority-and-fairness": ("limits.enable_priority_and_fairness", strconv.parse_bool),
    "max-requests-inflight": ("limits.max_requests_inflight", int),
    "max-mutating-requests-inflight": ("limits.max_mutating_requests_inflight", int),
}



LOG_LEVELS = {"debug": LogLevel.debug, "info": LogLevel.info, "warn": LogLevel.warn,
           "error": LogLevel.error, "critical": LogLevel.critical}


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "Run the kapiserver Kubernetes API server. Flags override the configuration file."
    optParameters = [
        ["config", "c", None, "Configuration file (YAML), e.g. etc/apiserver.yaml; defaults apply without it."],
        ["secure-port", None, None, "HTTPS port (0 = any free port). Overrides secure_port."],
        ["bind-address", None, None, "IP address to listen on. Overrides bind_address."],
        ["workers", None, None, "Server processes sharing the listening address (0 = one per CPU). "
                                "Overrides workers."],
        ["advertise-address", None, None, "IP address the kubernetes Service's endpoints name for this server. "
                                          "Overrides advertise_address."],
        ["service-cluster-ip-range", None, None, "CIDR Services' cluster IPs are allocated from. Overrides "
                                                 "service_cluster_ip_range."],
        ["goaway-chance", None, None, "0 to 0.02: after this share of HTTP/2 requests, GOAWAY, so clients "
                                      "reconnect and spread over the workers. Overrides connections.goaway_chance."],
        ["cert-dir", None, None, "Directory of the CA and certificates. Overrides cert_dir."],
        ["data-dir", None, None, "Directory of the SQLite database. Overrides data_dir."],
        ["storage-backend", None, None, "Storage backend: sqlite or etcd3. Overrides storage.backend."],
        ["etcd-servers", None, None, "Comma-separated etcd URLs. Overrides storage.etcd.servers."],
        ["etcd-prefix", None, None, "Key prefix in etcd. Overrides storage.etcd.prefix."],
        ["etcd-cafile", None, None, "CA file for etcd. Overrides storage.etcd.cafile."],
        ["etcd-certfile", None, None, "Client certificate for etcd. Overrides storage.etcd.certfile."],
        ["etcd-keyfile", None, None, "Client key for etcd. Overrides storage.etcd.keyfile."],
        ["anonymous-auth", None, None, "true/false: serve requests without credentials as system:anonymous. "
                                       "Overrides authentication.anonymous."],
        ["client-ca-file", None, None, "CA bundle verifying client certificates. "
                                       "Overrides authentication.client_ca_file."],
        ["token-auth-file", None, None, "CSV file of static bearer tokens (token,user,uid,\"group1,group2\"). "
                                        "Overrides authentication.token_auth_file."],
        ["enable-bootstrap-token-auth", None, None, "true/false: bootstrap token Secrets in kube-system "
                                                    "authenticate (TLS bootstrapping). Overrides "
                                                    "authentication.enable_bootstrap_token_auth."],
        ["authentication-config", None, None, "AuthenticationConfiguration file (JWT authenticators). "
                                              "Overrides authentication.config_file."],
        ["api-audiences", None, None, "Comma-separated audiences of this API. Overrides authentication.api_audiences."],
        ["service-account-signing-key-file", None, None, "PEM private key signing ServiceAccount tokens. "
                                                         "Overrides authentication.service_account.signing_key_file."],
        ["service-account-key-file", None, None, "Comma-separated PEM files of keys verifying ServiceAccount "
                                                 "tokens. Overrides authentication.service_account.key_files."],
        ["service-account-issuer", None, None, "Comma-separated token issuers (the first signs). "
                                               "Overrides authentication.service_account.issuers."],
        ["service-account-max-token-expiration", None, None, "Longest TokenRequest lifetime (Go duration, e.g. "
                                                             "48h; 0 = none). Overrides authentication."
                                                             "service_account.max_token_expiration_seconds."],
        ["service-account-extend-token-expiration", None, None, "true/false. Overrides authentication."
                                                                "service_account.extend_token_expiration."],
        ["service-account-lookup", None, None, "true/false: check legacy tokens against storage. "
                                               "Overrides authentication.service_account.lookup."],
        ["service-account-jwks-uri", None, None, "jwks_uri of the OIDC discovery document. "
                                                 "Overrides authentication.service_account.jwks_uri."],
        ["requestheader-client-ca-file", None, None, "CA of the front proxy's client certificate. "
                                                     "Overrides authentication.requestheader.client_ca_file."],
        ["requestheader-allowed-names", None, None, "Comma-separated Common Names allowed for the front proxy. "
                                                    "Overrides authentication.requestheader.allowed_names."],
        ["requestheader-username-headers", None, None, "Comma-separated user name headers ('' turns front-proxy "
                                                       "authentication off). Overrides authentication."
                                                       "requestheader.username_headers."],
        ["requestheader-group-headers", None, None, "Comma-separated group headers. "
                                                    "Overrides authentication.requestheader.group_headers."],
        ["requestheader-extra-headers-prefix", None, None, "Comma-separated extra-header prefixes. Overrides "
                                                           "authentication.requestheader.extra_headers_prefix."],
        ["proxy-client-cert-file", None, None, "Client certificate presented to extension API servers. "
                                               "Overrides proxy_client_cert_file."],
        ["proxy-client-key-file", None, None, "Its key. Overrides proxy_client_key_file."],
        ["authorization-mode", None, None, "Comma-separated authorizers tried in order: RBAC, Webhook, "
         "AlwaysAllow, AlwaysDeny. Overrides authorization.modes."],
        ["authorization-webhook-config-file", None, None, "kubeconfig-format file naming the authorization "
         "webhook. Overrides authorization.webhook.config_file."],
        ["authorization-webhook-version", None, None, "SubjectAccessReview version of the webhook (v1, v1beta1). "
         "Overrides authorization.webhook.version."],
        ["authorization-webhook-cache-authorized-ttl", None, None, "How long to cache allowing answers (e.g. 5m). "
         "Overrides authorization.webhook.cache_authorized_ttl_seconds."],
        ["authorization-webhook-cache-unauthorized-ttl", None, None, "How long to cache other answers (e.g. 30s). "
         "Overrides authorization.webhook.cache_unauthorized_ttl_seconds."],
        ["encryption-provider-config", None, None, "EncryptionConfiguration file: resources encrypted at rest. "
                                                   "Overrides encryption_provider_config."],
        ["cluster-signing-duration", None, None, "Longest certificate the CSR signers issue (Go duration, e.g. "
                                                 "8760h). Overrides controllers.cluster_signing_duration_seconds."],
        ["audit-policy-file", None, None, "Audit policy (audit.k8s.io/v1 Policy). Overrides audit.policy_file."],
        ["audit-log-path", None, None, "Audit log file ('-' = standard output). Overrides audit.log_path."],
        ["audit-log-maxage", None, None, "Days to keep rotated audit logs. Overrides audit.log_maxage."],
        ["audit-log-maxbackup", None, None, "Rotated audit logs to keep. Overrides audit.log_maxbackup."],
        ["audit-log-maxsize", None, None, "Megabytes before the audit log rotates. Overrides audit.log_maxsize."],
        ["audit-webhook-config-file", None, None, "Kubeconfig of the audit webhook. Overrides "
                                                  "audit.webhook_config_file."],
        ["audit-webhook-initial-backoff", None, None, "Wait before the first retry of a failed batch (Go duration). "
                                                      "Overrides audit.webhook_initial_backoff_seconds."],
        ["audit-webhook-batch-buffer-size", None, None, "Events buffered for the webhook before new ones are "
                                                        "dropped. Overrides audit.webhook_batch_buffer_size."],
        ["audit-webhook-batch-max-size", None, None, "Most events in one webhook batch. Overrides "
                                                     "audit.webhook_batch_max_size."],
        ["audit-webhook-batch-max-wait", None, None, "Longest wait before a partial batch is sent (Go duration). "
                                                     "Overrides audit.webhook_batch_max_wait_seconds."],
        ["audit-webhook-batch-throttle-qps", None, None, "Batches per second at most. Overrides "
                                                         "audit.webhook_batch_throttle_qps."],
        ["audit-webhook-batch-throttle-burst", None, None, "Batches sent at once after a quiet spell. Overrides "
                                                           "audit.webhook_batch_throttle_burst."],
        ["enable-admission-plugins", None, None, "Comma-separated admission plugins to enable besides the default "
                                                 "ones. Overrides admission.enable_plugins."],
        ["disable-admission-plugins", None, None, "Comma-separated default admission plugins to disable. Overrides "
                                                  "admission.disable_plugins."],
        ["admission-control-config-file", None, None, "AdmissionConfiguration file with plugin settings. Overrides "
                                                      "admission.config_file."],
        ["kubelet-client-certificate", None, None, "Client certificate presented to kubelets. Overrides "
                                                   "kubelet.client_certificate."],
        ["kubelet-client-key", None, None, "Its key. Overrides kubelet.client_key."],
        ["kubelet-certificate-authority", None, None, "CA bundle kubelets' serving certificates are verified "
                                                      "against. Overrides kubelet.certificate_authority."],
        ["kubelet-preferred-address-types", None, None, "Comma-separated Node address types to dial kubelets at, "
                                                        "in order. Overrides kubelet.preferred_address_types."],
        ["kubelet-timeout", None, None, "Longest wait to connect to a kubelet (Go duration). Overrides "
                                        "kubelet.timeout_seconds."],
        ["controllers", None, None, "Which of kube-controller-manager's controllers run in process, as its "
                                    "--controllers ('*', 'name', '-name'; '' = none, when a real "
                                    "kube-controller-manager runs). Overrides controllers.names."],
        ["enable-priority-and-fairness", None, None, "true/false: API Priority and Fairness (false: max-in-flight). "
                                                     "Overrides limits.enable_priority_and_fairness."],
        ["max-requests-inflight", None, None, "Read-only requests at once (with APF: part of the server's "
                                              "concurrency). Overrides limits.max_requests_inflight."],
        ["max-mutating-requests-inflight", None, None, "Mutating requests at once (with APF: part of the server's "
                                                       "concurrency). Overrides "
                                                       "limits.max_mutating_requests_inflight."],
    ]

    def overrides(self) -> dict[str, Any]:
        """The configuration keys set on the command line."""
        out: dict[str, Any] = {}
        for flag, (key, convert) in _FLAGS.items():
            value = self[flag]
            if value is None:
                continue
            try:
                out[key] = convert(value)
            except ValueError:
                raise usage.UsageError(f"--{flag}: invalid value {value!r}") from None
        return out


def _apply_log_level(level: str) -> None:
    """Filter every observer twistd will install (it starts logging after makeService)."""
    predicate = LogLevelFilterPredicate(defaultLogLevel=LOG_LEVELS[level])
    begin = globalLogBeginner.beginLoggingTo

    def filtered(observers, *args, **kwargs):
        return begin([FilteringLogObserver(o, [predicate]) for o in observers], *args, **kwargs)
    globalLogBeginner.beginLoggingTo = filtered  # type: ignore[method-assign]


def _die(message: str) -> None:
    sys.stderr.write(f"kapiserver: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)


def build_service(config: Config, reactor: Optional[IReactorTime] = None, install_signal_handlers: bool = True,
                  exit_on_failure: bool = True) -> service.MultiService:
    """Build the whole server: one process, or the supervisor of ``workers`` processes; certificates
    are prepared now (before the reactor runs).

    Raises StartupError (one-line message) if the certificates cannot be loaded.
    """
    from kapiserver.app.service import KapiService, load_certificates
    bundle = load_certificates(config)
    top = service.MultiService()
    count = worker_count(config)
    if count > 1:
        from kapiserver.app.workers import WorkerSupervisor
        WorkerSupervisor(config, bundle, count, reactor, install_signal_handlers=install_signal_handlers,
                         exit_on_failure=exit_on_failure).setServiceParent(top)
    else:
        KapiService(config, bundle, reactor, install_signal_handlers=install_signal_handlers,
                    exit_on_failure=exit_on_failure).setServiceParent(top)
    return top


def makeService(options: Options) -> service.IService:
    """Load and validate the configuration, then build the server; exits 1 with one line on error."""
    from kapiserver.server import gc_tuning
    gc_tuning.begin_startup()  # before the server's modules are imported
    from kapiserver.app.service import StartupError
    try:
        config = load_config(options["config"], options.overrides())
    except (ConfigError, usage.UsageError) as e:
        _die(str(e))
    if config.log_level != "info":
        _apply_log_level(config.log_level)
    try:
        return build_service(config)
    except StartupError as e:
        _die(str(e))
    raise AssertionError("unreachable")
