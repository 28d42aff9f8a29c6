"""The pytest plugin (kapiserver.testing.pytest_plugin) as an operator developer meets it.

Each test writes a test file into an empty directory (no conftest, no ini
file), runs ``python -m pytest`` on it in a subprocess and reads pytest's
verdict.  The plugin is found the way an installed kapiserver offers it: the
``pytest11`` entry point.  pip writes that entry point (from pyproject.toml's
``[project.entry-points.pytest11]``) into the installed distribution's
metadata; the tests write the same metadata from this checkout's
pyproject.toml into a directory on PYTHONPATH, so the checkout's plugin is the
one found even when the interpreter's installed kapiserver is another
checkout or an older install (pytest loads one plugin per entry-point name).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Optional

from twisted.trial import unittest

from kapiserver.testing.etcd import skip_reason as etcd_skip_reason
from kapiserver.testing.process import REPO_ROOT, child_env

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

# pytest's exit codes (pytest.ExitCode), spelled out: this module does not import pytest
EXIT_OK = 0
EXIT_USAGE_ERROR = 4

CONFIGMAP_TEST = textwrap.dedent("""\
    from kubernetes import client
    def test_configmap(kube_client, kube_namespace):
        client.CoreV1Api(kube_client).create_namespaced_config_map(kube_namespace, {"metadata": {"name": "cm"}, "data": {"k": "v"}})
        assert client.CoreV1Api(kube_client).read_namespaced_config_map("cm", kube_namespace).data == {"k": "v"}
    """)


# a test that leaves a ConfigMap behind and deletes a bootstrap ClusterRole; assert_undone checks both undone
LEFTOVERS_TEST = textwrap.dedent("""\
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    def test_leave_things_behind(kube_client):
        client.CoreV1Api(kube_client).create_namespaced_config_map("default", {"metadata": {"name": "leftover"},
                                                                               "data": {"k": "v"}})
        client.RbacAuthorizationV1Api(kube_client).delete_cluster_role("view")

    def assert_undone(kube_client):
        try:
            client.CoreV1Api(kube_client).read_namespaced_config_map("leftover", "default")
            raise AssertionError("the ConfigMap a previous test made is still there")
        except ApiException as error:
            assert error.status == 404, error
        assert client.RbacAuthorizationV1Api(kube_client).read_cluster_role("view").metadata.name == "view"
    """)


def _skip_reason() -> Optional[str]:
    for module, package in (("pytest", "pytest"), ("xdist", "pytest-xdist"), ("kubernetes", "kubernetes")):
        if importlib.util.find_spec(module) is None:
            return f"{package} is not installed (pip install -e '.[test]')"
    if tomllib is None:
        return "reading pyproject.toml's entry points needs Python 3.11's tomllib"
    return None


def write_entry_point_metadata(site: str) -> None:
    """The distribution metadata pip writes for pyproject.toml's pytest11 entry points, in ``site``."""
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        entry_points = tomllib.load(f)["project"]["entry-points"]["pytest11"]
    dist_info = os.path.join(site, "kapiserver_checkout-0.dist-info")
    os.makedirs(dist_info)
    with open(os.path.join(dist_info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: kapiserver-checkout\nVersion: 0\n")
    with open(os.path.join(dist_info, "entry_points.txt"), "w") as f:
        f.write("[pytest11]\n" + "".join(f"{name} = {target}\n" for name, target in entry_points.items()))


class PluginProjectCase(unittest.TestCase):
    """An empty project directory with the checkout's plugin as pytest finds it; ``pytest()`` runs pytest there."""

    skip = _skip_reason()

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="kapiserver-pytest-plugin-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.site = os.path.join(self.dir, "site")
        write_entry_point_metadata(self.site)
        self.project = os.path.join(self.dir, "project")
        os.makedirs(self.project)

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.project, name), "w") as f:
            f.write(text)

    def pytest(self, *args: str, pythonpath: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """pytest in the project; ``pythonpath``: directories before the checkout on sys.path."""
        env = child_env(PYTHONPATH=os.pathsep.join((*pythonpath, REPO_ROOT, self.site)))
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        env.pop("PYTEST_ADDOPTS", None)
        env.pop("PYTEST_PLUGINS", None)
        return subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--basetemp", os.path.join(self.dir, "tmp"),
             *args],
            cwd=self.project, env=env, capture_output=True, text=True, timeout=300)

    def assertOutcome(self, result: subprocess.CompletedProcess, code: int, summary: str) -> None:
        output = result.stdout + result.stderr
        self.assertEqual(result.returncode, code, output)
        self.assertIn(summary, output)


