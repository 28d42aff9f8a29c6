"""twistd's ``kapiserver`` subcommand: command-line options and the service maker.

Flags override keys of the configuration file; the mapping below is the one
place that says which flag sets which key.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from twisted.application import service
from twisted.logger import FilteringLogObserver, LogLevel, LogLevelFilterPredicate, globalLogBeginner
from twisted.python import usage

from kapiserver.server.config import ConfigError, load_config

# flag name -> (config key, converter)
_FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "secure-port": ("secure_port", int),
    "bind-address": ("bind_address", str),
    "advertise-address": ("advertise_address", str),
    "service-cluster-ip-range": ("service_cluster_ip_range", str),
    "cert-dir": ("cert_dir", str),
    "data-dir": ("data_dir", str),
    "storage-backend": ("storage.backend", str),
    "etcd-servers": ("storage.etcd.servers", lambda v: [s.strip() for s in v.split(",") if s.strip()]),
    "etcd-prefix": ("storage.etcd.prefix", str),
    "etcd-cafile": ("storage.etcd.cafile", str),
    "etcd-certfile": ("storage.etcd.certfile", str),
    "etcd-keyfile": ("storage.etcd.keyfile", str),
    "enable-admission-plugins": ("admission.enable_plugins", lambda v: [s.strip() for s in v.split(",") if s.strip()]),
    "disable-admission-plugins": ("admission.disable_plugins",
                                  lambda v: [s.strip() for s in v.split(",") if s.strip()]),
    "admission-control-config-file": ("admission.config_file", str),
}

_LEVELS = {"debug": LogLevel.debug, "info": LogLevel.info, "warn": LogLevel.warn,
           "error": LogLevel.error, "critical": LogLevel.critical}


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "Run the kapiserver Kubernetes API server. Flags override the configuration file."
    optParameters = [
        ["config", "c", None, "Configuration file (YAML), e.g. etc/apiserver.yaml; defaults apply without it."],
        ["secure-port", None, None, "HTTPS port (0 = any free port). Overrides secure_port."],
        ["bind-address", None, None, "IP address to listen on. Overrides bind_address."],
        ["advertise-address", None, None, "IP address the kubernetes Service's endpoints name for this server. "
                                          "Overrides advertise_address."],
        ["service-cluster-ip-range", None, None, "CIDR Services' cluster IPs are allocated from. Overrides "
                                                 "service_cluster_ip_range."],
        ["cert-dir", None, None, "Directory of the CA and certificates. Overrides cert_dir."],
        ["data-dir", None, None, "Directory of the SQLite database. Overrides data_dir."],
        ["storage-backend", None, None, "Storage backend: sqlite or etcd3. Overrides storage.backend."],
        ["etcd-servers", None, None, "Comma-separated etcd URLs. Overrides storage.etcd.servers."],
        ["etcd-prefix", None, None, "Key prefix in etcd. Overrides storage.etcd.prefix."],
        ["etcd-cafile", None, None, "CA file for etcd. Overrides storage.etcd.cafile."],
        ["etcd-certfile", None, None, "Client certificate for etcd. Overrides storage.etcd.certfile."],
        ["etcd-keyfile", None, None, "Client key for etcd. Overrides storage.etcd.keyfile."],
        ["enable-admission-plugins", None, None, "Comma-separated admission plugins to enable besides the default "
                                                 "ones. Overrides admission.enable_plugins."],
        ["disable-admission-plugins", None, None, "Comma-separated default admission plugins to disable. Overrides "
                                                  "admission.disable_plugins."],
        ["admission-control-config-file", None, None, "AdmissionConfiguration file with plugin settings. Overrides "
                                                      "admission.config_file."],
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
    predicate = LogLevelFilterPredicate(defaultLogLevel=_LEVELS[level])
    begin = globalLogBeginner.beginLoggingTo

    def filtered(observers, *args, **kwargs):
        return begin([FilteringLogObserver(o, [predicate]) for o in observers], *args, **kwargs)
    globalLogBeginner.beginLoggingTo = filtered  # type: ignore[method-assign]


def _die(message: str) -> None:
    sys.stderr.write(f"kapiserver: {message}\n")
    sys.stderr.flush()
    raise SystemExit(1)


def makeService(options: Options) -> service.IService:
    """Load and validate the configuration, then build the server; exits 1 with one line on error."""
    from kapiserver.server.service import StartupError, makeService as make
    try:
        config = load_config(options["config"], options.overrides())
    except (ConfigError, usage.UsageError) as e:
        _die(str(e))
    if config.log_level != "info":
        _apply_log_level(config.log_level)
    try:
        return make(config)
    except StartupError as e:
        _die(str(e))
    raise AssertionError("unreachable")
