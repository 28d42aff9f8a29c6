"""A pytest plugin: a real kapiserver for an operator's or controller's tests, with no conftest.

Installed with kapiserver, it is found through the ``pytest11`` entry point
(pyproject.toml), as pytest finds every installed plugin.  It gives envtest's
service in pytest's idiom: one ``twistd -n kapiserver`` process
(:class:`~kapiserver.testing.process.ServerProcess`, one worker, an ephemeral
port, its own temporary directory) per test session, or per worker under
pytest-xdist, and fixtures on top of it:

* ``kube_apiserver`` (session): the running server (URL, CA, admin
  kubeconfig, ``kubeconfig_for(user, groups)`` for RBAC tests);
* ``kubeconfig`` (session): the admin kubeconfig's path;
* ``kube_client`` (session): an ``ApiClient`` of the official ``kubernetes``
  package (the test is skipped when that package is not installed);
* ``kube_namespace`` (function): a fresh namespace, deleted after the test;
* ``kube_reset`` (function): the server back to its bootstrap state before the
  test (a snapshot restored in one transaction, not a restart).
* ``kube_crds``, ``kube_webhooks``, ``kube_controller_manager``: CRDs,
  admission webhooks served by the test, the real kube-controller-manager
  (module ``kapiserver.testing.operator_fixtures``);
* ``kube_async_client`` (a factory of ``kubernetes_asyncio`` clients),
  ``lightkube_client``, ``kr8s_api``: the other client libraries, where
  installed (module ``kapiserver.testing.client_fixtures``).

Options (``pytest --help``, group "kapiserver"): ``--kapiserver-config-json``
/ ini ``kapiserver_config`` (more configuration keys, docs/configuration.md),
``--kapiserver-backend`` / ini ``kapiserver_backend`` and ``--kapiserver-reset``
/ ini ``kapiserver_reset`` (``each``: every test using the server gets ``kube_reset``);
switches for single keys, named as kube-apiserver's flags: ``--kapiserver-workers``,
``--kapiserver-authorization-mode``, ``--kapiserver-enable-admission-plugins``,
``--kapiserver-disable-admission-plugins`` (each with its ini option ``kapiserver_...``).

Only this module imports pytest, and nothing in the server imports it: pytest
is a test dependency, not the server's.  The guide is docs/testing.md.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

import pytest
import yaml

from kapiserver.testing.etcd import EtcdServer, skip_reason as etcd_skip_reason
from kapiserver.testing.process import ServerProcess, deep_merge

BACKENDS = ("sqlite", "etcd3")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kapiserver", "kapiserver: a real Kubernetes API server for tests")
    group.addoption(
        "--kapiserver-config-json", dest="kapiserver_config_json", default=None, metavar="JSON",
        help="more kapiserver configuration keys for the kube_apiserver fixture, as a JSON (or YAML flow) "
             "mapping, e.g. '{\"admission\": {\"enable_plugins\": [\"AlwaysPullImages\"]}}'; merged over the "
             "ini option kapiserver_config (keys: kapiserver's docs/configuration.md)")
    group.addoption(
        "--kapiserver-backend", dest="kapiserver_backend", default=None, choices=BACKENDS,
        help="storage of the kube_apiserver fixture: sqlite (the default, a private database) or etcd3 (a private "
             "etcd from /usr/bin/etcd, or storage.etcd.servers of the configuration with a key prefix per run)")
    parser.addini("kapiserver_config", type="string", default="",
                  help="more kapiserver configuration keys for the kube_apiserver fixture (a JSON or YAML mapping)")
    parser.addini("kapiserver_backend", type="string", default="sqlite",
                  help="storage of the kube_apiserver fixture: sqlite (default) or etcd3")
    add_reset_options(group, parser)
    add_switch_options(group, parser)


def pytest_configure(config: pytest.Config) -> None:
    # a bad option is a usage error at once, not an error in every test using the server
    server_configuration(config)
    reset_mode(config)


def _config_mapping(text: str, origin: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise pytest.UsageError(f"{origin}: not JSON or YAML: {error}") from None
    if not isinstance(value, dict):
        raise pytest.UsageError(f"{origin}: must be a mapping of configuration keys, not {type(value).__name__}")
    return value


def server_configuration(config: pytest.Config) -> tuple[str, dict[str, Any]]:
    """The backend and the extra configuration keys the options ask for (command line over ini)."""
    # layers, each over the one before: the ini's mapping, the ini's switches, the command line's mapping, its switches
    extra = _config_mapping(str(config.getini("kapiserver_config")), "ini option kapiserver_config")
    deep_merge(extra, switches_from_ini(config))
    deep_merge(extra, _config_mapping(config.getoption("kapiserver_config_json") or "", "--kapiserver-config-json"))
    deep_merge(extra, switches_from_command_line(config))
    backend = config.getoption("kapiserver_backend") or str(config.getini("kapiserver_backend")) or "sqlite"
    if backend not in BACKENDS:
        raise pytest.UsageError(f"kapiserver_backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    return backend, extra


@pytest.fixture(scope="session")
def kube_apiserver(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A running kapiserver for the session (for each pytest-xdist worker), stopped at its end.

    Its ``server_url``, ``ca_path``, ``kubeconfig`` (the admin's) and
    ``kubeconfig_for(user, groups)`` (a kubeconfig acting as another user,
    for RBAC tests) are what tests use; its ``log()`` is the server's log.
    """
    backend, extra = server_configuration(request.config)
    etcd: Optional[EtcdServer] = None
    if backend == "etcd3":
        etcd_config = extra.setdefault("storage", {}).setdefault("etcd", {})
        if etcd_config.get("servers"):
            # a shared etcd: every session (every xdist worker) keeps its objects under its own prefix
            etcd_config.setdefault("prefix", f"/kapiserver-pytest-{uuid.uuid4().hex[:12]}")
        else:
            reason = etcd_skip_reason()
            if reason is not None:
                pytest.skip(f"--kapiserver-backend=etcd3: {reason}")
            etcd = EtcdServer().start()
            etcd_config["servers"] = [etcd.endpoint]
        extra["storage"]["backend"] = "etcd3"
    # tmp_path_factory: a directory per session and per xdist worker, kept (with server.log) after a failure
    server = ServerProcess(extra_config=extra, workdir=str(tmp_path_factory.mktemp("kapiserver")),
                           reset=backend == "sqlite")  # (kube_reset: the etcd backend cannot restore)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        if etcd is not None:
            etcd.cleanup()