class PytestPluginTests(PluginProjectCase):
    def test_help_lists_the_options(self) -> None:
        result = self.pytest("--help")
        self.assertOutcome(result, EXIT_OK, "kapiserver: a real Kubernetes API server for tests")
        for option in ("--kapiserver-config-json=JSON", "--kapiserver-backend={sqlite,etcd3}", "kapiserver_config",
                       "kapiserver_backend", "--kapiserver-reset={never,each}", "kapiserver_reset",
                       "--kapiserver-workers=N", "kapiserver_workers", "--kapiserver-authorization-mode=MODES",
                       "kapiserver_authorization_mode", "--kapiserver-enable-admission-plugins=PLUGINS",
                       "kapiserver_enable_admission_plugins", "--kapiserver-disable-admission-plugins=PLUGINS",
                       "kapiserver_disable_admission_plugins"):
            self.assertIn(option, result.stdout)

    def test_namespace_and_client_without_conftest(self) -> None:
        self.write("test_configmap.py", CONFIGMAP_TEST)
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "1 passed")

    def test_xdist_workers_get_a_server_each(self) -> None:
        # with two tests on two workers, xdist hands one to each (round robin); each notes its server
        urls = os.path.join(self.dir, "urls")
        os.makedirs(urls)
        for index in (1, 2):
            self.write(f"test_worker{index}.py", CONFIGMAP_TEST + textwrap.dedent(f"""\
                def test_server(kube_apiserver, worker_id):
                    with open({os.path.join(urls, str(index))!r}, "w") as f:
                        f.write(worker_id + " " + kube_apiserver.server_url)
                """))
        self.assertOutcome(self.pytest("-q", "-n", "2"), EXIT_OK, "4 passed")
        seen = []
        for index in (1, 2):
            with open(os.path.join(urls, str(index))) as f:
                seen.append(f.read().split())
        self.assertEqual(len({worker for worker, _ in seen}), 2, seen)
        self.assertEqual(len({url for _, url in seen}), 2, seen)

    def test_configuration_option_and_rbac_user(self) -> None:
        # an admission plugin that is off by default, turned on from the command line, and a user without roles
        self.write("test_options.py", textwrap.dedent("""\
            import pytest
            from kubernetes import client
            from kubernetes.client.rest import ApiException

            POD = {"metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never"}]}}

            def test_admission_plugin(kube_client, kube_namespace):
                pod = client.CoreV1Api(kube_client).create_namespaced_pod(kube_namespace, POD)
                assert pod.spec.containers[0].image_pull_policy == "Always"

            def test_user_without_roles(kube_apiserver, kube_namespace):
                alice = kube_apiserver.python_client(kube_apiserver.kubeconfig_for("alice", ("developers",)))
                with pytest.raises(ApiException) as raised:
                    client.CoreV1Api(alice).list_namespaced_config_map(kube_namespace)
                assert raised.value.status == 403
            """))
        result = self.pytest("-q", "--kapiserver-config-json", '{"admission": {"enable_plugins": ["AlwaysPullImages"]}}')
        self.assertOutcome(result, EXIT_OK, "2 passed")

    def test_ini_configuration_reaches_the_server(self) -> None:
        self.write("pytest.ini", "[pytest]\nkapiserver_config = {admission: {enable_plugins: [AlwaysPullImages]}}\n")
        self.write("test_ini.py", textwrap.dedent("""\
            from kubernetes import client
            def test_admission_plugin(kube_client, kube_namespace):
                pod = client.CoreV1Api(kube_client).create_namespaced_pod(kube_namespace, {"metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never"}]}})
                assert pod.spec.containers[0].image_pull_policy == "Always"
            """))
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "1 passed")

    def test_etcd_backend(self) -> None:
        reason = etcd_skip_reason()
        if reason is not None:
            raise unittest.SkipTest(reason)
        # the server's readiness checks name its storage: etcd, not sqlite
        self.write("test_etcd.py", CONFIGMAP_TEST + textwrap.dedent("""\
            import os, ssl, urllib.request
            def test_storage_is_etcd(kube_apiserver):
                context = ssl.create_default_context(cafile=kube_apiserver.ca_path)
                context.load_cert_chain(os.path.join(kube_apiserver.cert_dir, "admin.crt"),
                                        os.path.join(kube_apiserver.cert_dir, "admin.key"))
                with urllib.request.urlopen(kube_apiserver.server_url + "/readyz?verbose", context=context) as r:
                    checks = r.read().decode()
                assert "[+]etcd ok" in checks and "sqlite" not in checks, checks
            """))
        self.assertOutcome(self.pytest("-q", "--kapiserver-backend", "etcd3"), EXIT_OK, "2 passed")

    def test_kube_reset_undoes_what_earlier_tests_did(self) -> None:
        # pytest runs a file's tests in order: the first leaves things behind, the others reset
        self.write("test_reset.py", LEFTOVERS_TEST + textwrap.dedent("""\
            def test_reset_undid_it(kube_client, kube_reset):
                assert_undone(kube_client)

            def test_reset_comes_before_the_namespace(kube_client, kube_namespace, kube_reset):
                client.CoreV1Api(kube_client).read_namespace(kube_namespace)
                assert_undone(kube_client)

            def test_snapshot_keeps_what_a_suite_set_up(kube_apiserver, kube_client):
                core = client.CoreV1Api(kube_client)
                core.create_namespaced_config_map("default", {"metadata": {"name": "suite"}})
                kube_apiserver.snapshot()
                core.create_namespaced_config_map("default", {"metadata": {"name": "test"}})
                kube_apiserver.reset()
                names = [c.metadata.name for c in core.list_namespaced_config_map("default").items]
                assert "suite" in names and "test" not in names, names
            """))
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "4 passed")

    def test_reset_each_with_xdist(self) -> None:
        # --dist loadfile: a file's tests run in order on one worker; each worker resets its own server
        for index in (1, 2):
            self.write(f"test_each{index}.py", LEFTOVERS_TEST + textwrap.dedent("""\
                def test_reset_undid_it(kube_client):
                    assert_undone(kube_client)
                """))
        self.assertOutcome(self.pytest("-q", "-n", "2", "--dist", "loadfile", "--kapiserver-reset", "each"),
                           EXIT_OK, "4 passed")

    def test_without_reset_leftovers_stay(self) -> None:
        """(What the two tests above would see without the reset.)"""
        self.write("test_no_reset.py", LEFTOVERS_TEST + textwrap.dedent("""\
            def test_still_there(kube_client):
                core = client.CoreV1Api(kube_client)
                assert core.read_namespaced_config_map("leftover", "default").data == {"k": "v"}
            """))
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "2 passed")

    def test_reset_each_on_etcd_is_a_usage_error(self) -> None:
        self.write("test_nothing.py", "def test_nothing(kube_apiserver):\n    pass\n")
        result = self.pytest("-q", "--kapiserver-backend", "etcd3", "--kapiserver-reset", "each")
        self.assertOutcome(result, EXIT_USAGE_ERROR, "--kapiserver-reset=each needs the sqlite backend")

    def test_bad_configuration_is_a_usage_error(self) -> None:
        self.write("test_nothing.py", "def test_nothing(kube_apiserver):\n    pass\n")
        result = self.pytest("-q", "--kapiserver-config-json", "[1, 2]")
        self.assertOutcome(result, EXIT_USAGE_ERROR,
                           "--kapiserver-config-json: must be a mapping of configuration keys, not list")

    def test_switches_reach_the_server(self) -> None:
        # the command line's switches over the ini's mapping (modes), the ini's switch (admission) over the defaults
        self.write("pytest.ini", "[pytest]\nkapiserver_config = {authorization: {modes: [RBAC]}}\n"
                                 "kapiserver_enable_admission_plugins = AlwaysPullImages\n")
        self.write("test_switches.py", textwrap.dedent("""\
            from kubernetes import client

            def test_two_server_processes(kube_apiserver):
                pid = kube_apiserver.proc.pid
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    assert len(f.read().split()) == 2

            def test_always_allow(kube_apiserver, kube_namespace):
                alice = kube_apiserver.python_client(kube_apiserver.kubeconfig_for("alice"))
                # under RBAC (the ini's modes) alice, bound to no role, gets 403 and this raises ApiException
                client.CoreV1Api(alice).list_namespaced_config_map(kube_namespace)

            def test_admission_plugin(kube_client, kube_namespace):
                pod = client.CoreV1Api(kube_client).create_namespaced_pod(kube_namespace, {"metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Never"}]}})
                assert pod.spec.containers[0].image_pull_policy == "Always"
            """))
        result = self.pytest("-q", "--kapiserver-workers", "2", "--kapiserver-authorization-mode", "AlwaysAllow")
        self.assertOutcome(result, EXIT_OK, "3 passed")

    def test_bad_switch_is_a_usage_error(self) -> None:
        self.write("test_nothing.py", "def test_nothing(kube_apiserver):\n    pass\n")
        result = self.pytest("-q", "--kapiserver-workers", "two")
        self.assertOutcome(result, EXIT_USAGE_ERROR, "--kapiserver-workers: 'two' is not a whole number")
