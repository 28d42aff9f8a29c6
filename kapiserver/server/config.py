"""The server's configuration: a typed dataclass tree loaded from YAML.

Every key of ``etc/apiserver.yaml`` is a field below :class:`Config`; a key the
tree does not know, or a value of the wrong type, is a :class:`ConfigError`
whose message is one line naming the file and the dotted key, so an operator
sees at once what to fix.  Command-line flags are applied on top as dotted-key
overrides.  Relative paths are resolved against the current working directory
when the configuration is loaded.
"""
from __future__ import annotations

import dataclasses
import ipaddress
import os
import typing
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from kapiserver.server.controller_names import check_selection


class ConfigError(Exception):
    """An invalid configuration; ``str()`` is the one line to show the operator."""


STORAGE_BACKENDS = ("sqlite", "etcd3")
MAX_WORKERS = 64
AUTHORIZATION_MODES = ("AlwaysAllow", "AlwaysDeny", "Node", "RBAC", "Webhook")
# upstream modes kapiserver does not implement (no ABAC policy files)
UNSUPPORTED_AUTHORIZATION_MODES = ("ABAC",)
WEBHOOK_VERSIONS = ("v1", "v1beta1")
LOG_LEVELS = ("debug", "info", "warn", "error", "critical")


@dataclass
class TLSConfig:
    """The ``tls`` section."""
    extra_sans: list[str] = field(default_factory=list)


DEFAULT_SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


@dataclass
class ServiceAccountConfig:
    """The ``authentication.service_account`` section."""
    # PEM private key (RSA or ECDSA) signing service-account tokens; "" = <cert_dir>/sa.key, generated
    signing_key_file: str = ""
    # more PEM files of public or private keys that verify tokens (the signing key always does)
    key_files: list[str] = field(default_factory=list)
    # the "iss" of issued tokens (the first); tokens of any of them are accepted
    issuers: list[str] = field(default_factory=lambda: [DEFAULT_SERVICE_ACCOUNT_ISSUER])
    # longest lifetime a TokenRequest gets (0 = no limit beyond 2^32 s)
    max_token_expiration_seconds: int = 0
    # pod-bound tokens asking for 3607 s (kubelet's projected default) live a year, warning after 3607 s
    extend_token_expiration: bool = True
    # legacy Secret-based tokens must match a stored Secret and ServiceAccount
    lookup: bool = True
    # jwks_uri of the OIDC discovery document; "" = https://<address>:<port>/openid/v1/jwks
    jwks_uri: str = ""


@dataclass
class RequestHeaderConfig:
    """The ``authentication.requestheader`` section."""
    # CA the front proxy's client certificate must chain to; "" = <cert_dir>/front-proxy-ca.crt, generated
    client_ca_file: str = ""
    # Common Names allowed for that certificate ([] = any certificate from the CA)
    allowed_names: list[str] = field(default_factory=lambda: ["front-proxy-client"])
    # [] turns front-proxy authentication off
    username_headers: list[str] = field(default_factory=lambda: ["X-Remote-User"])
    group_headers: list[str] = field(default_factory=lambda: ["X-Remote-Group"])
    extra_headers_prefix: list[str] = field(default_factory=lambda: ["X-Remote-Extra-"])


@dataclass
class AuthenticationConfig:
    """The ``authentication`` section."""
    # requests without credentials are system:anonymous (what they may do is up to the authorizer)
    anonymous: bool = True
    # CA bundle client certificates are verified against; "" = <cert_dir>/ca.crt
    client_ca_file: str = ""
    # static bearer tokens: CSV lines token,user,uid,"group1,group2"
    token_auth_file: str = ""
    # bootstrap tokens (kube-system Secrets of type bootstrap.kubernetes.io/token) authenticate
    # as system:bootstrap:<id>, for TLS bootstrapping (upstream's --enable-bootstrap-token-auth)
    enable_bootstrap_token_auth: bool = False
    # audiences of this API; [] = the service-account issuers
    api_audiences: list[str] = field(default_factory=list)
    # an AuthenticationConfiguration (apiserver.config.k8s.io) file: JWT authenticators of OIDC issuers
    config_file: str = ""
    service_account: ServiceAccountConfig = field(default_factory=ServiceAccountConfig)
    requestheader: RequestHeaderConfig = field(default_factory=RequestHeaderConfig)


