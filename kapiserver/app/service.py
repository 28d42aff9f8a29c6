"""The server process: storage, certificates, the TLS listener, systemd and shutdown.

:class:`KapiService` is one server process (``plugin.py`` builds it, or the
supervisor of several, ``workers.py``, for twistd).  Startup is:
certificates (before the reactor runs) → storage reachable → listen → admin
kubeconfig (with the real port) → ``APIServer.start()`` → ``READY=1`` once
``/readyz`` passes.  A startup failure prints one line on stderr and ends the
process with exit code 1.

The listener is plain TCP under :class:`ConnectionLimiter` (connection caps,
applied before TLS), then TLS, then the API site (``endpoints/connection``).

SIGTERM/SIGINT start a graceful shutdown, as kube-apiserver's: ``/readyz``
fails and ``STOPPING=1`` is sent at once; the server keeps serving for
``shutdown.delay_seconds`` so load balancers notice; then the listener closes,
new requests are turned away (503) and idle connections closed, every request
already received gets up to ``shutdown.drain_seconds`` to finish, watches end
with a clean end of stream, the connections close once their last bytes are
written, storage is flushed and closed, exit 0.
"""
from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any, Optional

from twisted.application import service
from twisted.internet import defer, endpoints, error as net_error, task, threads
from twisted.logger import Logger

from kapiserver.endpoints.connection.limits import ConnectionLimiter, descriptor_budget
from kapiserver.machinery import private_files
from kapiserver.server import systemd
from kapiserver.server.certs import (CertBundle, CertificateError, credential_files, ensure_certificates,
                                     serving_context_factory, serving_sans)
from kapiserver.server.config import Config
from kapiserver.server.gc_tuning import tune_after_startup
from kapiserver.server.heap_trim import HeapTrimmer, libc_malloc_trim
from kapiserver.server.healthz import HealthChecks
from kapiserver.server.kubeconfig import write_admin_kubeconfig
from kapiserver.machinery.eager_tcp import send_writes_at_once
from kapiserver.machinery.metrics import Metrics
from kapiserver.server.version import version_info

log = Logger()

STORAGE_CHECK_TIMEOUT = 5.0
READY_POLL_INTERVAL = 0.1
DRAIN_POLL_INTERVAL = 0.05
# after the drain time, how long connections still get to write their last bytes (final
# watch chunks, answers finished at the deadline) before they are cut
FINAL_FLUSH_SECONDS = 2.0
SQLITE_FILE = "kapiserver.db"
LISTEN_BACKLOG = 1024


class StartupError(Exception):
    """A reason the server cannot start; ``str()`` is the one line shown to the operator."""


def fail_startup(message: str) -> None:
    """Write one line on stderr (the real one: twistd redirects sys.stderr into the log)."""
    line = f"kapiserver: {message}".replace("\n", " ") + "\n"
    try:
        os.write(2, line.encode("utf-8", "replace"))
    except OSError:
        pass


def build_storage(config: Config, reactor: Any = None, worker: Optional[int] = None) -> Any:
    """The storage backend named by ``storage.backend``, behind the watch cache when enabled.

    ``worker``: this process's index among ``workers`` (None: the only process); worker 0
    does the storage maintenance (SQLite compaction and lease expiry).
    """
    backend = _build_backend(config, reactor, worker)
    if config.encryption_provider_config:
        backend = _encrypted(backend, config)
    if not config.storage.watch_cache:
        return backend
    from kapiserver.storage.cacher import CachedStorage
    return CachedStorage(backend, reactor=reactor)


def _encrypted(backend: Any, config: Config) -> Any:
    """The backend behind the transformers of ``encryption_provider_config`` (below the watch cache)."""
    from kapiserver.apiextensions.customresourcedefinitions import resource_type as crd_resource_type
    from kapiserver.apis.builtin import builtin_resource_types
    from kapiserver.storage import encryption_config
    from kapiserver.storage.encrypted import TransformingStorage, storage_resources
    try:
        encryption = encryption_config.load(config.encryption_provider_config)
    except encryption_config.EncryptionConfigError as e:
        raise StartupError(str(e)) from None
    resource_of = storage_resources(builtin_resource_types() + [crd_resource_type()])
    return TransformingStorage(backend, encryption, resource_of, key_prefix=config.storage.etcd.prefix)


