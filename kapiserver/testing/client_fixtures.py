"""The pytest plugin's fixtures for Kubernetes clients other than the official ``kubernetes`` package.

They are part of the plugin (``kapiserver.testing.pytest_plugin`` imports
them) and build on its ``kubeconfig`` (the admin's). Each client library is
optional: a test asking for a fixture whose library is not installed is
skipped, the reason saying what to ``pip install``.

* ``kube_async_client`` (session): a factory, ``async with
  kube_async_client() as api:``, of ``kubernetes_asyncio`` ApiClients. It is
  no ready client because an aiohttp session belongs to the event loop it was
  made in, and the test's loop is the event-loop plugin's (pytest-asyncio's,
  anyio's: one per test by default), not the session's;
* ``lightkube_client`` (session): a synchronous ``lightkube.Client``;
* ``kr8s_api`` (session): kr8s's synchronous ``kr8s.Api`` (``kr8s.api(kubeconfig=...)``).

The guide is docs/testing.md ("Other clients").
"""
from __future__ import annotations

import contextlib
from typing import Any, AsyncIterator, Iterator, Optional

import pytest


def _require(module: str, fixture: str, package: str) -> Any:
    return pytest.importorskip(module, reason=f"the {fixture} fixture needs {package}: pip install {package}")


class AsyncClientFactory:
    """``async with factory(kubeconfig=None) as api``: a ``kubernetes_asyncio.client.ApiClient`` made in the
    running event loop, as the admin (or as ``kubeconfig``'s user, e.g. ``kube_apiserver.kubeconfig_for(...)``),
    closed on leaving the block."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig

    @contextlib.asynccontextmanager
    async def __call__(self, kubeconfig: Optional[str] = None) -> AsyncIterator[Any]:
        from kubernetes_asyncio import client, config
        configuration = client.Configuration()
        await config.load_kube_config(config_file=kubeconfig or self.kubeconfig, client_configuration=configuration)
        async with client.ApiClient(configuration) as api_client:
            yield api_client


@pytest.fixture(scope="session")
def kube_async_client(kubeconfig: str) -> AsyncClientFactory:
    """A factory of ``kubernetes_asyncio`` ApiClients: ``async with kube_async_client() as api: ...`` in the test's
    event loop (pytest-asyncio, anyio's pytest plugin or ``asyncio.run``); skipped without kubernetes_asyncio."""
    _require("kubernetes_asyncio", "kube_async_client", "kubernetes_asyncio")
    return AsyncClientFactory(kubeconfig)


@pytest.fixture(scope="session")
def lightkube_client(kubeconfig: str) -> Iterator[Any]:
    """A ``lightkube.Client`` (synchronous) acting as the admin; skipped without lightkube."""
    lightkube = _require("lightkube", "lightkube_client", "lightkube")
    from lightkube.config.kubeconfig import KubeConfig
    client = lightkube.Client(config=KubeConfig.from_file(kubeconfig))
    yield client
    client.close()


@pytest.fixture(scope="session")
def kr8s_api(kubeconfig: str) -> Any:
    """kr8s's synchronous ``kr8s.Api`` acting as the admin (``kr8s.api(kubeconfig=...)``); skipped without kr8s.

    Pass it as ``api=`` to kr8s's objects and functions (``ConfigMap(..., api=kr8s_api)``): kr8s would
    otherwise look for a kubeconfig of its own (``KUBECONFIG``, ``~/.kube/config``).
    """
    kr8s = _require("kr8s", "kr8s_api", "kr8s")
    return kr8s.api(kubeconfig=kubeconfig)