@dataclass
class AuthorizationWebhookConfig:
    """The ``authorization.webhook`` section."""
    # kubeconfig-format file naming the webhook (upstream's --authorization-webhook-config-file)
    config_file: str = ""
    # SubjectAccessReview version sent and expected (--authorization-webhook-version)
    version: str = "v1"
    # how long answers are cached (--authorization-webhook-cache-authorized-ttl / -unauthorized-ttl)
    cache_authorized_ttl_seconds: float = 300.0
    cache_unauthorized_ttl_seconds: float = 30.0


@dataclass
class AuthorizationConfig:
    """The ``authorization`` section."""
    # tried in order, the first allow or deny decides (upstream's --authorization-mode);
    # members of system:masters may always do everything
    modes: list[str] = field(default_factory=lambda: ["RBAC"])
    webhook: AuthorizationWebhookConfig = field(default_factory=AuthorizationWebhookConfig)


@dataclass
class SQLiteConfig:
    """The ``storage.sqlite`` section."""
    compaction_interval_seconds: int = 300
    # revisions always kept besides those of the last interval (upstream keeps none)
    compaction_retain_revisions: int = 0


@dataclass
class EtcdConfig:
    """The ``storage.etcd`` section."""
    servers: list[str] = field(default_factory=lambda: ["http://127.0.0.1:2379"])
    prefix: str = "/registry"
    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""
    compaction_interval_seconds: int = 300
    # Reconnect a watch stream that sent nothing (not even a progress
    # notification) for this long; 0 = never.  About 3x etcd's
    # --experimental-watch-progress-notify-interval.
    watch_silence_timeout_seconds: float = 0.0
    # Consistent reads (GET and LIST at the latest revision) from the watch cache after a
    # progress request on its watch (kube-apiserver's ConsistentListFromCache), when etcd is
    # one member of a release that answers those in order (3.4.31+, 3.5.13+); false sends
    # every consistent read to etcd.
    consistent_reads_from_cache: bool = True


@dataclass
class StorageConfig:
    """The ``storage`` section."""
    backend: str = "sqlite"
    sqlite: SQLiteConfig = field(default_factory=SQLiteConfig)
    etcd: EtcdConfig = field(default_factory=EtcdConfig)
    event_ttl_seconds: int = 3600
    watch_cache: bool = True


@dataclass
class LimitsConfig:
    """The ``limits`` section."""
    # API Priority and Fairness (--enable-priority-and-fairness); when false, max-in-flight
    # limits read-only and mutating requests separately.  Either way the two limits below
    # size the server: APF shares their sum among its priority levels.
    enable_priority_and_fairness: bool = True
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    request_timeout_seconds: int = 60
    max_request_body_bytes: int = 3 * 1024 * 1024


@dataclass
class WatchConfig:
    """The ``watch`` section."""
    bookmark_interval_seconds: float = 60


@dataclass
class MemoryConfig:
    """The ``memory`` section."""
    # Give the heap memory freed since back to the system this often (glibc's malloc_trim,
    # server/heap_trim.py); 0 = never.
    heap_trim_interval_seconds: float = 60


@dataclass
class ShutdownConfig:
    """The ``shutdown`` section."""
    # upstream's --shutdown-delay-duration: keep serving this long after SIGTERM (with /readyz
    # failing) so load balancers notice before the listener closes
    delay_seconds: float = 0
    drain_seconds: float = 10


