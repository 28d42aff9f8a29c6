"""``workers: N``: N server processes behind one listening address, under one supervisor.

The process twistd runs becomes the supervisor: it loads the certificates,
binds the listening socket and writes the admin kubeconfig, then starts N
workers (``python -m kapiserver.app.worker``), each handed the socket as
file descriptor 3, the table of connections per worker (``accept_balance.py``) as 4
and the configuration on its standard input; their log events come back as JSON on
descriptor 5 and are logged by the supervisor, so they go wherever twistd logs.
Each worker writes its own audit log file (``<name>.worker-<i><ext>``).  Every worker
is a whole API server (``KapiService``) accepting from the shared socket; the
kernel hands each new connection to one of them.  They share the storage as
several kube-apiservers share etcd (the SQLite file is opened shared, see
``storage/sqlite.py``), so a watch on one sees the others' writes in order,
leader-elected controllers run in one of them, and worker 0 does the storage
maintenance.

systemd talks to the supervisor only: each worker's sd_notify socket is one
the supervisor listens on, and the supervisor sends ``READY=1`` once every
worker is ready, ``STOPPING=1`` when it stops, and its own watchdog pings.
With a watchdog (``WatchdogSec=``) each worker pings the supervisor as it would
systemd, and a worker silent for the whole watchdog time (its reactor stuck)
is killed.  A worker that exits is replaced (after a pause if it had just
started); one that fails while the server starts fails the start.  SIGTERM is passed on to
every worker, each drains as a single server does, and the supervisor exits
when the last one has.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import Any, Optional

from twisted.internet import defer, protocol, task
from constantly import NamedConstant
from twisted.logger import Logger, LogLevel, eventFromJSON, globalLogPublisher

from kapiserver.server import systemd
from kapiserver.server.accept_balance import ConnectionTable
from kapiserver.server.certs import CertBundle
from kapiserver.server.config import Config, config_to_dict
from kapiserver.app.service import (FINAL_FLUSH_SECONDS, LISTEN_BACKLOG, ProcessService, StartupError,
                                       check_sqlite_file, exit_after_startup_failure, write_kubeconfig)

log = Logger()

WORKER_INDEX_ENV = "KAPISERVER_WORKER"
LISTEN_FD = 3
CONNECTION_TABLE_FD = 4
LOG_FD = 5
# a worker that ran at least this long is replaced at once; a quicker exit waits RESPAWN_PAUSE
STABLE_SECONDS = 10.0
RESPAWN_PAUSE = 1.0
# after the workers' own drain time, how long they get before they are killed
STOP_GRACE_SECONDS = 5.0
# how long after a worker's exit its last sd_notify datagram may still arrive
STATUS_WAIT_SECONDS = 0.05


class _WorkerNotifications(protocol.DatagramProtocol):
    """A worker's sd_notify messages."""

    noisy = False

    def __init__(self, supervisor: "WorkerSupervisor", index: int) -> None:
        self.supervisor = supervisor
        self.index = index

    def datagramReceived(self, data: bytes, addr: Any) -> None:
        for line in data.decode("utf-8", "replace").splitlines():
            self.supervisor.worker_notified(self.index, line)


class _WorkerProcess(protocol.ProcessProtocol):
    """One worker process: writes it its configuration, reports its end."""

    def __init__(self, supervisor: "WorkerSupervisor", index: int, config_json: bytes) -> None:
        self.supervisor = supervisor
        self.index = index
        self.config_json = config_json
        self.started_at = supervisor.reactor.seconds()
        self.ready = False
        self.pid: Optional[int] = None
        self.status = ""  # its last sd_notify STATUS= (why it could not start)
        self._log_buffer = b""
        self.last_ping = self.started_at  # its last WATCHDOG=1

    def connectionMade(self) -> None:
        transport = self.transport
        assert transport is not None  # (connected)
        self.pid = transport.pid
        transport.write(self.config_json)
        transport.closeStdin()

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        """The worker's log events (JSON records): logged here, marked with the worker's index."""
        if childFD != LOG_FD:
            return
        self._log_buffer += data
        *records, self._log_buffer = self._log_buffer.split(b"\x1e")
        for record in records:
            if record.strip():
                self._relay(record)

    def _relay(self, record: bytes) -> None:
        try:
            event = eventFromJSON(record.decode("utf-8", "replace"))
        except ValueError:
            event = {"log_format": "{line}", "line": record.decode("utf-8", "replace").strip(),
                     "log_level": LogLevel.info, "log_namespace": "worker", "log_time": self.supervisor.reactor.seconds()}
        level = event.get("log_level")
        namespace = event.get("log_namespace", "-")
        if namespace == "log_legacy":  # twisted.python.log.msg: no namespace of its own
            namespace = "-"
        event["log_system"] = f"worker {self.index} {namespace}#{level.name if isinstance(level, NamedConstant) else level}"
        globalLogPublisher(event)

    def processEnded(self, reason: Any) -> None:
        self.supervisor.worker_ended(self, reason.value.exitCode, reason.value.signal)


