"""kubectl 1.32 against a real kapiserver process, with the generated admin kubeconfig.

Everyday work on namespaces, ConfigMaps, Secrets, ServiceAccounts and Leases,
with no extra flags (no --validate=false, no --insecure-skip-tls-verify).
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import tempfile
import textwrap
import time

from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, kubectl_binary, shared_server


class KubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"kc-{self._testMethodName.replace('_', '-')[5:40].strip('-')}"
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.server.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def test_get_namespaces_lists_bootstrap_ones_with_columns(self):
        out = self.kubectl("get", "ns").stdout
        header = out.splitlines()[0].split()
        self.assertEqual(header, ["NAME", "STATUS", "AGE"])
        names = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.assertEqual(names.get(ns), "Active", out)

    def test_configmap_create_get_yaml(self):
        self.kubectl("-n", self.ns, "create", "configmap", "c", "--from-literal=a=b")
        out = self.kubectl("-n", self.ns, "get", "cm", "c", "-o", "yaml").stdout
        self.assertIn("a: b", out)
        self.assertIn("name: c", out)
        table = self.kubectl("-n", self.ns, "get", "cm").stdout
        self.assertEqual(table.splitlines()[0].split(), ["NAME", "DATA", "AGE"])
        row = [line.split() for line in table.splitlines() if line.startswith("c ")][0]
        self.assertEqual(row[1], "1")

    def test_apply_twice_changed_and_unchanged(self):
        path = self.write(f"""
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: applied
              namespace: {self.ns}
            data:
              color: blue
            """)
        self.assertIn("created", self.kubectl("apply", "-f", path).stdout)
        self.assertIn("unchanged", self.kubectl("apply", "-f", path).stdout)
        with open(path) as f:
            changed = f.read().replace("blue", "green")
        with open(path, "w") as f:
            f.write(changed)
        self.assertIn("configured", self.kubectl("apply", "-f", path).stdout)
        got = json.loads(self.kubectl("-n", self.ns, "get", "cm", "applied", "-o", "json").stdout)
        self.assertEqual(got["data"], {"color": "green"})

    def test_create_from_file_validates_against_openapi(self):
        bad = self.write(f"""
            apiVersion: v1
            kind: ConfigMap
            metadata:
              name: strict
              namespace: {self.ns}
            data:
              a: b
            bogusField: 1
            """)
        result = self.kubectl("create", "-f", bad, check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("bogusField", result.stderr)

    def test_label_annotate_patch(self):
        self.kubectl("-n", self.ns, "create", "configmap", "p", "--from-literal=a=1")
        self.kubectl("-n", self.ns, "label", "cm", "p", "team=blue")
        self.kubectl("-n", self.ns, "annotate", "cm", "p", "note=hello")
        self.kubectl("-n", self.ns, "patch", "cm", "p", "--type", "merge", "-p", '{"data":{"b":"2"}}')
        self.kubectl("-n", self.ns, "patch", "cm", "p", "--type", "json",
                     "-p", '[{"op":"replace","path":"/data/a","value":"9"}]')
        got = json.loads(self.kubectl("-n", self.ns, "get", "cm", "p", "-o", "json").stdout)
        self.assertEqual(got["metadata"]["labels"], {"team": "blue"})
        self.assertEqual(got["metadata"]["annotations"]["note"], "hello")
        self.assertEqual(got["data"], {"a": "9", "b": "2"})
        out = self.kubectl("-n", self.ns, "get", "cm", "-l", "team=blue", "-o", "name").stdout
        self.assertEqual(out.split(), ["configmap/p"])

    def test_edit_with_editor_script(self):
        self.kubectl("-n", self.ns, "create", "configmap", "e", "--from-literal=mode=old")
        editor = os.path.join(self.server.workdir, "editor.sh")
        with open(editor, "w") as f:
            f.write("#!/bin/sh\nsed -i 's/mode: old/mode: new/' \"$1\"\n")
        os.chmod(editor, stat.S_IRWXU)
        self.kubectl("-n", self.ns, "edit", "cm", "e", env={"EDITOR": editor, "KUBE_EDITOR": editor})
        got = json.loads(self.kubectl("-n", self.ns, "get", "cm", "e", "-o", "json").stdout)
        self.assertEqual(got["data"], {"mode": "new"})

    def test_get_watch_prints_changes_by_another_client(self):
        cmd = [kubectl_binary(), "--kubeconfig", self.server.kubeconfig, "-n", self.ns, "get", "cm", "-w",
               "--request-timeout=20s"]
        watcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0)
            self.kubectl("-n", self.ns, "create", "configmap", "watched", "--from-literal=x=1")
            lines = []
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                line = watcher.stdout.readline()
                lines.append(line)
                if line.startswith("watched"):
                    break
            self.assertTrue(any(line.startswith("watched") for line in lines), lines)
        finally:
            watcher.kill()
            watcher.wait()

    def test_secret_and_serviceaccount(self):
        self.kubectl("-n", self.ns, "create", "secret", "generic", "s", "--from-literal=password=hunter2")
        got = json.loads(self.kubectl("-n", self.ns, "get", "secret", "s", "-o", "json").stdout)
        self.assertEqual(got["type"], "Opaque")
        self.assertEqual(got["data"], {"password": "aHVudGVyMg=="})
        header = self.kubectl("-n", self.ns, "get", "secrets").stdout.splitlines()[0].split()
        self.assertEqual(header, ["NAME", "TYPE", "DATA", "AGE"])
        self.kubectl("-n", self.ns, "create", "serviceaccount", "robot")
        out = self.kubectl("-n", self.ns, "get", "sa", "-o", "name").stdout.split()
        self.assertIn("serviceaccount/robot", out)

    def test_namespace_gets_default_sa_and_root_ca(self):
        wait_for(lambda: "serviceaccount/default" in self.kubectl("-n", self.ns, "get", "sa", "-o", "name").stdout)
        cm = wait_for(lambda: self.kubectl("-n", self.ns, "get", "cm", "kube-root-ca.crt", "-o", "json",
                                           check=False).stdout)
        self.assertIn("BEGIN CERTIFICATE", json.loads(cm)["data"]["ca.crt"])

    def test_explain_and_api_resources(self):
        out = self.kubectl("explain", "configmap.data").stdout
        self.assertIn("Data contains the configuration data", out)
        out = self.kubectl("explain", "lease.spec").stdout
        self.assertIn("holderIdentity", out)
        out = self.kubectl("api-resources").stdout
        rows = {line.split()[0]: line for line in out.splitlines()[1:]}
        for name in ("configmaps", "namespaces", "secrets", "serviceaccounts", "events", "leases"):
            self.assertIn(name, rows)
        self.assertIn("cm", rows["configmaps"].split())
        self.assertIn("coordination.k8s.io/v1", self.kubectl("api-versions").stdout.split())

    def test_delete_namespace_removes_contents(self):
        ns = self.ns + "-gone"
        self.kubectl("create", "ns", ns)
        self.kubectl("-n", ns, "create", "configmap", "inside", "--from-literal=a=b")
        self.kubectl("delete", "ns", ns, "--timeout=30s")
        result = self.kubectl("get", "ns", ns, check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("NotFound", result.stderr)
        self.assertEqual(self.kubectl("get", "cm", "-A", "--field-selector", f"metadata.namespace={ns}",
                                      "-o", "name").stdout.strip(), "")

    def test_readyz_verbose(self):
        out = self.kubectl("get", "--raw", "/readyz?verbose").stdout
        self.assertIn("[+]ping ok", out)
        self.assertIn("readyz check passed", out)

    def test_create_in_terminating_namespace_is_forbidden(self):
        ns = self.ns + "-term"
        self.kubectl("create", "ns", ns)
        self.kubectl("-n", ns, "create", "configmap", "held", "--from-literal=a=b")
        self.kubectl("-n", ns, "patch", "cm", "held", "--type", "merge",
                     "-p", '{"metadata":{"finalizers":["example.com/hold"]}}')
        self.kubectl("delete", "ns", ns, "--wait=false")
        result = self.kubectl("-n", ns, "create", "configmap", "late", "--from-literal=a=b", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("is forbidden: unable to create new content in namespace", result.stderr)
        self.assertIn("because it is being terminated", result.stderr)
        self.kubectl("-n", ns, "patch", "cm", "held", "--type", "merge", "-p", '{"metadata":{"finalizers":null}}')
        wait_for(lambda: self.kubectl("get", "ns", ns, check=False).returncode != 0, timeout=30)
