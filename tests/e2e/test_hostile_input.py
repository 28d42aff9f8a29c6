"""Nothing a client sends can crash, stall or poison the server (a real process, real clients).

Deep bodies in every content type, a deterministic sample of the fuzzer's
cases while ``/readyz`` is polled, then every kind listed in JSON, YAML,
Table and protobuf; kubectl and the Python client see upstream's decode
errors; CRD patterns are RE2.  Nothing is timed: every request has a guard
against a hang (a stalled reactor answers nothing), and the fuzzer counts an
answer as a hang only past that guard (its own default, 5 s, is for bench
runs on an idle machine).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

from twisted.trial import unittest

from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.process import E2E_CONFIG, REPO_ROOT, ServerProcess

FUZZ = os.path.join(REPO_ROOT, "bench", "fuzz.py")
sys.path.insert(0, os.path.join(REPO_ROOT, "bench"))
import fuzz  # noqa: E402  (bench/fuzz.py: the generator and its HTTPS client)

_server: ServerProcess | None = None


def server() -> ServerProcess:
    """One server of this module's own: these tests try to kill it."""
    global _server
    if _server is None or _server.proc is None or _server.proc.poll() is not None:
        _server = ServerProcess(extra_config=E2E_CONFIG).start()
    return _server


def tearDownModule() -> None:
    if _server is not None:
        _server.cleanup()


class DeepBodyTests(unittest.TestCase):
    def test_50k_and_1m_levels_in_every_content_type(self):
        srv = server()
        conn = fuzz.Connection(srv.kubeconfig, timeout=HANG_GUARD)
        self.addCleanup(conn.close)
        fuzz.prepare(conn)
        seen = set()
        for case in fuzz.depth_cases():
            status, body, _ = conn.request(case.method, case.path, case.body, case.content_type)
            self.assertIn(status, (400, 413, 415, 422), f"{case.describe()}: {status} {body[:300]!r}")
            self.assertTrue(json.loads(body)["reason"], case.describe())
            seen.add(case.content_type)
            self.assertEqual(conn.request("GET", "/readyz")[0], 200, case.describe())
        self.assertEqual(seen, {fuzz.JSON, fuzz.YAML, fuzz.PROTOBUF, fuzz.MERGE, fuzz.SMP, fuzz.JSON_PATCH,
                                fuzz.APPLY})
        self.assertIsNone(srv.proc.poll(), "the server process must be alive")


class FuzzSampleTests(unittest.TestCase):
    def test_fuzz_sample_keeps_the_server_alive_ready_and_listable(self):
        srv = server()
        readyz: list[int] = []
        failures: list[str] = []
        done = threading.Event()

        def poll() -> None:
            conn = fuzz.Connection(srv.kubeconfig, timeout=HANG_GUARD)
            while not done.is_set():
                status, _, _ = conn.request("GET", "/readyz")
                readyz.append(status)
                if status != 200:
                    failures.append(f"/readyz answered {status}")
                time.sleep(0.1)
            conn.close()
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            result = subprocess.run([sys.executable, FUZZ, "--kubeconfig", srv.kubeconfig, "--cases", "300",
                                     "--seed", "20261123", "--quiet", "--hang-seconds", str(HANG_GUARD)],
                                    capture_output=True, text=True, timeout=600)
        finally:
            done.set()
            poller.join(HANG_GUARD)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("problems: 0", result.stdout)
        # /readyz answered 200 all along the cases (a reactor stalled for good would answer nothing)
        self.assertFalse(failures, failures[:5])
        self.assertTrue(readyz)
        self.assertIsNone(srv.proc.poll())
        # every kind still lists, in every encoding
        conn = fuzz.Connection(srv.kubeconfig, timeout=HANG_GUARD)
        self.addCleanup(conn.close)
        resources = [r for r in fuzz.discover(conn) if "list" in r.verbs]
        self.assertGreater(len(resources), 30)
        for res in resources:
            path = res.collection("") if not res.namespaced else res.collection().replace("/namespaces/fuzz", "")
            # protobuf as client-go asks for it (custom resources answer JSON)
            for accept in (fuzz.JSON, fuzz.YAML, "application/json;as=Table;v=v1;g=meta.k8s.io",
                           fuzz.PROTOBUF + ", application/json"):
                status, body, _ = conn.request("GET", path, accept=accept)
                self.assertEqual(status, 200, f"{path} as {accept}: {body[:300]!r}")


