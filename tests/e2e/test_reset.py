"""``testing.enable_reset``: a real server back to its snapshot between tests, without a restart.

The server (``ServerProcess(reset=True)``) snapshots its bootstrap state when started; the
class adds two ConfigMaps and snapshots again, so a test can change, delete and watch
objects the snapshot holds.  Every test starts from a reset.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
from typing import Any

from twisted.trial import unittest

from kapiserver.machinery import protobuf
from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server
from tests.e2e.test_protobuf_clients import PB, RawProtobufClient

# what the comparisons of the whole state read (Leases are left out: their holders renew them)
COLLECTIONS = ("/api/v1/namespaces", "/api/v1/configmaps", "/api/v1/serviceaccounts", "/api/v1/services",
               "/api/v1/endpoints", "/api/v1/secrets", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
               "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "/apis/rbac.authorization.k8s.io/v1/roles",
               "/apis/scheduling.k8s.io/v1/priorityclasses", "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
               "/apis/apiregistration.k8s.io/v1/apiservices")
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def without_resource_version(obj: dict) -> dict:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


class WatchReader:
    """A watch of the admin's in a thread: every event it sends, as JSON."""

    def __init__(self, server: ServerProcess, path: str) -> None:
        context = ssl.create_default_context(cafile=server.ca_path)
        context.load_cert_chain(os.path.join(server.cert_dir, "admin.crt"), os.path.join(server.cert_dir, "admin.key"))
        host, port = server.server_url.removeprefix("https://").rsplit(":", 1)
        self.conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=HANG_GUARD)
        self.conn.request("GET", path, headers={"Accept": "application/json"})
        self.response = self.conn.getresponse()
        self.events: list[dict] = []
        self.arrived = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response:
                with self.arrived:
                    self.events.append(json.loads(line))
                    self.arrived.notify_all()
        except Exception:  # (http.client fails in several ways when the test closes the socket)
            pass

    def wait(self, count: int) -> list[dict]:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.events) >= count, HANG_GUARD):
                raise AssertionError(f"{count} watch events did not arrive; got {self.events}")
            return list(self.events)

    def close(self) -> None:
        if self.conn.sock is not None:
            self.conn.sock.shutdown(socket.SHUT_RDWR)  # ends the reader's blocked read at once
        self.conn.close()


_snapshotted: set[ServerProcess] = set()


class ResetTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = shared_server("reset", extra_config=E2E_CONFIG, reset=True)
        if self.server not in _snapshotted:
            for name in ("saved", "doomed"):
                self.request("POST", CONFIGMAPS, {"metadata": {"name": name}, "data": {"v": "snapshot"}}, expect=201)
            self.server.snapshot()
            _snapshotted.add(self.server)
        self.server.reset()

    def request(self, method: str, path: str, body: Any = None, expect: int = 200) -> dict:
        status, answer = self.server.admin_request(method, path, body)
        if status != expect:
            raise AssertionError(f"{method} {path}: {status} {answer.get('message', answer)}")
        return answer

    def state(self) -> dict[str, list[dict]]:
        return {path: [without_resource_version(item) for item in self.request("GET", path)["items"]]
                for path in COLLECTIONS}

    def list_revision(self) -> int:
        return int(self.request("GET", CONFIGMAPS)["metadata"]["resourceVersion"])

    def change_things(self) -> None:
        self.request("POST", "/api/v1/namespaces", {"metadata": {"name": "made-by-test"}}, expect=201)
        self.request("POST", "/api/v1/namespaces/made-by-test/configmaps", {"metadata": {"name": "inside"}},
                     expect=201)
        self.request("POST", CONFIGMAPS, {"metadata": {"name": "made"}}, expect=201)
        saved = self.request("GET", f"{CONFIGMAPS}/saved")
        saved["data"] = {"v": "test"}
        self.request("PUT", f"{CONFIGMAPS}/saved", saved)
        self.request("DELETE", f"{CONFIGMAPS}/doomed")
        self.request("DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view")
        default = self.request("GET", "/api/v1/namespaces/default")
        default["metadata"].setdefault("labels", {})["changed"] = "yes"
        self.request("PUT", "/api/v1/namespaces/default", default)

    def test_reset_brings_back_the_snapshot(self):
        before = self.state()
        self.change_things()
        self.assertNotEqual(self.state(), before)
        done = self.server.reset()
        self.assertEqual(self.state(), before)
        self.assertEqual(self.request("GET", f"{CONFIGMAPS}/saved")["data"], {"v": "snapshot"})
        # made-by-test, its ConfigMap and what the namespace controllers put there (ServiceAccount,
        # kube-root-ca.crt), made: deleted; saved, default: rewritten; doomed, view: re-created
        self.assertGreaterEqual(done["deleted"], 3)
        self.assertEqual((done["rewritten"] >= 2, done["recreated"]), (True, 2))

    def test_resource_versions_keep_growing(self):
        start = self.list_revision()
        saved_before = int(self.request("GET", f"{CONFIGMAPS}/saved")["metadata"]["resourceVersion"])
        self.change_things()
        changed = self.list_revision()
        done = self.server.reset()
        after = self.list_revision()
        self.assertLess(start, changed)
        self.assertLess(changed, after)
        self.assertGreaterEqual(after, done["revision"])
        saved_after = int(self.request("GET", f"{CONFIGMAPS}/saved")["metadata"]["resourceVersion"])
        self.assertGreater(saved_after, changed)
        self.assertGreater(saved_after, saved_before)

    def test_a_watch_open_across_a_reset_sees_its_events(self):
        start = self.list_revision()
        watch = WatchReader(self.server, f"{CONFIGMAPS}?watch=1&resourceVersion={start}")
        self.addCleanup(watch.close)
        self.change_things()
        self.server.reset()
        events = watch.wait(6)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events[:6]],
                         [("ADDED", "made"), ("MODIFIED", "saved"), ("DELETED", "doomed"),
                          ("DELETED", "made"), ("MODIFIED", "saved"), ("ADDED", "doomed")])
        versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[:6]]
        self.assertEqual(versions, sorted(set(versions)))
        self.assertGreater(versions[0], start)
        self.assertEqual(events[4]["object"]["data"], {"v": "snapshot"})

    def test_lists_in_json_and_protobuf_agree_after_a_reset(self):
        client = RawProtobufClient(self.server.kubeconfig, self.server.workdir)
        for _ in range(2):  # the second time, the watch cache's memoized encodings are reused
            self.change_things()
            self.server.reset()
            for query in ("", "?resourceVersion=0"):
                as_json = self.request("GET", CONFIGMAPS + query)
                status, _, body = client.request("GET", CONFIGMAPS + query, accept=PB)
                self.assertEqual(status, 200)
                as_protobuf = protobuf.decode_object(body).obj
                versions = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in as_json["items"]}
                self.assertEqual(
                    {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in as_protobuf["items"]}, versions)
                self.assertEqual(sorted(versions), ["doomed", "kube-root-ca.crt", "saved"])
                self.assertEqual([i.get("data") for i in as_protobuf["items"] if i["metadata"]["name"] == "saved"],
                                 [{"v": "snapshot"}])

    def test_a_cluster_ip_is_free_again_after_a_reset(self):
        service = {"metadata": {"name": "fixed"},
                   "spec": {"clusterIP": "10.0.0.77", "ports": [{"port": 80}]}}
        self.request("POST", "/api/v1/namespaces/default/services", service, expect=201)
        status, answer = self.server.admin_request(
            "POST", "/api/v1/namespaces/default/services", {**service, "metadata": {"name": "other"}})
        self.assertEqual((status, answer["reason"]), (422, "Invalid"))  # the address is taken
        self.server.reset()
        self.request("POST", "/api/v1/namespaces/default/services", service, expect=201)

    def test_a_crd_and_its_objects_go_and_can_come_again(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        widgets = "/apis/example.com/v1/namespaces/default/widgets"
        widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        for _ in range(2):  # the second time after a reset removed the first
            self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, expect=201)
            wait_for(lambda: self.server.admin_request("POST", widgets, widget)[0] == 201, timeout=HANG_GUARD)
            self.server.reset()
            self.assertEqual(self.server.admin_request("GET", "/apis/example.com/v1")[0], 404)
            self.assertEqual(self.server.admin_request("GET", f"{widgets}/w")[0], 404)

    def test_only_a_privileged_identity_may_reset(self):
        self.server.kubeconfig_for("alice")
        safe = os.path.join(self.server.workdir, "user-alice")
        context = ssl.create_default_context(cafile=self.server.ca_path)
        context.load_cert_chain(safe + ".crt", safe + ".key")
        host, port = self.server.server_url.removeprefix("https://").rsplit(":", 1)
        for action in ("reset", "snapshot"):
            conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=HANG_GUARD)
            conn.request("POST", f"/debug/kapiserver/{action}")
            response = conn.getresponse()
            body = json.loads(response.read())
            conn.close()
            self.assertEqual((response.status, body["reason"]), (403, "Forbidden"))
            self.assertIn('"/debug/kapiserver/' + action + '"', body["message"])

    def test_other_methods_and_paths(self):
        status, answer = self.server.admin_request("GET", "/debug/kapiserver/reset")
        self.assertEqual(status, 405)
        status, answer = self.server.admin_request("POST", "/debug/kapiserver/rewind")
        self.assertEqual(status, 404)


