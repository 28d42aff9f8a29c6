"""The pytest plugin's fixtures for operator tests: CRDs, admission webhooks, kube-controller-manager.

They are part of the plugin (``kapiserver.testing.pytest_plugin`` imports
them, so the ``pytest11`` entry point brings them) and build on its
``kube_apiserver``:

* ``kube_crds`` (session): ``kube_crds(*paths)`` installs the CRDs of YAML
  files or directories and returns their names once they are Established
  (:func:`kapiserver.testing.crds.install_crds`);
* ``kube_webhooks`` (function): an
  :class:`~kapiserver.testing.webhook.AdmissionWebhooks` of the test, serving
  TLS on 127.0.0.1 from the test process; its ``validating(...)`` /
  ``mutating(...)`` register a webhook the API server calls; gone after the test;
* ``kube_controller_manager`` (session): the real kube-controller-manager
  (the anchor kit's build) against the server, running the controllers
  kapiserver has no copy of (Deployments, ReplicaSets, Jobs, ...); the test
  is skipped, saying where the binary is expected, when it is absent.

The guide is docs/testing.md.
"""
from __future__ import annotations

import os
from typing import Iterator, Protocol, Union

import pytest

from kapiserver.server.controller_names import IN_PROCESS
from kapiserver.testing import control_plane
from kapiserver.testing.crds import install_crds
from kapiserver.testing.process import ServerProcess
from kapiserver.testing.webhook import AdmissionWebhooks, WebhookCertificates

KCM_START_TIMEOUT_SECONDS = 60.0


class CRDInstaller(Protocol):
    def __call__(self, *paths: Union[str, "os.PathLike[str]"]) -> list[str]: ...


@pytest.fixture(scope="session")
def kube_crds(kube_apiserver: ServerProcess) -> CRDInstaller:
    """``kube_crds(*paths)``: install the CRDs of these YAML files/directories, wait for Established; their names.

    CRDs are cluster-scoped: they stay for the rest of the session (installing
    the same file again replaces them), as the server does.
    """
    def install(*paths: Union[str, "os.PathLike[str]"]) -> list[str]:
        return install_crds(kube_apiserver, paths)
    return install


@pytest.fixture(scope="session")
def _kube_webhook_certificates(tmp_path_factory: pytest.TempPathFactory) -> WebhookCertificates:
    # one CA and serving certificate for the session's webhook servers: key generation is their dearest part
    return WebhookCertificates.create(str(tmp_path_factory.mktemp("webhook-certs")), ["127.0.0.1"])


@pytest.fixture
def kube_webhooks(kube_apiserver: ServerProcess, tmp_path: "os.PathLike[str]",
                  _kube_webhook_certificates: WebhookCertificates) -> Iterator[AdmissionWebhooks]:
    """Admission webhooks served by this test (HTTPS on 127.0.0.1), registered with ``kube_apiserver``.

    ``kube_webhooks.validating(name, handler, rules, **fields)`` (or
    ``mutating``) returns once the API server calls the webhook; the
    configurations are deleted and the server stopped after the test.
    """
    with AdmissionWebhooks(kube_apiserver, os.fspath(tmp_path), certs=_kube_webhook_certificates) as hooks:
        yield hooks


def controllers_beside(server: ServerProcess) -> tuple[str, ...]:
    """kube-controller-manager's ``--controllers`` next to ``server``: all but those the server runs itself."""
    if not server.extra_config.get("controllers", {}).get("enabled", True):
        return ("*",)
    return ("*", *(f"-{name}" for name in sorted(IN_PROCESS)))


@pytest.fixture(scope="session")
def kube_controller_manager(kube_apiserver: ServerProcess, tmp_path_factory: pytest.TempPathFactory
                            ) -> Iterator[control_plane.ControllerManagerProcess]:
    """The real kube-controller-manager against ``kube_apiserver`` for the session (skipped without the binary).

    It runs the controllers kapiserver has no copy of (deployment, replicaset,
    job, statefulset, daemonset, endpoints, ...), so a Deployment gets its
    ReplicaSet and Pods; kapiserver's own keep doing the rest. Its ``log()``
    is kube-controller-manager's log. Pods stay Pending: no scheduler or
    kubelet runs.
    """
    if not control_plane.available():
        pytest.skip(f"kube_controller_manager: {control_plane.KUBE_CONTROLLER_MANAGER} is absent (build it with the "
                    f"anchor kit, or set ANCHORS_DIR to a directory with bin/kube-controller-manager)")
    kcm = control_plane.ControllerManagerProcess(
        kube_apiserver.server_url, kube_apiserver.cert_dir, str(tmp_path_factory.mktemp("kube-controller-manager")),
        controllers=controllers_beside(kube_apiserver))
    try:
        kcm.start()
        if not kcm.wait_for_log(r"Started controller", timeout=KCM_START_TIMEOUT_SECONDS):
            raise RuntimeError(f"kube-controller-manager started no controller:\n{kcm.log()[-3000:]}")
        yield kcm
    finally:
        kcm.stop()