class WorkerSupervisor(ProcessService):
    """Starts, watches and stops the workers.  ``ready`` fires with the port once all serve."""

    def __init__(self, config: Config, bundle: CertBundle, count: int, reactor: Any = None,
                 install_signal_handlers: bool = False, exit_on_failure: bool = False,
                 env: Optional[dict] = None) -> None:
        super().__init__(config, bundle, reactor, install_signal_handlers, exit_on_failure, env)
        self.count = count
        self.workers: dict[int, _WorkerProcess] = {}
        self._socket: Optional[socket.socket] = None
        self._port: Optional[int] = None
        self._connection_table = os.memfd_create("kapiserver-connections")
        os.ftruncate(self._connection_table, ConnectionTable.size(count))
        self._notify_ports: list[Any] = []
        self._notify_names = [f"kapiserver-{os.getpid()}-{os.urandom(6).hex()}-worker-{i}" for i in range(count)]
        self._config_json = json.dumps({"source": config.source, "config": config_to_dict(config)}).encode()
        self._all_ended: Optional[defer.Deferred] = None
        # systemd's watchdog period, also the workers' (None: no watchdog)
        self._watchdog = systemd.watchdog_interval(env)
        self._watchdog_check: Optional[task.LoopingCall] = None

    # ------------------------------------------------------------ start

    def startService(self) -> None:
        super().startService()
        try:
            check_sqlite_file(self.config)
            self._listen()
        except StartupError as e:
            self._startup_failed(str(e))
            return
        for index, name in enumerate(self._notify_names):
            self._notify_ports.append(
                self.reactor.listenUNIXDatagram("\0" + name, _WorkerNotifications(self, index)))
        for index in range(self.count):
            self._spawn(index)

    def _listen(self) -> None:
        config = self.config
        family = socket.AF_INET6 if ":" in config.bind_address else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((config.bind_address, config.secure_port))
            sock.listen(LISTEN_BACKLOG)
        except OSError as e:
            sock.close()
            raise StartupError(f"cannot listen on {config.bind_address}:{config.secure_port}: "
                               f"{e.strerror}") from None
        sock.setblocking(False)
        self._socket = sock
        self._port = sock.getsockname()[1]
        log.info("Serving securely on {host}:{port} with {n} workers", host=config.bind_address, port=self._port,
                 n=self.count)
        write_kubeconfig(config, self.bundle, self._port)

    def _spawn(self, index: int) -> None:
        assert self._socket is not None
        env = {k: v for k, v in os.environ.items() if k not in ("WATCHDOG_USEC", "WATCHDOG_PID")}
        env["NOTIFY_SOCKET"] = "@" + self._notify_names[index]
        if self._watchdog is not None:
            env["WATCHDOG_USEC"] = str(int(self._watchdog * 2 * 1_000_000))
        env[WORKER_INDEX_ENV] = str(index)
        worker = _WorkerProcess(self, index, self._config_json)
        self.reactor.spawnProcess(worker, sys.executable, [sys.executable, "-m", "kapiserver.app.worker"],
                                  env=env, path=os.getcwd(),
                                  childFDs={0: "w", 1: 1, 2: 2, LISTEN_FD: self._socket.fileno(),
                                            CONNECTION_TABLE_FD: self._connection_table, LOG_FD: "r"})
        self.workers[index] = worker
        log.info("worker {index} started (pid {pid})", index=index, pid=worker.pid)

    def worker_notified(self, index: int, state: str) -> None:
        worker = self.workers.get(index)
        if worker is not None and state.startswith("STATUS="):
            worker.status = state[len("STATUS="):]
        if worker is not None and state == "WATCHDOG=1":
            worker.last_ping = self.reactor.seconds()
        if worker is None or state != "READY=1" or worker.ready:
            return
        worker.ready = True
        log.info("worker {index} (pid {pid}) is ready", index=index, pid=worker.pid)
        if not self.ready.called and len(self.workers) == self.count and all(w.ready for w in self.workers.values()):
            log.info("kapiserver is ready ({n} workers)", n=self.count)
            self.notifier.ready()
            if self._watchdog is not None:
                self._watchdog_check = task.LoopingCall(self._check_watchdogs)
                self._watchdog_check.clock = self.reactor
                self._watchdog_check.start(self._watchdog, now=False)
            self.ready.callback(self._port)

    def _check_watchdogs(self) -> None:
        """Kill a ready worker that has not pinged for the whole watchdog time (it is replaced)."""
        assert self._watchdog is not None
        deadline = self.reactor.seconds() - 2 * self._watchdog
        for worker in list(self.workers.values()):
            if worker.ready and worker.last_ping < deadline and self._shutdown is None:
                log.error("worker {index} (pid {pid}) missed its watchdog; killing it", index=worker.index,
                          pid=worker.pid)
                if worker.transport is not None:
                    worker.transport.signalProcess(signal.SIGKILL)

    def worker_ended(self, worker: _WorkerProcess, code: Optional[int], signum: Optional[int]) -> None:
        if self.workers.get(worker.index) is worker:
            del self.workers[worker.index]
        how = f"exit status {code}" if signum is None else f"signal {signal.Signals(signum).name}"
        if self._shutdown is not None:
            log.info("worker {index} (pid {pid}) ended: {how}", index=worker.index, pid=worker.pid, how=how)
            if not self.workers and self._all_ended is not None and not self._all_ended.called:
                self._all_ended.callback(None)
            return
        if not self.ready.called and signum is None:
            # its STATUS= says why; the datagram may still be on its way
            self.reactor.callLater(STATUS_WAIT_SECONDS, self._worker_failed_to_start, worker, how)
            return
        lived = self.reactor.seconds() - worker.started_at
        pause = 0.0 if lived >= STABLE_SECONDS else RESPAWN_PAUSE
        log.warn("worker {index} (pid {pid}) ended ({how}); starting a new one in {pause}s", index=worker.index,
                 pid=worker.pid, how=how, pause=pause)
        self.reactor.callLater(pause, self._replace, worker.index)

    def _worker_failed_to_start(self, worker: _WorkerProcess, how: str) -> None:
        if self._shutdown is None:
            self._startup_failed(worker.status or f"worker {worker.index} could not start ({how})")

    def _replace(self, index: int) -> None:
        if self._shutdown is None and index not in self.workers:
            self._spawn(index)

    def _startup_failed(self, message: str) -> None:
        log.error("{message}", message=message)
        if not self.ready.called:
            self.ready.errback(StartupError(message))
            self.ready.addErrback(lambda f: None)
        d = self.shutdown()
        if self.exit_on_failure:
            d.addBoth(lambda _: exit_after_startup_failure(self.reactor, message))

    # ------------------------------------------------------------ stop

    async def _stop(self) -> None:
        """Stop every worker (each drains as a single server does)."""
        self.notifier.stopping()
        if self._watchdog_check is not None and self._watchdog_check.running:
            self._watchdog_check.stop()
        if self._socket is not None:
            # the workers hold their own copies until they have drained; ours only outlived them
            self._socket.close()
            self._socket = None
        if self.workers:
            self._all_ended = defer.Deferred()
            self._signal_workers(signal.SIGTERM)
            shutdown = self.config.shutdown
            grace = shutdown.delay_seconds + shutdown.drain_seconds + FINAL_FLUSH_SECONDS + STOP_GRACE_SECONDS
            timer = self.reactor.callLater(grace, self._signal_workers, signal.SIGKILL)
            await self._all_ended
            if timer.active():
                timer.cancel()
        for port in self._notify_ports:  # (the workers' STOPPING=1 came to them)
            port.stopListening()
        self._notify_ports = []
        log.info("kapiserver stopped")

    def _signal_workers(self, signum: int) -> None:
        for worker in list(self.workers.values()):
            try:
                if worker.transport is not None:
                    worker.transport.signalProcess(signum)
            except Exception:
                pass  # already gone: its processEnded is on the way
