"""The aggregator end to end: a second kapiserver, in a network namespace, serves a CRD group
behind an APIService of the first (see aggregation_setup.py).

Everything is driven through the first server with kubectl, as a user would:
discovery, create/get/delete/watch of the extension resource, ``kubectl
explain`` from the merged OpenAPI, the user forwarded to the extension server
(which authorizes with SubjectAccessReviews against the first), and the
APIService turning unavailable (503) when the extension server stops and
recovering when it starts again.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import ssl
import subprocess
import time
import urllib.error
import urllib.request

from twisted.trial import unittest

from kapiserver.testing import netns
from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import kubectl_binary
from tests.e2e.aggregation_setup import APISERVICE, GROUP, VERSION, AggregationCluster

FLUNDER = f"""
apiVersion: {GROUP}/{VERSION}
kind: Flunder
metadata: {{name: %s, namespace: default}}
spec: {{reference: other}}
"""

RBAC_FOR_ALICE = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: flunder-editor}}
rules:
- apiGroups: [{GROUP}]
  resources: [flunders]
  verbs: [get, list, watch, create, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: alice-flunders}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: flunder-editor}}
subjects: [{{kind: User, apiGroup: rbac.authorization.k8s.io, name: alice}}]
"""


_cluster: list[AggregationCluster] = []


def shared_cluster() -> AggregationCluster:
    """One pair of servers for the whole module (stopped, and the namespace removed, at exit)."""
    if not _cluster:
        reason = netns.unavailable_reason()
        if reason:
            raise unittest.SkipTest(f"the aggregation tests need a network namespace: {reason}")
        cluster = AggregationCluster()
        atexit.register(cluster.stop)
        try:
            cluster.start()
            cluster.wait_available()
        except Exception:
            cluster.stop()
            raise
        _cluster.append(cluster)
    return _cluster[0]


