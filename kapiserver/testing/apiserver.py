"""An in-process API server on 127.0.0.1 over plain HTTP, for resource-tree tests.

It is the real APIServer (filters, delegation chain, handlers, Store,
controllers) on a real SQLite store; only TLS is left out, and anonymous
requests are allowed and authorized by AlwaysAllow, so tests need no client
certificates (``authorization_modes=["RBAC"]`` or an ``authorizer`` to test
authorization itself).  :func:`start_in_memory_server` is the same server without
a port, driven through StubTreq with its request deadlines on a fake clock: the
first choice wherever a socket adds nothing.  End-to-end tests
with TLS, kubectl and the kubernetes client use :mod:`kapiserver.testing.process`.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Optional

from twisted.internet import reactor, task
from twisted.internet.address import IPv4Address
from twisted.internet.interfaces import IListeningPort
from twisted.internet.testing import MemoryReactorClock

from kapiserver.auth.authorizer import Authorizer
from kapiserver.app.apiserver import APIServer
from kapiserver.server.config import Config, config_from_dict
from kapiserver.server.handler_chain import build_handler_chain
from kapiserver.testing.client import InMemoryClient
from kapiserver.testing import TEST_ADVERTISE_ADDRESS
from kapiserver.machinery.metrics import Metrics
from kapiserver.server.healthz import HealthChecks
from kapiserver.storage.interface import Storage


# keyword settings of start_api_server -> the configuration key they set
_SETTINGS = {
    "bookmark_interval_seconds": "watch.bookmark_interval_seconds",
    "max_request_body_bytes": "limits.max_request_body_bytes",
    "request_timeout_seconds": "limits.request_timeout_seconds",
    "max_requests_inflight": "limits.max_requests_inflight",
    "max_mutating_requests_inflight": "limits.max_mutating_requests_inflight",
    "enable_priority_and_fairness": "limits.enable_priority_and_fairness",
    "anonymous": "authentication.anonymous",
    "authorization_modes": "authorization.modes",
    "authorization_webhook_config_file": "authorization.webhook.config_file",
    "authorization_webhook_version": "authorization.webhook.version",
    "event_ttl_seconds": "storage.event_ttl_seconds",
    "advertise_address": "advertise_address",
    "leader_elect": "controllers.leader_elect",
    "controllers_enabled": "controllers.enabled",
    # authentication: a cert_dir holding ensure_certificates' files turns on ServiceAccount tokens
    "cert_dir": "cert_dir",
    "token_auth_file": "authentication.token_auth_file",
    "controllers": "controllers.names",
    "authentication_config_file": "authentication.config_file",
    "api_audiences": "authentication.api_audiences",
    "service_account_max_token_expiration_seconds": "authentication.service_account.max_token_expiration_seconds",
    "audit_policy_file": "audit.policy_file",
    "audit_log_path": "audit.log_path",
    "cluster_signing_duration_seconds": "controllers.cluster_signing_duration_seconds",
    "enable_admission_plugins": "admission.enable_plugins",
    "disable_admission_plugins": "admission.disable_plugins",
    "admission_config_file": "admission.config_file",
}


def test_config(**settings: Any) -> Config:
    """The server's configuration for an in-process test server: the defaults, anonymous requests
    allowed by AlwaysAllow, the advertised address, and ``settings`` (keyword names of :data:`_SETTINGS`)
    applied."""
    unknown = set(settings) - set(_SETTINGS)
    if unknown:
        raise TypeError(f"unknown settings: {sorted(unknown)}")
    overrides: dict[str, Any] = {"authentication.anonymous": True, "authorization.modes": ["AlwaysAllow"],
                                 "advertise_address": TEST_ADVERTISE_ADDRESS}
    overrides.update({_SETTINGS[name]: value for name, value in settings.items()})
    return config_from_dict(None, "<test>", overrides)


class StartedServer:
    """A started APIServer on its storage; :meth:`stop` stops both, once, and removes the
    temporary directory the storage was made in."""

    def __init__(self, api: APIServer, storage: Storage, tmpdir: Optional[str]) -> None:
        self.api = api
        self.storage = storage
        self.tmpdir = tmpdir
        self.stopped = False

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        await self.api.stop()
        await self._stop_serving()
        await self.storage.stop()
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    async def _stop_serving(self) -> None:
        """Close what reaches the server from outside (nothing, in memory)."""


class RunningServer(StartedServer):
    """The server listening on 127.0.0.1 (``url``)."""

    def __init__(self, api: APIServer, port: IListeningPort, storage: Storage, tmpdir: Optional[str]) -> None:
        super().__init__(api, storage, tmpdir)
        self.port = port
        self.url = f"http://127.0.0.1:{port.getHost().port}"  # type: ignore[attr-defined]

    async def _stop_serving(self) -> None:
        stopped = self.port.stopListening()
        if stopped is not None:
            await stopped
        # connections still open (a client's kept-alive one, one lingering after a refused body)
        for connection in list(self.api.site.connections.connections):
            connection.abort()
        for _ in range(100):
            if not self.api.site.connections.connections:
                break
            await task.deferLater(reactor, 0.01, lambda: None)


async def _started_api(storage: Optional[Storage], ca_pem: bytes, watch_cache: bool,
                       authorizer: Optional[Authorizer], listen: bool,
                       settings: dict[str, Any]) -> tuple[APIServer, Optional[IListeningPort], Storage, Optional[str]]:
    """The APIServer on ``storage`` (SQLite in a temporary directory unless given), started; listening
    on 127.0.0.1:0 when ``listen``."""
    config = test_config(**settings)
    tmpdir = None
    if storage is None:
        from kapiserver.storage.sqlite import SQLiteStorage
        tmpdir = tempfile.mkdtemp(prefix="kapiserver-test-")
        storage = SQLiteStorage(os.path.join(tmpdir, "state.db"))
        if watch_cache:
            from kapiserver.storage.cacher import CachedStorage
            storage = CachedStorage(storage, reactor=reactor)
    await storage.start()
    # the bootstrap RBAC policy costs a start ~0.15 s: only when RBAC decides
    api = APIServer(config, storage, ca_pem, HealthChecks(), Metrics(), reactor, authorizer=authorizer,
                    bootstrap_rbac="RBAC" in config.authorization.modes)
    port = None
    if listen:
        # (APISite builds APIConnections around its channels: twisted's stub types listenTCP's factory
        # by the channel a plain Site builds)
        port = reactor.listenTCP(0, api.site, interface="127.0.0.1")  # type: ignore[arg-type]
        address = port.getHost()
        assert isinstance(address, IPv4Address)
        api.secure_port = address.port
    await api.start()
    return api, port, storage, tmpdir


async def start_api_server(storage: Optional[Storage] = None, ca_pem: bytes = b"test-ca",
                           watch_cache: bool = True, authorizer: Optional[Authorizer] = None,
                           **settings: Any) -> RunningServer:
    """The server on SQLite in a temporary directory (behind the watch cache, as
    in production) unless ``storage`` is given; ``authorizer`` replaces the configured one."""
    api, port, storage, tmpdir = await _started_api(storage, ca_pem, watch_cache, authorizer, True, settings)
    assert port is not None
    return RunningServer(api, port, storage, tmpdir)


class InMemoryServer(StartedServer):
    """The whole server without a port: its handler chain around its delegation chain, driven
    through ``treq.testing.StubTreq`` (:attr:`client`), with request deadlines on :attr:`clock`.

    The handler chain is the server's own (built by ``build_handler_chain`` from the same
    dependencies), except that the request timeout and the priority-and-fairness queue wait run on
    a fake clock the test steps (``clock.advance(seconds)``): a deadline is a step, never a sleep.
    Storage, informers and controllers run on the real reactor, as in production.
    """

    def __init__(self, api: APIServer, storage: Storage, tmpdir: Optional[str]) -> None:
        super().__init__(api, storage, tmpdir)
        self.clock = MemoryReactorClock()
        self.handler = build_handler_chain(api.root, api.handler_chain_deps._replace(reactor=self.clock))
        self.client = InMemoryClient(self.handler)


async def start_in_memory_server(storage: Optional[Storage] = None, ca_pem: bytes = b"test-ca",
                                 watch_cache: bool = True, authorizer: Optional[Authorizer] = None,
                                 **settings: Any) -> InMemoryServer:
    """:func:`start_api_server`'s server, not listening: see :class:`InMemoryServer`."""
    api, _, storage, tmpdir = await _started_api(storage, ca_pem, watch_cache, authorizer, False, settings)
    return InMemoryServer(api, storage, tmpdir)