def _build_backend(config: Config, reactor: Any = None, worker: Optional[int] = None) -> Any:
    """The backend itself (imported lazily: only one is needed)."""
    if config.storage.backend == "etcd3":
        from kapiserver.storage.etcd.backend import EtcdStorage
        from kapiserver.storage.etcd.tls import EtcdTLS
        etcd = config.storage.etcd
        tls = None
        if etcd.cafile or etcd.certfile or etcd.keyfile:
            tls = EtcdTLS(ca_file=etcd.cafile or None, cert_file=etcd.certfile or None,
                          key_file=etcd.keyfile or None)
        return EtcdStorage(list(etcd.servers), prefix=etcd.prefix, tls=tls, reactor=reactor,
                           watch_silence_timeout=etcd.watch_silence_timeout_seconds,
                           watch_progress=None if etcd.consistent_reads_from_cache else False)
    from kapiserver.storage.sqlite import SQLiteStorage
    if worker is None:  # (a supervisor checked before starting its workers, which create it together)
        check_sqlite_file(config)
    sqlite = config.storage.sqlite
    path = os.path.join(config.data_dir, SQLITE_FILE)
    return SQLiteStorage(path,
                         compaction_interval=float(sqlite.compaction_interval_seconds),
                         compaction_retain=sqlite.compaction_retain_revisions, reactor=reactor,
                         shared=worker is not None, maintenance=not worker)


def check_sqlite_file(config: Config) -> None:
    """The data directory exists, and the database is not a truncated file; raises StartupError."""
    if config.storage.backend != "sqlite":
        return
    try:
        private_files.make_private_dir(config.data_dir)
    except OSError as e:
        raise StartupError(f"{config.data_dir}: cannot create data directory: {e.strerror}") from None
    path = os.path.join(config.data_dir, SQLITE_FILE)
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        # SQLite would take an empty file for a new database: a truncated one must not become a new cluster
        raise StartupError(f"{path}: the SQLite database file is empty (0 bytes), so the data it held is gone; "
                           f"refusing to start an empty cluster in its place (restore the file, or remove it "
                           f"to start a new cluster)")


def _describe_storage(config: Config) -> str:
    if config.storage.backend == "etcd3":
        return f"etcd at {', '.join(config.storage.etcd.servers)}"
    return f"sqlite database {os.path.join(config.data_dir, SQLITE_FILE)}"


class EtcdCompactor:
    """Upstream's compactor: every interval, compact etcd to the revision seen one interval ago,
    so every watcher has at least one interval to catch up."""

    def __init__(self, storage: Any, interval: float, reactor: Any) -> None:
        self.storage = storage
        self.last_revision = 0
        self.loop = task.LoopingCall(lambda: defer.Deferred.fromCoroutine(self._tick()))
        self.loop.clock = reactor
        self.interval = interval

    def start(self) -> None:
        self.loop.start(self.interval, now=True).addErrback(lambda f: log.failure("etcd compactor stopped", f))

    def stop(self) -> None:
        if self.loop.running:
            self.loop.stop()

    async def _tick(self) -> None:
        try:
            if self.last_revision:
                await self.storage.compact(self.last_revision)
            self.last_revision = await self.storage.current_revision()
        except Exception as e:
            log.warn("etcd compaction failed: {error}", error=e)


def exit_after_startup_failure(reactor: Any, message: Optional[str]) -> None:
    """Print ``message`` (if not printed already) as the one line on stderr, stop the reactor, exit 1."""
    if message is not None:
        fail_startup(message)
    reactor.addSystemEventTrigger("after", "shutdown", _exit_after_shutdown, 1)
    if reactor.running:
        reactor.stop()
    else:
        reactor.callWhenRunning(reactor.stop)


