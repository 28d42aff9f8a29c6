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

import http.client
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


class ManyCausesTests(unittest.TestCase):
    def test_400k_bad_finalizers_is_a_422_that_does_not_hold_up_readyz(self):
        """Every finalizer ``a`` is a cause of the 422, as upstream's (core's ValidateObjectMeta checks
        each at ``metadata.finalizers[i]``): 400,000 of them (a 1.6 MB body) are answered with
        upstream's 422 Invalid, and a /readyz sent after the write is answered before it."""
        from tests.e2e import rawclients  # (the module imports h2, which the fuzz sample does not need)
        srv = server()
        host, port = rawclients.address(srv)
        context = rawclients.tls_context(srv)
        finalizers = ["a"] * 400_000
        answered: list[str] = []
        big: dict = {}
        sent = threading.Event()

        def write(kind: str, path: str) -> None:
            body = json.dumps({"apiVersion": "v1", "kind": kind, "metadata": {"name": "big", "finalizers": finalizers},
                               "data": {}}).encode()
            conn = http.client.HTTPSConnection(host, port, context=context, timeout=120)
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            sent.set()
            response = conn.getresponse()
            answered.append(kind)
            big[kind] = (response.status, json.loads(response.read()))
            conn.close()

        for kind, path in (("ConfigMap", "/api/v1/namespaces/default/configmaps"),
                           ("Secret", "/api/v1/namespaces/default/secrets")):
            answered.clear()
            sent.clear()
            writer = threading.Thread(target=write, args=(kind, path))
            writer.start()
            self.assertTrue(sent.wait(60))  # the whole body is on its way
            ready = http.client.HTTPSConnection(host, port, context=context, timeout=120)
            ready.request("GET", "/readyz")
            self.assertEqual(ready.getresponse().read(), b"ok")
            answered.append("readyz")
            ready.close()
            writer.join(120)
            self.assertEqual(answered, ["readyz", kind])
            status, refused = big[kind]
            self.assertEqual((status, refused["reason"]), (422, "Invalid"))
            causes = refused["details"]["causes"]
            self.assertEqual(len(causes), len(finalizers))
            self.assertEqual(causes[-1], {
                "reason": "FieldValueInvalid", "field": "metadata.finalizers[399999]",
                "message": 'Invalid value: "a": name is neither a standard finalizer name nor is it fully qualified'})
            self.assertTrue(refused["message"].startswith(
                f'{kind} "big" is invalid: [metadata.finalizers[0]: Invalid value: "a": name is neither'))
        self.assertIsNone(srv.proc.poll(), "the server process must be alive")