class ResetNotEnabledTests(unittest.TestCase):
    def test_the_paths_are_not_found_by_default(self):
        server = shared_server(extra_config=E2E_CONFIG)
        for action in ("reset", "snapshot"):
            status, answer = server.admin_request("POST", f"/debug/kapiserver/{action}")
            self.assertEqual((status, answer["reason"]), (404, "NotFound"))
        with self.assertRaisesRegex(RuntimeError, "answered 404.*reset=True"):
            server.reset()


class ResetWithWorkersTests(unittest.TestCase):
    def test_every_worker_serves_the_reset_state(self):
        """workers: 2: the reset runs in one worker; the other learns of it as of any write."""
        server = ServerProcess(extra_config={**E2E_CONFIG, "workers": 2}, reset=True).start()
        self.addCleanup(server.cleanup)
        for i in range(20):
            status, _ = server.admin_request("POST", CONFIGMAPS, {"metadata": {"name": f"cm-{i}"}})
            self.assertEqual(status, 201)
        done = server.reset()
        # the 20 ConfigMaps, and any key a worker's own bookkeeping wrote since the snapshot (on a
        # busy machine the second worker's first master lease can come after it)
        self.assertGreaterEqual(done["deleted"], 20)
        # a new connection each time: the kernel hands them to either worker
        for i in range(20):
            status, _ = server.admin_request("GET", f"{CONFIGMAPS}/cm-{i}")
            self.assertEqual(status, 404)
            status, listed = server.admin_request("GET", CONFIGMAPS)
            self.assertEqual([item["metadata"]["name"] for item in listed["items"]], ["kube-root-ca.crt"])
            self.assertGreaterEqual(int(listed["metadata"]["resourceVersion"]), done["revision"])


class ResetWithEncryptionTests(unittest.TestCase):
    def test_a_reset_brings_back_an_encrypted_secret(self):
        """Encryption at rest: the snapshot keeps what is stored (ciphertext), and a Secret changed
        or deleted after it reads back as it was, decrypted with the same key."""
        from tests.e2e.test_encryption import KEY1, aescbc, encryption
        workdir = os.path.abspath(self.mktemp())
        os.makedirs(workdir)
        config_path = os.path.join(workdir, "encryption.yaml")
        with open(config_path, "w") as f:
            f.write(encryption(aescbc(("key1", KEY1))))
        server = ServerProcess(extra_config={**E2E_CONFIG, "encryption_provider_config": config_path},
                               reset=True).start()
        self.addCleanup(server.cleanup)
        secrets = "/api/v1/namespaces/default/secrets"
        status, _ = server.admin_request("POST", secrets, {"metadata": {"name": "kept"}, "stringData": {"k": "before"}})
        self.assertEqual(status, 201)
        server.snapshot()
        status, _ = server.admin_request("PUT", f"{secrets}/kept", {"metadata": {"name": "kept"},
                                                                    "stringData": {"k": "after"}})
        self.assertEqual(status, 200)
        status, _ = server.admin_request("POST", secrets, {"metadata": {"name": "new"}, "stringData": {"k": "x"}})
        self.assertEqual(status, 201)
        done = server.reset()
        self.assertEqual((done["deleted"], done["rewritten"]), (1, 1))
        status, kept = server.admin_request("GET", f"{secrets}/kept")
        self.assertEqual(status, 200)
        self.assertEqual(kept["data"], {"k": "YmVmb3Jl"})  # base64 of "before"
        status, _ = server.admin_request("GET", f"{secrets}/new")
        self.assertEqual(status, 404)