class ProcessService(service.Service):
    """What twistd runs: one API server (:class:`KapiService`) or the supervisor of several
    (``workers.py``).  It talks to systemd, and is stopped once, gracefully (``_stop``), by
    ``stopService`` or SIGTERM/SIGINT."""

    name = "kapiserver"
    _shutdown: Optional[defer.Deferred] = None  # the stop, once begun

    def __init__(self, config: Config, bundle: CertBundle, reactor: Any = None,
                 install_signal_handlers: bool = False, exit_on_failure: bool = False,
                 env: Optional[dict] = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.config = config
        self.bundle = bundle
        self.reactor = reactor
        self.install_signal_handlers = install_signal_handlers
        self.exit_on_failure = exit_on_failure
        self.notifier = systemd.Notifier(env, reactor)
        self.ready: defer.Deferred = defer.Deferred()

    def startService(self) -> None:
        super().startService()
        if self.install_signal_handlers:
            self.reactor.callWhenRunning(self._install_signal_handlers)

    async def _stop(self) -> None:
        raise NotImplementedError

    def _install_signal_handlers(self) -> None:
        """Replace twistd's SIGTERM/SIGINT handlers: theirs re-raise the signal (exit status 143),
        ours drain and exit 0 as systemd expects from a clean stop."""
        def handler(signum, frame):
            self.reactor.callFromThread(self._on_signal, signum)
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def _on_signal(self, signum: int) -> None:
        log.info("Received {signal}, shutting down", signal=signal.Signals(signum).name)
        self.shutdown().addBoth(lambda _: self._stop_reactor())

    def _stop_reactor(self) -> None:
        """Stop the reactor once, however many signals arrived."""
        try:
            self.reactor.stop()
        except net_error.ReactorNotRunning:
            pass

    def stopService(self) -> defer.Deferred:
        super().stopService()
        return self.shutdown()

    def shutdown(self) -> defer.Deferred:
        """Stop gracefully (idempotent): fires when the stop has finished."""
        if self._shutdown is None:
            self._shutdown = defer.Deferred.fromCoroutine(self._stop())
            self._shutdown.addErrback(lambda f: log.failure("error during shutdown", f))
        d: defer.Deferred = defer.Deferred()
        def done(result: object) -> object:
            d.callback(None)
            return result
        self._shutdown.addBoth(done)
        return d


class KapiService(ProcessService):
    """Runs one API server.  ``ready`` fires once READY=1 was sent; ``stopped`` when shut down.

    As one of ``workers`` (``worker`` is its index), it serves on the listening socket
    ``listen_fd`` its supervisor (``app/workers.py``) inherited to it, paced by the shared
    ``connection_table`` (``server/accept_balance.py``), and shares the storage with the other
    workers.
    """

    def __init__(self, config: Config, bundle: CertBundle, reactor: Any = None,
                 install_signal_handlers: bool = False, exit_on_failure: bool = False,
                 env: Optional[dict] = None, worker: Optional[int] = None,
                 listen_fd: Optional[int] = None, connection_table: Any = None) -> None:
        super().__init__(config, bundle, reactor, install_signal_handlers, exit_on_failure, env)
        self.worker = worker
        self.listen_fd = listen_fd
        self.connection_table = connection_table
        self.balancer: Any = None
        # this server's registries: /healthz, /livez, /readyz and /metrics
        self.health = HealthChecks()
        self.metrics = Metrics()
        self.storage: Any = None
        self.apiserver: Any = None
        self.port: Any = None
        self.limiter: Optional[ConnectionLimiter] = None
        self.compactor: Optional[EtcdCompactor] = None
        self.heap_trimmer = HeapTrimmer(config.memory.heap_trim_interval_seconds, self.reactor, libc_malloc_trim())
        self.started = False
        self._startup: Optional[defer.Deferred] = None
        self.health.add("etcd" if config.storage.backend == "etcd3" else "sqlite", self._storage_check)
        self.health.add("poststarthook/kapiserver-start", self._started_check)

    # ------------------------------------------------------------ health

    def _started_check(self) -> None:
        if not self.started:
            raise RuntimeError("not finished")

    async def _storage_check(self) -> None:
        if self.storage is None:
            raise RuntimeError("storage not started")
        d = defer.Deferred.fromCoroutine(self.storage.check_health())
        d.addTimeout(STORAGE_CHECK_TIMEOUT, self.reactor)
        await d

    @property
    def bound_port(self) -> Optional[int]:
        return self.port.getHost().port if self.port is not None else None

    # ------------------------------------------------------------ start

    def startService(self) -> None:
        super().startService()
        # /version runs git (in a checkout, ~10 ms): in a thread, while the server is built
        self._version_known = threads.deferToThreadPool(self.reactor, self.reactor.getThreadPool(), version_info)
        self._startup = defer.Deferred.fromCoroutine(self._start())
        self._startup.addErrback(self._startup_failed)

    async def _start(self) -> None:
        from kapiserver.audit.build import AuditConfigError
        from kapiserver.app.apiserver import APIServer
        config = self.config
        self.storage = build_storage(config, self.reactor, self.worker)
        try:
            await self.storage.start()
        except Exception as e:
            raise StartupError(f"storage unavailable: cannot open {_describe_storage(config)}: {e}") from None
        if config.storage.backend == "etcd3" and not self.worker:
            self.compactor = EtcdCompactor(self.storage, float(config.storage.etcd.compaction_interval_seconds),
                                           self.reactor)
            self.compactor.start()
        try:
            self.apiserver = APIServer(config, self.storage, self.bundle.ca_cert_pem, self.health, self.metrics,
                                       reactor=self.reactor)
        except AuditConfigError as e:
            raise StartupError(str(e)) from None
        await self._version_known
        site = self.apiserver.site
        from kapiserver.server.tls_transport import ServingTLSFactory
        tls_options = serving_context_factory(self.bundle, self.apiserver.authentication.handshake_client_cas or None)
        tls = ServingTLSFactory(tls_options, False, site)
        self.limiter = ConnectionLimiter(tls, site.policy, self.reactor,
                                         max_connections=descriptor_budget(site.policy.max_connections))
        if self.listen_fd is not None:
            with socket.socket(fileno=os.dup(self.listen_fd)) as inherited:
                family = inherited.family
            self.port = self.reactor.adoptStreamPort(self.listen_fd, family, self.limiter)
            if self.connection_table is not None and self.worker is not None:
                from kapiserver.server.accept_balance import AcceptBalancer
                self.balancer = AcceptBalancer(self.port, self.connection_table, self.worker, self.reactor)
                self.limiter.on_count_change = self.balancer.connections_changed
        else:
            endpoint = endpoints.TCP4ServerEndpoint(self.reactor, config.secure_port, backlog=LISTEN_BACKLOG,
                                                    interface=config.bind_address)
            try:
                self.port = await endpoint.listen(self.limiter)
            except net_error.CannotListenError as e:
                reason = (isinstance(e.socketError, OSError) and e.socketError.strerror) or str(e.socketError)
                raise StartupError(f"cannot listen on {config.bind_address}:{config.secure_port}: {reason}") from None
            log.info("Serving securely on {host}:{port}", host=config.bind_address, port=self.bound_port)
            port = self.bound_port
            assert port is not None  # (listening)
            write_kubeconfig(config, self.bundle, port)
        send_writes_at_once(self.port)
        self.apiserver.secure_port = self.bound_port  # the kubernetes Service's targetPort and endpoints
        await self.apiserver.start()
        self.started = True
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        """Send READY=1 the first time every /readyz check passes."""
        waited = 0.0
        while not await self.health.healthy("readyz"):
            if self._shutdown is not None:
                return
            if waited and int(waited) % 10 == 0 and int(waited - READY_POLL_INTERVAL) % 10 != 0:
                failing = [n for n, err in await self.health.run("readyz") if err is not None]
                log.warn("not ready yet, failing checks: {checks}", checks=", ".join(failing))
            await task.deferLater(self.reactor, READY_POLL_INTERVAL, lambda: None)
            waited += READY_POLL_INTERVAL
        log.info("kapiserver is ready")
        tune_after_startup()
        self.heap_trimmer.start()
        self.notifier.ready()
        self.ready.callback(self.bound_port)

    def _startup_failed(self, failure) -> None:
        if self._shutdown is not None and failure.check(defer.CancelledError):
            if not self.ready.called:  # shut down before we were ready: not an error
                self.ready.errback(failure)
                self.ready.addErrback(lambda f: None)
            return
        # (imported here: a workers' supervisor, which imports this module, never authenticates)
        from kapiserver.app.authentication import CredentialsError
        if failure.check(StartupError, CertificateError, CredentialsError):
            message = str(failure.value)
        else:
            log.failure("startup failed", failure)
            message = f"startup failed: {failure.getErrorMessage()}"
        log.error("{message}", message=message)
        if not self.ready.called:
            self.ready.errback(StartupError(message))
            self.ready.addErrback(lambda f: None)
        if self.exit_on_failure:
            if self.worker is not None:  # the supervisor prints one line for all workers
                self.notifier.notify(f"STATUS={message}")
                exit_after_startup_failure(self.reactor, None)
            else:
                exit_after_startup_failure(self.reactor, message)

    # ------------------------------------------------------------ stop

    async def _stop(self) -> None:
        self.health.begin_shutdown()
        self.notifier.stopping()  # systemd: the stop has begun
        if self._startup is not None and not self._startup.called:
            self._startup.cancel()
        delay = self.config.shutdown.delay_seconds
        if delay > 0 and self.port is not None:
            log.info("/readyz fails; serving {delay}s more before closing the listener", delay=delay)
            await self._sleep(delay)
        if self.balancer is not None:
            self.balancer.stop()
        if self.port is not None:
            await self.port.stopListening()
        if self.apiserver is not None:
            await self._drain()
            await self.apiserver.stop()
        if self.compactor is not None:
            self.compactor.stop()
        self.heap_trimmer.stop()
        if self.storage is not None:
            try:
                await self.storage.stop()
            except Exception as e:
                log.warn("storage did not stop cleanly: {error}", error=e)
        log.info("kapiserver stopped")

    async def _drain(self) -> None:
        """Upstream's order: no new requests, in-flight ones finish, watches end, connections close."""
        apiserver = self.apiserver
        deadline = self.reactor.seconds() + self.config.shutdown.drain_seconds
        apiserver.begin_drain()
        log.info("draining: {n} requests in flight, {c} connections open", n=apiserver.requests_in_flight(),
                 c=apiserver.unfinished_connections())
        while apiserver.requests_in_flight() > 0 and self.reactor.seconds() < deadline:
            await self._sleep(DRAIN_POLL_INTERVAL)
        if apiserver.requests_in_flight():
            log.warn("{n} requests still in flight after draining", n=apiserver.requests_in_flight())
        apiserver.end_watches()
        flush_deadline = max(deadline, self.reactor.seconds()) + FINAL_FLUSH_SECONDS
        while apiserver.unfinished_connections() > 0 and self.reactor.seconds() < flush_deadline:
            await self._sleep(DRAIN_POLL_INTERVAL)
        if apiserver.unfinished_connections():
            log.warn("closing {n} connections that did not finish in time", n=apiserver.unfinished_connections())
            apiserver.abort_unfinished_connections()

    def _sleep(self, seconds: float) -> defer.Deferred:
        return task.deferLater(self.reactor, seconds, lambda: None)


def _exit_after_shutdown(code: int) -> None:
    """End the process with ``code`` (twistd itself would exit 0 after reactor.stop())."""
    try:
        sys.stdout.flush()
    except Exception:
        pass
    os._exit(code)


def write_kubeconfig(config: Config, bundle: CertBundle, port: int) -> None:
    """The admin kubeconfig, naming the port actually bound; raises StartupError."""
    try:
        if write_admin_kubeconfig(config.admin_kubeconfig, bundle, config.bind_address, port):
            log.info("Wrote admin kubeconfig {path}", path=config.admin_kubeconfig)
    except OSError as e:
        raise StartupError(f"{config.admin_kubeconfig}: cannot write admin kubeconfig: {e.strerror}") from None


def load_certificates(config: Config) -> CertBundle:
    """Certificates for ``config`` (creating them on first start); raises StartupError."""
    files = credential_files(config)
    try:
        return ensure_certificates(config.cert_dir, serving_sans(config),
                                   front_proxy="requestheader_client_ca" in files.defaults,
                                   front_proxy_client="proxy_client_cert" in files.defaults,
                                   service_account_key="service_account_signing_key" in files.defaults,
                                   signing_key_file=files.service_account_signing_key)
    except CertificateError as e:
        raise StartupError(str(e)) from None
