"""The plugin's fixtures for kubernetes_asyncio, lightkube and kr8s, each doing a real create and read.

As in test_pytest_plugin.py, each test runs pytest in a subprocess on a test
file written into an empty project, with the checkout's plugin.
"""
from __future__ import annotations

import importlib.util
import os
import textwrap

from tests.testing.test_pytest_plugin import EXIT_OK, PluginProjectCase

CLIENT_PACKAGES = {"kubernetes_asyncio": "kubernetes_asyncio", "lightkube": "lightkube", "kr8s": "kr8s",
                   "anyio": "anyio"}

CLIENT_TESTS = textwrap.dedent("""\
    import pytest

    def test_lightkube(lightkube_client, kube_namespace):
        from lightkube.resources.core_v1 import ConfigMap
        from lightkube.models.meta_v1 import ObjectMeta
        lightkube_client.create(ConfigMap(metadata=ObjectMeta(name="light"), data={"k": "lightkube"}),
                                namespace=kube_namespace)
        assert lightkube_client.get(ConfigMap, "light", namespace=kube_namespace).data == {"k": "lightkube"}

    def test_kr8s(kr8s_api, kube_namespace):
        from kr8s.objects import ConfigMap
        ConfigMap({"metadata": {"name": "kr", "namespace": kube_namespace}, "data": {"k": "kr8s"}},
                  api=kr8s_api).create()
        assert ConfigMap.get("kr", namespace=kube_namespace, api=kr8s_api).raw["data"] == {"k": "kr8s"}

    @pytest.mark.anyio
    async def test_kubernetes_asyncio(kube_async_client, kube_apiserver, kube_namespace):
        from kubernetes_asyncio import client
        async with kube_async_client() as api:
            core = client.CoreV1Api(api)
            await core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "aio"}, "data": {"k": "aio"}})
            assert (await core.read_namespaced_config_map("aio", kube_namespace)).data == {"k": "aio"}
        # another user's client: a user RBAC grants nothing may not read it
        async with kube_async_client(kube_apiserver.kubeconfig_for("alice")) as alice:
            with pytest.raises(client.ApiException) as denied:
                await client.CoreV1Api(alice).read_namespaced_config_map("aio", kube_namespace)
            assert denied.value.status == 403
    """)


class ClientFixtureTests(PluginProjectCase):
    missing = [package for module, package in CLIENT_PACKAGES.items() if importlib.util.find_spec(module) is None]
    skip = PluginProjectCase.skip or (f"not installed: {', '.join(missing)} (pip install -e '.[test]')"
                                      if missing else None)

    def test_each_client_creates_and_reads(self) -> None:
        self.write("test_clients.py", CLIENT_TESTS)
        self.assertOutcome(self.pytest("-q"), EXIT_OK, "3 passed")

    def test_missing_package_skips_saying_what_to_install(self) -> None:
        # each package shadowed by one that cannot be imported, as if it were not installed
        shadow = os.path.join(self.dir, "shadow")
        for module in ("kubernetes_asyncio", "lightkube", "kr8s"):
            os.makedirs(os.path.join(shadow, module))
            with open(os.path.join(shadow, module, "__init__.py"), "w") as f:
                message = f"No module named {module!r}"
                f.write(f"raise ModuleNotFoundError({message!r}, name={module!r})\n")
        self.write("test_clients.py", CLIENT_TESTS)
        result = self.pytest("-q", "-rs", pythonpath=(shadow,))
        self.assertOutcome(result, EXIT_OK, "3 skipped")
        for fixture, package in (("kube_async_client", "kubernetes_asyncio"), ("lightkube_client", "lightkube"),
                                 ("kr8s_api", "kr8s")):
            self.assertIn(f"the {fixture} fixture needs {package}: pip install {package}", result.stdout)