@dataclass
class ConnectionsConfig:
    """What one client connection may hold, and for how long (connection hygiene)."""
    # the TLS handshake must end this long after the connection was accepted
    tls_handshake_timeout_seconds: float = 10
    # a request line and its headers must arrive within this long of their first byte
    # (the first request: of the handshake's end); upstream's ReadHeaderTimeout
    request_header_timeout_seconds: float = 10
    # a keep-alive connection with no request (HTTP/2: no stream) is closed after this long
    idle_timeout_seconds: float = 90
    # request line + headers (Go's MaxHeaderBytes, which kube-apiserver sets to 1 MiB); more is 431
    max_header_bytes: int = 1 << 20
    # open connections in total and from one client address; more are closed when accepted
    max_connections: int = 10000
    max_connections_per_address: int = 1000
    # SETTINGS_MAX_CONCURRENT_STREAMS (upstream's --http2-max-streams-per-connection default)
    http2_max_streams_per_connection: int = 100
    # an HTTP/2 connection silent this long is sent a PING; without an answer within the
    # timeout it is closed (client-go's ReadIdleTimeout / PingTimeout, on the server side)
    http2_ping_interval_seconds: float = 30
    http2_ping_timeout_seconds: float = 15
    # upstream's --goaway-chance: after this share of HTTP/2 requests (0 to 0.02) the connection is
    # sent GOAWAY, so its client reconnects and the connections spread again over the workers (or
    # the servers behind a load balancer); the requests under way finish. 0 = never
    goaway_chance: float = 0


@dataclass
class ControllersConfig:
    """The ``controllers`` section."""
    # false: none of kube-controller-manager's controllers run in process (a real one does their work);
    # the API server's own (the kubernetes Service, CRD status, identity lease...) always run
    enabled: bool = True
    # which of them, as kube-controller-manager's --controllers: "*", "name", "-name"
    names: list[str] = field(default_factory=lambda: ["*"])
    # kube-controller-manager's --leader-elect* flags and defaults
    leader_elect: bool = True
    leader_elect_lease_duration_seconds: float = 15
    leader_elect_renew_deadline_seconds: float = 10
    leader_elect_retry_period_seconds: float = 2
    leader_elect_resource_name: str = "kapiserver-controllers"
    leader_elect_resource_namespace: str = "kube-system"
    # kube-controller-manager's --cluster-signing-duration: the longest certificate the CSR
    # signers issue (a request's spec.expirationSeconds may ask for less, never for more)
    cluster_signing_duration_seconds: int = 365 * 24 * 3600


@dataclass
class AuditConfig:
    """The ``audit`` section."""
    # kube-apiserver's --audit-* flags and defaults; no policy file = no auditing
    policy_file: str = ""
    log_path: str = ""                  # "-" = standard output
    log_maxage: int = 0                 # days to keep rotated files (0 = no limit)
    log_maxbackup: int = 0              # rotated files to keep (0 = no limit)
    log_maxsize: int = 0                # megabytes before rotation (0 = 100, as upstream's default)
    webhook_config_file: str = ""       # kubeconfig naming the webhook
    webhook_initial_backoff_seconds: float = 10
    webhook_batch_buffer_size: int = 10000
    webhook_batch_max_size: int = 400
    webhook_batch_max_wait_seconds: float = 30
    webhook_batch_throttle_qps: float = 10
    webhook_batch_throttle_burst: int = 15


@dataclass
class AdmissionConfig:
    """The ``admission`` section."""
    # upstream's --enable-admission-plugins / --disable-admission-plugins: added to / removed
    # from the default set; the chain runs them in upstream's order whatever order is given
    enable_plugins: list[str] = field(default_factory=list)
    disable_plugins: list[str] = field(default_factory=list)
    # upstream's --admission-control-config-file: an AdmissionConfiguration with per-plugin settings
    config_file: str = ""


KUBELET_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")


@dataclass
class KubeletConfig:
    """How this server reaches kubelets (logs, exec, attach, port-forward, nodes/proxy):
    kube-apiserver's --kubelet-* flags and defaults."""
    # the client certificate presented to kubelets (--kubelet-client-certificate/-key);
    # "" = <cert_dir>/apiserver-kubelet-client.crt and .key, generated from the CA
    # (O=system:masters, as kubeadm's apiserver-kubelet-client)
    client_certificate: str = ""
    client_key: str = ""
    # CA bundle the kubelets' serving certificates are verified against
    # (--kubelet-certificate-authority); "" = not verified, as upstream without the flag
    certificate_authority: str = ""
    # which of a Node's status.addresses to connect to, the first type found wins
    preferred_address_types: list[str] = field(default_factory=lambda: list(KUBELET_ADDRESS_TYPES))
    # connecting to a kubelet (and its answer's head) must take no longer (--kubelet-timeout)
    timeout_seconds: float = 5
    # the kubelet's port when its Node does not report status.daemonEndpoints.kubeletEndpoint
    port: int = 10250


