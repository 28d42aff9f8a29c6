"""Encryption at rest end to end, on SQLite and on real etcd: turning it on for existing Secrets and
rotating the key, the way upstream documents it (restart with the new configuration, then
``kubectl get secrets -A -o json | kubectl replace -f -``)."""
from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import urllib.request
from typing import Optional

from twisted.trial import unittest

from kapiserver.testing.etcd import EtcdServer, skip_reason
from kapiserver.testing.process import ServerProcess, kubectl_binary

KEY1 = base64.b64encode(bytes(range(32))).decode()
KEY2 = base64.b64encode(bytes(range(50, 82))).decode()


def encryption(*providers: str) -> str:
    return ("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
            "  - resources: [secrets]\n    providers:\n" + "".join(f"      - {p}\n" for p in providers))


def aescbc(*keys: tuple[str, str]) -> str:
    return "aescbc: {keys: [" + ", ".join(f"{{name: {n}, secret: {s}}}" for n, s in keys) + "]}"


class RotationScenario:
    """Mixin: ``raw(key)`` reads what the backend holds for a registry key."""

    backend_config: dict = {}

    def raw(self, key: str) -> bytes:
        raise NotImplementedError

    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="kapiserver-enc-")
        self.addCleanup(shutil.rmtree, self.workdir, True)
        self.config_path = os.path.join(self.workdir, "encryption.yaml")
        self.server: Optional[ServerProcess] = None
        self.addCleanup(self._stop)

    def _stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def restart(self, providers: Optional[list[str]]) -> ServerProcess:
        self._stop()
        config = dict(self.backend_config)
        if providers is not None:
            with open(self.config_path, "w") as f:
                f.write(encryption(*providers))
            config["encryption_provider_config"] = self.config_path
        self.server = ServerProcess(extra_config=config, workdir=self.workdir).start()
        return self.server

    def replace_all_secrets(self) -> None:
        listed = self.server.kubectl("get", "secrets", "-A", "-o", "json").stdout
        self.server.kubectl("replace", "-f", "-", input=listed)

    def secret_value(self, namespace: str, name: str) -> bytes:
        value = self.server.kubectl("get", "secret", name, "-n", namespace, "-o", "jsonpath={.data.token}").stdout
        return base64.b64decode(value)

    def test_turn_on_then_rotate(self):
        server = self.restart(None)  # no encryption yet
        for namespace in ("default", "kube-system"):
            server.kubectl("create", "secret", "generic", "app", "-n", namespace, f"--from-literal=token=t-{namespace}")
        self.assertTrue(self.raw("/secrets/default/app").startswith(b"{"))

        # encrypt from now on; existing Secrets still readable (identity listed), then rewritten
        self.restart([aescbc(("key1", KEY1)), "identity: {}"])
        self.assertEqual(self.secret_value("kube-system", "app"), b"t-kube-system")
        self.assertTrue(self.raw("/secrets/default/app").startswith(b"{"))
        self.replace_all_secrets()
        for namespace in ("default", "kube-system"):
            self.assertTrue(self.raw(f"/secrets/{namespace}/app").startswith(b"k8s:enc:aescbc:v1:key1:"))
            self.assertNotIn(f"t-{namespace}".encode(), self.raw(f"/secrets/{namespace}/app"))

        # rotate: key2 first, key1 still read
        self.restart([aescbc(("key2", KEY2), ("key1", KEY1))])
        self.assertEqual(self.secret_value("default", "app"), b"t-default")
        self.assertTrue(self.raw("/secrets/default/app").startswith(b"k8s:enc:aescbc:v1:key1:"))
        self.server.kubectl("create", "secret", "generic", "fresh", "--from-literal=token=new")
        self.assertTrue(self.raw("/secrets/default/fresh").startswith(b"k8s:enc:aescbc:v1:key2:"))
        self.replace_all_secrets()
        self.assertTrue(self.raw("/secrets/default/app").startswith(b"k8s:enc:aescbc:v1:key2:"))
        self.assertTrue(self.raw("/secrets/kube-system/app").startswith(b"k8s:enc:aescbc:v1:key2:"))

        # key1 gone: everything still reads, lists and watches
        self.restart([aescbc(("key2", KEY2))])
        self.assertEqual(self.secret_value("kube-system", "app"), b"t-kube-system")
        names = self.server.kubectl("get", "secrets", "-A", "-o", "jsonpath={.items[*].metadata.name}").stdout
        self.assertEqual(sorted(names.split()), ["app", "app", "fresh"])
        watched = subprocess.run([kubectl_binary(), "--kubeconfig", self.server.kubeconfig, "get", "secrets",
                                  "--watch", "--request-timeout=2s", "-o", "name"],
                                 capture_output=True, text=True, timeout=30)
        self.assertIn("secret/fresh", watched.stdout)


class SQLiteRotationTests(RotationScenario, unittest.TestCase):
    def raw(self, key: str) -> bytes:
        db = os.path.join(self.workdir, "data", "kapiserver.db")
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT value FROM kv WHERE key = ? ORDER BY rev DESC LIMIT 1",
                                     (key.encode(),)).fetchone()
        finally:
            connection.close()
        return bytes(row[0])


class EtcdRotationTests(RotationScenario, unittest.TestCase):
    """On etcd the stored key is ``/registry/secrets/<ns>/<name>``, as kube-apiserver lays it out."""

    skip = skip_reason()

    def setUp(self):
        self.etcd = EtcdServer().start()
        self.addCleanup(self.etcd.cleanup)
        self.backend_config = {"storage": {"backend": "etcd3", "etcd": {"servers": [self.etcd.endpoint]}}}
        super().setUp()

    def raw(self, key: str) -> bytes:
        body = json.dumps({"key": base64.b64encode(f"/registry{key}".encode()).decode()}).encode()
        request = urllib.request.Request(f"{self.etcd.endpoint}/v3/kv/range", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            kvs = json.loads(response.read()).get("kvs") or []
        return base64.b64decode(kvs[0]["value"])



