"""An in-process API server on 127.0.0.1 over plain HTTP, for resource-tree tests.

It is the real APIServer (filters, delegation chain, handlers, Store,
controllers) on a real SQLite store; only TLS is left out, and anonymous
requests are allowed so tests need no client certificates.  End-to-end tests
with TLS, kubectl and the kubernetes client use :mod:`kapiserver.testing.process`.
"""
from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace
from typing import Any, Optional

from twisted.internet import reactor

from kapiserver.server.apiserver import APIServer
from kapiserver.server.healthz import HealthChecks
from kapiserver.storage.interface import Storage


def test_config(**overrides: Any) -> SimpleNamespace:
    """A config tree with the attributes APIServer reads."""
    config = SimpleNamespace(
        watch=SimpleNamespace(bookmark_interval_seconds=overrides.pop("bookmark_interval_seconds", 60)),
        limits=SimpleNamespace(max_request_body_bytes=overrides.pop("max_request_body_bytes", 3 * 1024 * 1024),
                               request_timeout_seconds=overrides.pop("request_timeout_seconds", 60),
                               max_requests_inflight=overrides.pop("max_requests_inflight", 400),
                               max_mutating_requests_inflight=overrides.pop("max_mutating_requests_inflight", 200)),
        authentication=SimpleNamespace(anonymous=overrides.pop("anonymous", True)),
        storage=SimpleNamespace(event_ttl_seconds=overrides.pop("event_ttl_seconds", 3600)),
    )
    if overrides:
        raise TypeError(f"unknown settings: {sorted(overrides)}")
    return config


class RunningServer:
    def __init__(self, api: APIServer, port, storage: Storage, tmpdir: Optional[str]) -> None:
        self.api = api
        self.port = port
        self.storage = storage
        self.tmpdir = tmpdir
        self.url = f"http://127.0.0.1:{port.getHost().port}"
        self.stopped = False

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        await self.api.stop()
        await self.port.stopListening()
        await self.storage.stop()


async def start_api_server(storage: Optional[Storage] = None, ca_pem: bytes = b"test-ca",
                           watch_cache: bool = True, **settings: Any) -> RunningServer:
    """The server on SQLite in a temporary directory (behind the watch cache, as
    in production) unless ``storage`` is given."""
    tmpdir = None
    if storage is None:
        from kapiserver.storage.sqlite import SQLiteStorage
        tmpdir = tempfile.mkdtemp(prefix="kapiserver-test-")
        storage = SQLiteStorage(os.path.join(tmpdir, "state.db"))
        if watch_cache:
            from kapiserver.storage.cacher import CachedStorage
            storage = CachedStorage(storage, reactor=reactor)
    await storage.start()
    api = APIServer(test_config(**settings), storage, ca_pem, HealthChecks(), reactor)
    await api.start()
    port = reactor.listenTCP(0, api.site, interface="127.0.0.1")
    return RunningServer(api, port, storage, tmpdir)
