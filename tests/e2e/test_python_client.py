"""The official ``kubernetes`` Python client against a real kapiserver process."""
from __future__ import annotations

import threading
import uuid

from twisted.trial import unittest

from kapiserver.testing.eventually import eventually
from kapiserver.testing.process import E2E_CONFIG, shared_server

COMPACTION_RETAIN = E2E_CONFIG["storage"]["sqlite"]["compaction_retain_revisions"]


class PythonClientTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.api = self.server.python_client()
        self.core = client.CoreV1Api(self.api)
        self.coord = client.CoordinationV1Api(self.api)
        self.client = client
        self.ns = "py-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def cm(self, name: str, data=None, labels=None):
        return self.client.V1ConfigMap(metadata=self.client.V1ObjectMeta(name=name, labels=labels),
                                       data=data or {})

    def test_configmap_crud(self):
        created = self.core.create_namespaced_config_map(self.ns, self.cm("a", {"k": "v"}))
        self.assertEqual(created.metadata.namespace, self.ns)
        listed = self.core.list_namespaced_config_map(self.ns, field_selector="metadata.name=a")
        self.assertEqual([i.metadata.name for i in listed.items], ["a"])
        patched = self.core.patch_namespaced_config_map("a", self.ns, {"data": {"k2": "v2"}})
        self.assertEqual(patched.data, {"k": "v", "k2": "v2"})
        self.core.delete_namespaced_config_map("a", self.ns)
        from kubernetes.client.rest import ApiException
        with self.assertRaises(ApiException) as ctx:
            self.core.read_namespaced_config_map("a", self.ns)
        self.assertEqual(ctx.exception.status, 404)

    def test_lease_crud(self):
        lease = self.client.V1Lease(metadata=self.client.V1ObjectMeta(name="leader"),
                                    spec=self.client.V1LeaseSpec(holder_identity="me", lease_duration_seconds=15))
        created = self.coord.create_namespaced_lease(self.ns, lease)
        self.assertEqual(created.spec.holder_identity, "me")
        created.spec.holder_identity = "you"
        replaced = self.coord.replace_namespaced_lease("leader", self.ns, created)
        self.assertEqual(replaced.spec.holder_identity, "you")
        self.assertGreater(int(replaced.metadata.resource_version), int(created.metadata.resource_version))
        self.coord.delete_namespaced_lease("leader", self.ns)
        self.assertEqual(self.coord.list_namespaced_lease(self.ns).items, [])

    def test_paginated_list_returns_each_object_once(self):
        for i in range(25):
            self.core.create_namespaced_config_map(self.ns, self.cm(f"p{i:02d}", labels={"set": "p"}))
        seen, token = [], None
        while True:
            page = self.core.list_namespaced_config_map(self.ns, label_selector="set=p", limit=7,
                                                        _continue=token)
            seen += [i.metadata.name for i in page.items]
            token = page.metadata._continue
            if not token:
                break
        self.assertEqual(sorted(seen), [f"p{i:02d}" for i in range(25)])
        self.assertEqual(len(seen), len(set(seen)))

    def test_watch_resumed_from_resource_version(self):
        from kubernetes import watch
        first = self.core.create_namespaced_config_map(self.ns, self.cm("w0"))
        self.core.create_namespaced_config_map(self.ns, self.cm("w1"))
        self.core.patch_namespaced_config_map("w0", self.ns, {"data": {"x": "1"}})
        self.core.delete_namespaced_config_map("w1", self.ns)
        w = watch.Watch()
        events = []
        for event in w.stream(self.core.list_namespaced_config_map, self.ns,
                              resource_version=first.metadata.resource_version, timeout_seconds=2,
                              field_selector="metadata.name!=kube-root-ca.crt"):
            events.append((event["type"], event["object"].metadata.name))
            if len(events) == 3:
                w.stop()
        self.assertEqual(events, [("ADDED", "w1"), ("MODIFIED", "w0"), ("DELETED", "w1")])

    def test_compacted_resource_version_is_410(self):
        from kubernetes.client.rest import ApiException
        first = self.core.create_namespaced_config_map(self.ns, self.cm("old"))
        # the shared server compacts every second, keeping COMPACTION_RETAIN revisions
        for i in range(COMPACTION_RETAIN + 20):
            self.core.patch_namespaced_config_map("old", self.ns, {"data": {"n": str(i)}})

        def compacted() -> ApiException | None:
            try:
                self.core.list_namespaced_config_map(self.ns, resource_version=first.metadata.resource_version,
                                                     resource_version_match="Exact")
            except ApiException as e:
                return e
            return None  # (not compacted yet: the compactor runs a moment later on a busy machine)

        try:
            refused = eventually(compacted, "the first revision to be compacted")
        except AssertionError as e:  # (seen once in a full run: say what the server's compactor logged)
            logged = [line for line in self.server.log_lines() if "compact" in line.lower()]
            raise AssertionError(f"{e}; the server logged about compaction: {logged[-20:]}") from None
        self.assertEqual(refused.status, 410)
        self.assertIn("too old resource version", refused.body)

    def test_racing_updates_one_wins_one_conflicts(self):
        from kubernetes.client.rest import ApiException
        base = self.core.create_namespaced_config_map(self.ns, self.cm("race", {"v": "0"}))
        results = []
        barrier = threading.Barrier(2)

        def update(value):
            body = self.cm("race", {"v": value})
            body.metadata.resource_version = base.metadata.resource_version
            core = self.client.CoreV1Api(self.server.python_client())
            barrier.wait()
            try:
                core.replace_namespaced_config_map("race", self.ns, body)
                results.append(200)
            except ApiException as e:
                results.append(e.status)
        threads = [threading.Thread(target=update, args=(v,)) for v in ("a", "b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), [200, 409])