@pytest.fixture(scope="session")
def kubeconfig(kube_apiserver: ServerProcess) -> str:
    """The path of the admin kubeconfig of ``kube_apiserver`` (user kapiserver-admin, group system:masters)."""
    return kube_apiserver.kubeconfig


@pytest.fixture(scope="session")
def kube_client(kube_apiserver: ServerProcess) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` acting as the admin; the test is skipped without the package."""
    pytest.importorskip("kubernetes", reason="the kube_client fixture needs the official client: "
                                             "pip install kubernetes")
    api_client = kube_apiserver.python_client()
    yield api_client
    api_client.close()


# what a namespace name may hold (a DNS label); the rest of a test's name becomes '-'
_NOT_IN_LABEL = re.compile(r"[^a-z0-9-]+")
# generateName's prefix is cut by the server to leave room for the 5 random characters
_PREFIX_MAX = 40


@pytest.fixture
def kube_namespace(request: pytest.FixtureRequest, kube_apiserver: ServerProcess) -> Iterator[str]:
    """A fresh namespace named after the test (and 5 random characters), deleted after it without waiting.

    The server's namespace controller then deletes what the test left in it.
    """
    prefix = _NOT_IN_LABEL.sub("-", request.node.name.lower()).strip("-")[:_PREFIX_MAX].rstrip("-") or "test"
    status, body = kube_apiserver.admin_request(
        "POST", "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": prefix + "-"}})
    if status != 201:
        raise RuntimeError(f"kube_namespace: creating a namespace answered {status}: {body.get('message', body)}")
    name: str = body["metadata"]["name"]
    yield name
    status, body = kube_apiserver.admin_request("DELETE", f"/api/v1/namespaces/{name}")
    # 404: the test deleted it itself
    if status not in (200, 202, 404):
        raise RuntimeError(f"kube_namespace: deleting namespace {name} answered {status}: {body.get('message', body)}")


# ---------------------------------------------------------------- per-test isolation: kube_reset

RESET_MODES = ("never", "each")


def add_reset_options(group: Any, parser: pytest.Parser) -> None:
    group.addoption(
        "--kapiserver-reset", dest="kapiserver_reset", default=None, choices=RESET_MODES,
        help="each: before every test that uses the kube_apiserver fixture, put the server back to its bootstrap "
             "state (as the kube_reset fixture does); never (the default): only tests asking for kube_reset")
    parser.addini("kapiserver_reset", type="string", default="never",
                  help="never (default) or each: whether every test using kube_apiserver gets kube_reset")


def reset_mode(config: pytest.Config) -> str:
    mode = config.getoption("kapiserver_reset") or str(config.getini("kapiserver_reset")) or "never"
    if mode not in RESET_MODES:
        raise pytest.UsageError(f"kapiserver_reset: {mode!r} is not one of {', '.join(RESET_MODES)}")
    if mode == "each" and server_configuration(config)[0] != "sqlite":
        raise pytest.UsageError("--kapiserver-reset=each needs the sqlite backend (etcd3 cannot restore a snapshot)")
    return mode


@pytest.fixture(autouse=True)
def _kapiserver_reset_first(request: pytest.FixtureRequest) -> None:
    """Resets before the test's other function fixtures run (autouse fixtures come first), so
    what ``kube_namespace`` and the like make for the test is not undone by the reset."""
    if "kube_apiserver" not in request.fixturenames:
        return
    if "kube_reset" in request.fixturenames or reset_mode(request.config) == "each":
        server: ServerProcess = request.getfixturevalue("kube_apiserver")
        if not server.resettable:
            pytest.fail("kube_reset needs the sqlite backend (etcd3 cannot restore a snapshot)", pytrace=False)
        server.reset()


@pytest.fixture
def kube_reset(kube_apiserver: ServerProcess) -> ServerProcess:
    """The server, put back to the state it had once bootstrapped before this test starts.

    What earlier tests created is deleted, what they changed or deleted is written back, in
    one transaction at new resourceVersions (no restart: clients, watches and informers of
    the session stay valid and see DELETED / MODIFIED / ADDED events). ``kube_apiserver.snapshot()``
    in a session fixture makes the current state (CRDs, shared namespaces) the one returned to.
    """
    return kube_apiserver


# ------------------------------------------------------------ switches: one configuration key each

@dataclass(frozen=True)
class Switch:
    """``--kapiserver-<flag>`` and ini ``kapiserver_<flag>``: one configuration key, from kube-apiserver's flag."""

    flag: str  # kube-apiserver's flag name (docs/configuration.md's table of flags)
    key: tuple[str, ...]  # the configuration key it sets
    parse: Callable[[str], Any]  # the option's text to the key's value; ValueError says what is wrong
    metavar: str
    help: str

    @property
    def dest(self) -> str:
        return "kapiserver_" + self.flag.replace("-", "_")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise ValueError(f"{value} is negative")
    return value


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


SWITCHES = (
    Switch("workers", ("workers",), _count, "N",
           "server processes behind the kube_apiserver fixture's address (configuration key workers; the fixture's "
           "default is 1, 0 is one per CPU)"),
    Switch("authorization-mode", ("authorization", "modes"), _names, "MODES",
           "the fixture server's authorizers, comma-separated, asked in order, e.g. Node,RBAC (configuration key "
           "authorization.modes, kube-apiserver's --authorization-mode; default RBAC)"),
    Switch("enable-admission-plugins", ("admission", "enable_plugins"), _names, "PLUGINS",
           "admission plugins the fixture server runs besides the default ones, comma-separated, e.g. "
           "AlwaysPullImages (configuration key admission.enable_plugins)"),
    Switch("disable-admission-plugins", ("admission", "disable_plugins"), _names, "PLUGINS",
           "default admission plugins the fixture server does not run, comma-separated (configuration key "
           "admission.disable_plugins)"),
)


def add_switch_options(group: Any, parser: pytest.Parser) -> None:
    for switch in SWITCHES:
        group.addoption(f"--kapiserver-{switch.flag}", dest=switch.dest, default=None, metavar=switch.metavar,
                        help=f"{switch.help}; over --kapiserver-config-json and ini {switch.dest}")
        parser.addini(switch.dest, type="string", default="", help=switch.help)


def _switch_keys(texts: Iterable[tuple[Switch, str]], where: Callable[[Switch], str]) -> dict[str, Any]:
    keys: dict[str, Any] = {}
    for switch, text in texts:
        if not text.strip():
            continue
        try:
            value = switch.parse(text.strip())
        except ValueError as error:
            raise pytest.UsageError(f"{where(switch)}: {error}") from None
        node = keys
        for part in switch.key[:-1]:
            node = node.setdefault(part, {})
        node[switch.key[-1]] = value
    return keys


def switches_from_ini(config: pytest.Config) -> dict[str, Any]:
    return _switch_keys(((switch, str(config.getini(switch.dest))) for switch in SWITCHES),
                        lambda switch: f"ini option {switch.dest}")


def switches_from_command_line(config: pytest.Config) -> dict[str, Any]:
    return _switch_keys(((switch, config.getoption(switch.dest) or "") for switch in SWITCHES),
                        lambda switch: f"--kapiserver-{switch.flag}")


# ------------------------------------------------------------ operator fixtures
# kube_crds, kube_webhooks, kube_controller_manager: defined in their own module, registered by importing them
# into this plugin module (pytest collects the fixtures of a plugin's namespace)
from kapiserver.testing.operator_fixtures import (  # noqa: E402,F401
    _kube_webhook_certificates, kube_controller_manager, kube_crds, kube_webhooks)


# ------------------------------------------------------------ client fixtures of other libraries
# kube_async_client (kubernetes_asyncio), lightkube_client, kr8s_api: in their own module, registered as above
from kapiserver.testing.client_fixtures import kr8s_api, kube_async_client, lightkube_client  # noqa: E402,F401
