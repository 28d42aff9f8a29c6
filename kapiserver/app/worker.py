"""One worker process of ``workers: N`` (``python -m kapiserver.app.worker``; see ``workers.py``).

Its supervisor passes the listening socket as file descriptor 3, the table of
connections per worker as 4, its index in
``KAPISERVER_WORKER`` and the configuration as JSON on standard input, and reads
its log events as JSON from descriptor 5 (standard output and error are the
supervisor's own, e.g. for ``audit.log_path: -``).  It is a
whole API server otherwise, and ends with its supervisor (parent death signal).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGTERM (a graceful stop) when the supervisor is gone, even if it was killed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the supervisor died before we asked
        os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    from kapiserver.server import gc_tuning
    gc_tuning.begin_startup()  # before the server's modules are imported, as twistd's plugin does
    from twisted.internet import reactor
    from twisted.logger import FilteringLogObserver, LogLevelFilterPredicate, globalLogBeginner, jsonFileLogObserver

    from kapiserver.server.accept_balance import ConnectionTable
    from kapiserver.server.config import ConfigError, config_from_dict, worker_count
    from kapiserver.app.plugin import LOG_LEVELS
    from kapiserver.app.service import KapiService, StartupError, fail_startup, load_certificates
    from kapiserver.app.workers import CONNECTION_TABLE_FD, LISTEN_FD, LOG_FD, WORKER_INDEX_ENV

    _die_with_parent()
    index = int(os.environ[WORKER_INDEX_ENV])
    try:
        handed = json.load(sys.stdin)
        config = config_from_dict(handed["config"], handed["source"])
        bundle = load_certificates(config)
    except (ConfigError, StartupError) as e:
        fail_startup(str(e))
        raise SystemExit(1)
    # events go to the supervisor as JSON, which logs them wherever twistd logs (its --logfile)
    level = LogLevelFilterPredicate(defaultLogLevel=LOG_LEVELS[config.log_level])
    events = os.fdopen(LOG_FD, "w", encoding="utf-8")
    globalLogBeginner.beginLoggingTo([FilteringLogObserver(jsonFileLogObserver(events), [level])],
                                     redirectStandardIO=False)
    if config.audit.log_path not in ("", "-"):
        # one audit log per worker, as each kube-apiserver of a cluster writes its own:
        # several processes cannot share one file's size-based rotation
        root, ext = os.path.splitext(config.audit.log_path)
        config.audit.log_path = f"{root}.worker-{index}{ext}"
    KapiService(config, bundle, reactor, install_signal_handlers=True, exit_on_failure=True,
                worker=index, listen_fd=LISTEN_FD,
                connection_table=ConnectionTable(CONNECTION_TABLE_FD, worker_count(config))).startService()
    reactor.run()


if __name__ == "__main__":
    main()