class AggregationTests(unittest.TestCase):
    def setUp(self) -> None:
        self.cluster = shared_cluster()

    @property
    def aggregator(self):
        return self.cluster.aggregator

    @property
    def extension(self):
        return self.cluster.extension

    def _raw(self, server, path: str, cert: str, key: str, headers: dict = {}) -> tuple[int, bytes]:
        context = ssl.create_default_context(cafile=os.path.join(server.workdir, "certs", "ca.crt"))
        context.load_cert_chain(cert, key)
        request = urllib.request.Request(server.server_url + path, headers=headers)
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    # ------------------------------------------------------------ registration and discovery

    def test_apiservices_listed_with_availability(self) -> None:
        out = self.aggregator.kubectl("get", "apiservices").stdout.splitlines()
        self.assertEqual(out[0].split(), ["NAME", "SERVICE", "AVAILABLE", "AGE"])
        rows = {line.split()[0]: line.split()[1:3] for line in out[1:]}
        self.assertEqual(rows[APISERVICE], ["wardle/api", "True"])
        self.assertEqual(rows["v1."], ["Local", "True"])
        self.assertEqual(rows["v1.rbac.authorization.k8s.io"], ["Local", "True"])
        condition = self.cluster.available()
        self.assertEqual((condition["reason"], condition["message"]), ("Passed", "all checks passed"))

    def test_discovery_includes_extension_group(self) -> None:
        out = self.aggregator.kubectl("api-resources", "--api-group", GROUP, "-o", "wide").stdout
        line = [row for row in out.splitlines() if row.startswith("flunders")]
        self.assertEqual(len(line), 1, out)
        self.assertIn(f"{GROUP}/{VERSION}", line[0])
        self.assertIn("Flunder", line[0])
        groups = json.loads(self.aggregator.kubectl("get", "--raw", "/apis").stdout)["groups"]
        names = [g["name"] for g in groups]
        # groupPriorityMinimum 1000 sorts it after every built-in group
        self.assertGreater(names.index(GROUP), names.index("discovery.k8s.io"))
        self.assertEqual(names[0], "apiregistration.k8s.io")

    # ------------------------------------------------------------ the resource through the aggregator

    def test_create_get_delete_through_aggregator(self) -> None:
        self.aggregator.kubectl("create", "-f", "-", input=FLUNDER % "via-aggregator")
        got = json.loads(self.aggregator.kubectl("get", "flunder", "via-aggregator", "-o", "json").stdout)
        self.assertEqual(got["spec"], {"reference": "other"})
        # it lives on the extension server
        direct = json.loads(self.extension.kubectl("get", "flunders.wardle.example.com", "via-aggregator",
                                                   "-o", "json").stdout)
        self.assertEqual(direct["metadata"]["uid"], got["metadata"]["uid"])
        table = self.aggregator.kubectl("get", "fl").stdout
        self.assertIn("via-aggregator", table)
        self.aggregator.kubectl("delete", "flunder", "via-aggregator")
        missing = self.aggregator.kubectl("get", "flunder", "via-aggregator", check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("NotFound", missing.stderr)

    def test_watch_streams_through_aggregator(self) -> None:
        self.aggregator.kubectl("create", "-f", "-", input=FLUNDER % "listed")
        watch = subprocess.Popen([kubectl_binary(), "--kubeconfig", self.aggregator.kubeconfig, "get", "flunders",
                                  "-w", "--output-watch-events"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        pending = [b""]

        def next_line() -> list[str]:
            while b"\n" not in pending[0]:
                ready, _, _ = select.select([watch.stdout], [], [], 20)
                self.assertTrue(ready, "kubectl -w printed nothing within 20 s")
                pending[0] += os.read(watch.stdout.fileno(), 65536)
            line, _, pending[0] = pending[0].partition(b"\n")
            return line.decode().split()
        try:
            self.assertEqual(next_line()[:2], ["EVENT", "NAME"])
            self.assertEqual(next_line()[:2], ["ADDED", "listed"])  # from the list; the watch starts now
            time.sleep(1)
            self.aggregator.kubectl("create", "-f", "-", input=FLUNDER % "watched")
            self.assertEqual(next_line()[:2], ["ADDED", "watched"])
            self.aggregator.kubectl("delete", "flunder", "watched", "listed")
            self.assertEqual(next_line()[:2], ["DELETED", "watched"])
            self.assertEqual(next_line()[:2], ["DELETED", "listed"])
        finally:
            watch.kill()
            watch.wait()

    def test_explain_from_merged_openapi(self) -> None:
        out = wait_for(lambda: (r := self.aggregator.kubectl("explain", "flunders.spec", check=False)).returncode
                       == 0 and r.stdout, timeout=90)
        self.assertIn("The name of another flunder.", out)
        self.assertIn("reference", out)

    # ------------------------------------------------------------ users and authorization

    def test_extension_server_sees_and_authorizes_the_user(self) -> None:
        self.aggregator.kubectl("apply", "-f", "-", input=RBAC_FOR_ALICE)
        alice = self.aggregator.kubeconfig_for("alice")
        bob = self.aggregator.kubeconfig_for("bob")
        # the extension server asks the aggregator about alice (SubjectAccessReview) and is allowed
        wait_for(lambda: self.aggregator.kubectl("--kubeconfig", alice, "create", "-f", "-",
                                                 input=FLUNDER % "alices", check=False).returncode == 0, timeout=20)
        self.assertIn("alices", self.aggregator.kubectl("--kubeconfig", alice, "get", "flunders").stdout)
        denied = self.aggregator.kubectl("--kubeconfig", bob, "get", "flunders", check=False)
        self.assertIn("Forbidden", denied.stderr)
        self.aggregator.kubectl("delete", "flunder", "alices")

        # what the aggregator sends, sent straight to the extension server: the front-proxy
        # client certificate and the user in X-Remote-* headers; its SubjectAccessReview decides
        certs = os.path.join(self.aggregator.workdir, "certs")
        proxy_cert = (os.path.join(certs, "front-proxy-client.crt"), os.path.join(certs, "front-proxy-client.key"))
        path = f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders"
        code, body = self._raw(self.extension, path, *proxy_cert,
                               headers={"X-Remote-User": "bob", "X-Remote-Group": "system:authenticated"})
        self.assertEqual(code, 403, body)
        status = json.loads(body)
        self.assertEqual(status["reason"], "Forbidden")
        self.assertIn('User "bob" cannot list resource "flunders"', status["message"])
        code, body = self._raw(self.extension, path, *proxy_cert,
                               headers={"X-Remote-User": "alice", "X-Remote-Group": "system:authenticated"})
        self.assertEqual(code, 200, body)
        # a client certificate of the aggregator's cluster CA is no front proxy: the headers mean nothing
        with self.assertRaises(ssl.SSLError) as refused:  # refused in the TLS handshake: not a trusted CA
            self._raw(self.extension, path, os.path.join(self.aggregator.workdir, "user-alice.crt"),
                      os.path.join(self.aggregator.workdir, "user-alice.key"), headers={"X-Remote-User": "alice"})
        self.assertIn("UNKNOWN_CA", str(refused.exception))

    # ------------------------------------------------------------ availability (runs last: it restarts)

    def test_z_stopped_extension_server_is_unavailable_then_recovers(self) -> None:
        self.extension.stop()
        failed = self.aggregator.kubectl("get", "flunders", check=False)
        self.assertNotEqual(failed.returncode, 0)
        self.assertIn("the server is currently unable to handle the request", failed.stderr)
        condition = self.cluster.wait_available("False")
        self.assertEqual(condition["reason"], "FailedDiscoveryCheck")
        self.assertIn("failing or missing response from https://", condition["message"])
        admin = os.path.join(self.aggregator.workdir, "certs")
        code, body = self._raw(self.aggregator, f"/apis/{GROUP}/{VERSION}/namespaces/default/flunders",
                               os.path.join(admin, "admin.crt"), os.path.join(admin, "admin.key"))
        self.assertEqual((code, body), (503, b"service unavailable\n"))

        self.extension.start()
        condition = self.cluster.wait_available("True")
        self.assertEqual(condition["reason"], "Passed")
        self.aggregator.kubectl("get", "flunders")