@dataclass
class TestingConfig:
    """The ``testing`` section."""
    # Serve POST /debug/kapiserver/snapshot and /debug/kapiserver/reset (the SQLite store back to a
    # snapshot, per-test isolation; docs/testing.md).  Off: those paths answer 404.
    enable_reset: bool = False


@dataclass
class Config:
    """The configuration file's top level (docs/configuration.md); flags override its keys."""
    secure_port: int = 6443
    bind_address: str = "127.0.0.1"
    # Server processes behind the one listening address (0 = one per CPU); see docs/architecture.md.
    workers: int = 0
    # The address in the kubernetes Service's endpoints ("" = bind_address, or the
    # default-route interface's when that is 0.0.0.0 / ::), as --advertise-address.
    advertise_address: str = ""
    cert_dir: str = "var/certs"
    data_dir: str = "var/data"
    admin_kubeconfig: str = "var/admin.kubeconfig"
    # the client certificate this server presents to extension API servers (aggregation);
    # "" = <cert_dir>/front-proxy-client.crt and .key, issued by the front-proxy CA
    proxy_client_cert_file: str = ""
    proxy_client_key_file: str = ""
    tls: TLSConfig = field(default_factory=TLSConfig)
    authentication: AuthenticationConfig = field(default_factory=AuthenticationConfig)
    authorization: AuthorizationConfig = field(default_factory=AuthorizationConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    watch: WatchConfig = field(default_factory=WatchConfig)
    shutdown: ShutdownConfig = field(default_factory=ShutdownConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    connections: ConnectionsConfig = field(default_factory=ConnectionsConfig)
    controllers: ControllersConfig = field(default_factory=ControllersConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    # apiserver.config.k8s.io/v1 EncryptionConfiguration (--encryption-provider-config); "" = no encryption
    encryption_provider_config: str = ""
    admission: AdmissionConfig = field(default_factory=AdmissionConfig)
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    testing: TestingConfig = field(default_factory=TestingConfig)
    log_level: str = "info"
    # Cluster IPs of Services come from this range (upstream's --service-cluster-ip-range,
    # whose default this is).
    service_cluster_ip_range: str = "10.0.0.0/24"
    # Where the configuration came from (for messages); not a YAML key.
    source: str = field(default="<defaults>", compare=False, metadata={"internal": True})


# Keys holding file system paths: made absolute against the working directory.
_PATH_KEYS = ("cert_dir", "data_dir", "admin_kubeconfig", "proxy_client_cert_file", "proxy_client_key_file",
              "storage.etcd.cafile", "storage.etcd.certfile", "storage.etcd.keyfile",
              "authentication.client_ca_file", "authentication.token_auth_file", "authentication.config_file",
              "authentication.service_account.signing_key_file", "authentication.service_account.key_files",
              "authentication.requestheader.client_ca_file",
              "authorization.webhook.config_file",
              "audit.policy_file", "audit.webhook_config_file", "encryption_provider_config",
              "admission.config_file", "kubelet.client_certificate", "kubelet.client_key",
              "kubelet.certificate_authority")
# Integer keys that must be > 0 (the rest of the integers must be >= 0).
_POSITIVE_KEYS = ("limits.max_requests_inflight", "limits.max_mutating_requests_inflight",
                  "limits.request_timeout_seconds", "limits.max_request_body_bytes",
                  "watch.bookmark_interval_seconds", "storage.event_ttl_seconds",
                  "storage.sqlite.compaction_interval_seconds", "storage.etcd.compaction_interval_seconds",
                  "connections.tls_handshake_timeout_seconds", "connections.request_header_timeout_seconds",
                  "connections.idle_timeout_seconds", "connections.max_header_bytes", "connections.max_connections",
                  "connections.max_connections_per_address", "connections.http2_max_streams_per_connection",
                  "connections.http2_ping_interval_seconds", "connections.http2_ping_timeout_seconds",
                  "audit.webhook_batch_buffer_size", "audit.webhook_batch_max_size",
                  "audit.webhook_batch_max_wait_seconds", "audit.webhook_batch_throttle_qps",
                  "audit.webhook_batch_throttle_burst", "kubelet.timeout_seconds", "kubelet.port")


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is list:
        return "a list of strings"
    return {int: "an integer", float: "a number", str: "a string", bool: "a boolean (true/false)"}.get(
        tp, getattr(tp, "__name__", str(tp)))


def _convert(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the field type ``tp``; never coerce silently (no "1" for 1)."""
    if typing.get_origin(tp) is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: must be {_type_name(tp)}, got {value!r}")
        return list(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: must be {_type_name(tp)}, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: must be {_type_name(tp)}, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: must be {_type_name(tp)}, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: must be {_type_name(tp)}, got {value!r}")
        return value
    raise AssertionError(f"unsupported config type {tp!r}")


def _fill(obj: Any, data: Any, source: str, prefix: str) -> None:
    """Copy a YAML mapping onto the dataclass ``obj``, rejecting unknown keys and bad types."""
    section = prefix.rstrip(".") or "the top level"
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: {section} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(type(obj))
    known = {f.name: f for f in dataclasses.fields(obj) if not f.metadata.get("internal")}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if not isinstance(key, str) or key not in known:
            raise ConfigError(f"{source}: unknown key '{dotted}'")
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            if value is None:
                continue
            _fill(getattr(obj, key), value, source, dotted + ".")
        else:
            setattr(obj, key, _convert(value, tp, f"{source}: key '{dotted}'"))


def config_to_dict(config: Config) -> dict[str, Any]:
    """The YAML keys of ``config`` (what :func:`config_from_dict` reads back into an equal Config)."""
    def keys(obj: Any) -> dict[str, Any]:
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if not f.metadata.get("internal")}
        return {name: keys(value) if dataclasses.is_dataclass(value) else value for name, value in values.items()}
    return keys(config)


def worker_count(config: Config) -> int:
    """How many server processes ``config`` asks for."""
    return config.workers or os.cpu_count() or 1


def _holder(config: Config, dotted: str) -> tuple[Any, str]:
    """The object holding ``dotted``'s last part, and that part."""
    obj: Any = config
    *path, name = dotted.split(".")
    for part in path:
        obj = getattr(obj, part)
    return obj, name


def _lookup(config: Config, dotted: str) -> tuple[Any, str, Any]:
    """:func:`_holder`, and the part's declared type (which evaluates the holder's annotations:
    asked for only where a value is converted, not for each key a start checks)."""
    obj, name = _holder(config, dotted)
    return obj, name, typing.get_type_hints(type(obj))[name]


def _validate(config: Config) -> None:
    src = config.source
    if not 0 <= config.secure_port <= 65535:
        raise ConfigError(f"{src}: key 'secure_port': must be between 0 and 65535, got {config.secure_port}")
    try:
        ipaddress.ip_address(config.bind_address)
    except ValueError:
        raise ConfigError(f"{src}: key 'bind_address': must be an IP address, got {config.bind_address!r}") from None
    if not 0 <= config.workers <= MAX_WORKERS:
        raise ConfigError(f"{src}: key 'workers': must be between 0 (one per CPU) and {MAX_WORKERS}, "
                          f"got {config.workers}")
    if config.storage.backend not in STORAGE_BACKENDS:
        raise ConfigError(f"{src}: key 'storage.backend': must be one of {', '.join(STORAGE_BACKENDS)}, "
                          f"got {config.storage.backend!r}")
    if config.log_level not in LOG_LEVELS:
        raise ConfigError(f"{src}: key 'log_level': must be one of {', '.join(LOG_LEVELS)}, "
                          f"got {config.log_level!r}")
    for dotted in _POSITIVE_KEYS:
        obj, name = _holder(config, dotted)
        value = getattr(obj, name)
        if value <= 0:
            raise ConfigError(f"{src}: key '{dotted}': must be greater than 0, got {value}")
    if config.testing.enable_reset and config.storage.backend != "sqlite":
        raise ConfigError(f"{src}: key 'testing.enable_reset': needs storage.backend sqlite "
                          f"(the {config.storage.backend} backend cannot restore a snapshot)")
    if config.storage.sqlite.compaction_retain_revisions < 0:
        raise ConfigError(f"{src}: key 'storage.sqlite.compaction_retain_revisions': must not be negative")
    if config.shutdown.drain_seconds < 0:
        raise ConfigError(f"{src}: key 'shutdown.drain_seconds': must not be negative")
    if config.shutdown.delay_seconds < 0:
        raise ConfigError(f"{src}: key 'shutdown.delay_seconds': must not be negative")
    if config.memory.heap_trim_interval_seconds < 0:
        raise ConfigError(f"{src}: key 'memory.heap_trim_interval_seconds': must not be negative")
    if config.connections.max_connections_per_address > config.connections.max_connections:
        raise ConfigError(f"{src}: key 'connections.max_connections_per_address': must not exceed "
                          f"connections.max_connections ({config.connections.max_connections})")
    if config.storage.etcd.watch_silence_timeout_seconds < 0:
        raise ConfigError(f"{src}: key 'storage.etcd.watch_silence_timeout_seconds': must not be negative "
                          f"(0 turns the check off)")
    etcd = config.storage.etcd
    if config.storage.backend == "etcd3":
        if not etcd.servers:
            raise ConfigError(f"{src}: key 'storage.etcd.servers': at least one server is required "
                              f"when storage.backend is etcd3")
        for server in etcd.servers:
            if not server.startswith(("http://", "https://")):
                raise ConfigError(f"{src}: key 'storage.etcd.servers': {server!r} is not an http:// or "
                                  f"https:// URL")
        if bool(etcd.certfile) != bool(etcd.keyfile):
            raise ConfigError(f"{src}: keys 'storage.etcd.certfile' and 'storage.etcd.keyfile' must be set together")
    if not etcd.prefix.startswith("/"):
        raise ConfigError(f"{src}: key 'storage.etcd.prefix': must start with '/', got {etcd.prefix!r}")
    if config.advertise_address:
        try:
            advertised = ipaddress.ip_address(config.advertise_address)
        except ValueError:
            raise ConfigError(f"{src}: key 'advertise_address': must be an IP address, "
                              f"got {config.advertise_address!r}") from None
        if advertised.is_unspecified:
            raise ConfigError(f"{src}: key 'advertise_address': must be a reachable IP address, "
                              f"not {config.advertise_address}")
    try:
        network = ipaddress.ip_network(config.service_cluster_ip_range, strict=False)
    except ValueError:
        raise ConfigError(f"{src}: key 'service_cluster_ip_range': must be a CIDR such as 10.0.0.0/24, "
                          f"got {config.service_cluster_ip_range!r}") from None
    # upstream's limits for the allocation bitmap: at most 2^20 addresses, and room for one Service
    smallest = 12 if network.version == 4 else 108
    if network.prefixlen < smallest:
        raise ConfigError(f"{src}: key 'service_cluster_ip_range': {network} is too large; for "
                          f"{network.max_prefixlen}-bit addresses, the mask must be >= {smallest}")
    if network.prefixlen > network.max_prefixlen - 2:
        raise ConfigError(f"{src}: key 'service_cluster_ip_range': {network} is too small to hold a Service "
                          f"(at most /{network.max_prefixlen - 2})")
    ctl = config.controllers
    if not (ctl.leader_elect_lease_duration_seconds > ctl.leader_elect_renew_deadline_seconds
            > 1.2 * ctl.leader_elect_retry_period_seconds > 0):
        raise ConfigError(f"{src}: keys 'controllers.leader_elect_*': the lease duration must be greater than the "
                          f"renew deadline, and the renew deadline greater than 1.2 x the retry period (> 0)")
    if not ctl.leader_elect_resource_name or not ctl.leader_elect_resource_namespace:
        raise ConfigError(f"{src}: keys 'controllers.leader_elect_resource_name' and "
                          f"'controllers.leader_elect_resource_namespace' must not be empty")
    _validate_authorization(config)
    _validate_kubelet(config)
    if not 0 <= config.connections.goaway_chance <= 0.02:
        raise ConfigError(f"{src}: key 'connections.goaway_chance': can not be less than 0 or greater than 0.02, "
                          f"got {config.connections.goaway_chance}")
    if config.controllers.cluster_signing_duration_seconds < 600:
        raise ConfigError(f"{src}: key 'controllers.cluster_signing_duration_seconds': must be at least 600 "
                          f"(10 minutes), got {config.controllers.cluster_signing_duration_seconds}")
    audit = config.audit
    for name in ("log_maxage", "log_maxbackup", "log_maxsize"):
        value = getattr(audit, name)
        if value < 0:
            raise ConfigError(f"{src}: key 'audit.{name}': can't be a negative number, got {value}")
    if audit.webhook_initial_backoff_seconds < 0:
        raise ConfigError(f"{src}: key 'audit.webhook_initial_backoff_seconds': must not be negative")
    from kapiserver.admission.plugins import validate_names
    problems = validate_names(config.admission.enable_plugins, config.admission.disable_plugins)
    if problems:
        raise ConfigError(f"{src}: keys 'admission.enable_plugins' / 'admission.disable_plugins': {problems[0]}")
    unknown = check_selection(ctl.names)
    if unknown:
        raise ConfigError(f"{src}: key 'controllers.names': {unknown}")
    for san in config.tls.extra_sans:
        if not san or any(c.isspace() for c in san):
            raise ConfigError(f"{src}: key 'tls.extra_sans': {san!r} is not a DNS name or IP address")
    _validate_authentication(config)


def _validate_authentication(config: Config) -> None:
    src = config.source
    sa = config.authentication.service_account
    if not sa.issuers:
        raise ConfigError(f"{src}: key 'authentication.service_account.issuers': at least one issuer is required")
    seen: set[str] = set()
    for issuer in sa.issuers:
        if not issuer:
            raise ConfigError(f"{src}: key 'authentication.service_account.issuers': an issuer must not be empty")
        if ":" in issuer and not urllib.parse.urlsplit(issuer).scheme:
            raise ConfigError(f"{src}: key 'authentication.service_account.issuers': {issuer!r} contains a ':' "
                              f"but is not a valid URL")
        if issuer in seen:
            raise ConfigError(f"{src}: key 'authentication.service_account.issuers': {issuer!r} is listed twice")
        seen.add(issuer)
    if any(not path for path in sa.key_files):
        raise ConfigError(f"{src}: key 'authentication.service_account.key_files': a file name must not be empty")
    limit = sa.max_token_expiration_seconds
    if limit and not 3600 <= limit <= 1 << 32:
        raise ConfigError(f"{src}: key 'authentication.service_account.max_token_expiration_seconds': must be "
                          f"0 (no limit) or between 3600 (1 hour) and 2^32 seconds, got {limit}")
    if sa.jwks_uri and urllib.parse.urlsplit(sa.jwks_uri).scheme != "https":
        raise ConfigError(f"{src}: key 'authentication.service_account.jwks_uri': must be an https URL, "
                          f"got {sa.jwks_uri!r}")
    if bool(config.proxy_client_cert_file) != bool(config.proxy_client_key_file):
        raise ConfigError(f"{src}: keys 'proxy_client_cert_file' and 'proxy_client_key_file' must be set together")
    for dotted in ("username_headers", "group_headers", "extra_headers_prefix", "allowed_names"):
        for value in getattr(config.authentication.requestheader, dotted):
            if not value.strip():
                raise ConfigError(f"{src}: key 'authentication.requestheader.{dotted}': values must not be empty")


def _validate_kubelet(config: Config) -> None:
    src, kubelet = config.source, config.kubelet
    unknown = [t for t in kubelet.preferred_address_types if t not in KUBELET_ADDRESS_TYPES]
    if unknown or not kubelet.preferred_address_types:
        raise ConfigError(f"{src}: key 'kubelet.preferred_address_types': must be a non-empty list of "
                          f"{', '.join(KUBELET_ADDRESS_TYPES)}, got {kubelet.preferred_address_types!r}")
    if bool(kubelet.client_certificate) != bool(kubelet.client_key):
        raise ConfigError(f"{src}: keys 'kubelet.client_certificate' and 'kubelet.client_key' must be set together")
    if kubelet.port > 65535:
        raise ConfigError(f"{src}: key 'kubelet.port': must be between 1 and 65535, got {kubelet.port}")


def _validate_authorization(config: Config) -> None:
    """Upstream's checks of --authorization-mode and the webhook flags."""
    src, authz = config.source, config.authorization
    if not authz.modes:
        raise ConfigError(f"{src}: key 'authorization.modes': at least one authorization mode must be given")
    for mode in authz.modes:
        if mode in UNSUPPORTED_AUTHORIZATION_MODES:
            raise ConfigError(f"{src}: key 'authorization.modes': mode {mode!r} is not supported by kapiserver "
                              f"(supported: {', '.join(AUTHORIZATION_MODES)})")
        if mode not in AUTHORIZATION_MODES:
            raise ConfigError(f"{src}: key 'authorization.modes': authorization-mode {mode!r} is not a valid mode "
                              f"(one of {', '.join(AUTHORIZATION_MODES)})")
    if len(set(authz.modes)) != len(authz.modes):
        raise ConfigError(f"{src}: key 'authorization.modes': a mode is given more than once: {authz.modes}")
    webhook = authz.webhook
    if "Webhook" in authz.modes and not webhook.config_file:
        raise ConfigError(f"{src}: key 'authorization.webhook.config_file': required by authorization mode Webhook")
    if webhook.config_file and "Webhook" not in authz.modes:
        raise ConfigError(f"{src}: key 'authorization.webhook.config_file': cannot be set without authorization "
                          f"mode Webhook")
    if webhook.version not in WEBHOOK_VERSIONS:
        raise ConfigError(f"{src}: key 'authorization.webhook.version': must be one of "
                          f"{', '.join(WEBHOOK_VERSIONS)}, got {webhook.version!r}")
    for key in ("cache_authorized_ttl_seconds", "cache_unauthorized_ttl_seconds"):
        if getattr(webhook, key) < 0:
            raise ConfigError(f"{src}: key 'authorization.webhook.{key}': must not be negative")


def apply_overrides(config: Config, overrides: Mapping[str, Any]) -> None:
    """Set dotted keys (command-line flags) on ``config``; values are checked like YAML values."""
    for dotted, value in overrides.items():
        try:
            obj, name, tp = _lookup(config, dotted)
        except (AttributeError, KeyError):
            raise ConfigError(f"unknown configuration key '{dotted}'") from None
        setattr(obj, name, _convert(value, tp, f"option for '{dotted}'"))


def _absolutize(config: Config) -> None:
    for dotted in _PATH_KEYS:
        obj, name = _holder(config, dotted)
        value = getattr(obj, name)
        if isinstance(value, list):
            setattr(obj, name, [os.path.abspath(v) for v in value])
        elif value:
            setattr(obj, name, os.path.abspath(value))


def config_from_dict(data: Optional[Mapping[str, Any]], source: str = "<config>",
                     overrides: Optional[Mapping[str, Any]] = None) -> Config:
    """Build and validate a :class:`Config` from parsed YAML (``None`` = all defaults)."""
    config = Config(source=source)
    if data is not None:
        _fill(config, data, source, "")
    if overrides:
        apply_overrides(config, overrides)
    _validate(config)
    _absolutize(config)
    return config


def load_config(path: Optional[str], overrides: Optional[Mapping[str, Any]] = None) -> Config:
    """Read ``path`` (YAML; None = defaults only), apply ``overrides`` and validate."""
    if path is None:
        return config_from_dict(None, "<defaults>", overrides)
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read configuration file: {e.strerror}") from None
    import yaml  # PyYAML: for this, the admin kubeconfig and YAML bodies only

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        marked = e if isinstance(e, yaml.MarkedYAMLError) else None
        mark = marked.problem_mark if marked is not None else None
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = (marked.problem if marked is not None else None) or "invalid YAML"
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    return config_from_dict(data, path, overrides)