class ClientTests(unittest.TestCase):
    def setUp(self):
        self.server = server()

    def write(self, text: str) -> str:
        path = os.path.join(self.server.workdir, f"{self._testMethodName}.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_kubectl_sees_upstreams_decode_errors(self):
        path = self.write("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typed\n  labels: [a]\n")
        result = self.server.kubectl("create", "--validate=false", "-f", path, check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type "
                      "map[string]string", result.stderr)
        # kubectl create --raw sends the file as is: YAML under a JSON content type
        path = self.write("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: raw\n")
        result = self.server.kubectl("create", "--raw", "/api/v1/namespaces", "-f", path, check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; "
                      "json parse error: invalid character 'a' looking for beginning of value", result.stderr)
        self.assertEqual(self.server.kubectl("get", "cm", "-A", "-o", "name").returncode, 0)

    def test_python_client_gets_400_for_wrong_types(self):
        from kubernetes import client, dynamic
        from kubernetes.client.rest import ApiException

        # the typed API checks types itself (pydantic); the dynamic client sends what it is given
        configmaps = dynamic.DynamicClient(self.server.python_client()).resources.get(api_version="v1",
                                                                                       kind="ConfigMap")
        with self.assertRaises(ApiException) as caught:
            configmaps.create(namespace="default", body={"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": "pc"}, "data": {"a": 1}})
        self.assertEqual(caught.exception.status, 400)
        status = json.loads(caught.exception.body)
        self.assertEqual(status["reason"], "BadRequest")
        self.assertEqual(status["message"], 'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: '
                                            'cannot unmarshal number into Go struct field ConfigMap.data of type '
                                            'string')
        api = client.CoreV1Api(self.server.python_client())
        self.assertIsNotNone(api.list_config_map_for_all_namespaces())

    def test_crd_patterns_are_re2(self):
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        ext = client.ApiextensionsV1Api(self.server.python_client())

        def crd(plural: str, pattern: str) -> dict:
            return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                    "metadata": {"name": f"{plural}.re2.example.com"},
                    "spec": {"group": "re2.example.com", "scope": "Namespaced",
                             "names": {"plural": plural, "singular": plural[:-1], "kind": plural.title()[:-1]},
                             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                                 "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                     "type": "object", "properties": {"s": {"type": "string",
                                                                            "pattern": pattern}}}}}}}]}}
        for bad in ("([", r"(a)\1", "(?=a)"):
            with self.assertRaises(ApiException) as caught:
                ext.create_custom_resource_definition(crd("badpatterns", bad))
            self.assertEqual(caught.exception.status, 422, bad)
            self.assertIn("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[s].pattern",
                          caught.exception.body)
        ext.create_custom_resource_definition(crd("slows", "^(a+)+$"))
        custom = client.CustomObjectsApi(self.server.python_client())

        def served() -> bool:
            try:
                custom.list_namespaced_custom_object("re2.example.com", "v1", "default", "slows")
                return True
            except ApiException:
                return False
        wait_for(served, timeout=HANG_GUARD, interval=0.1)
        # 2^40 steps for a backtracking engine: the server would never answer (the client's
        # guard against a hang would end the test); RE2 answers at once
        with self.assertRaises(ApiException) as caught:
            custom.create_namespaced_custom_object("re2.example.com", "v1", "default", "slows", {
                "apiVersion": "re2.example.com/v1", "kind": "Slow", "metadata": {"name": "s"},
                "spec": {"s": "a" * 40 + "b"}}, _request_timeout=HANG_GUARD)
        self.assertEqual(caught.exception.status, 422)
        self.assertIn("should match '^(a+)+$'", caught.exception.body)
