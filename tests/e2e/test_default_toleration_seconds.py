"""DefaultTolerationSeconds: pods tolerate not-ready and unreachable nodes for 300 s unless they say otherwise."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server


class DefaultTolerationSecondsTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.ns = "tolerations-" + uuid.uuid4().hex[:8]
        self.server.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.server.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def tolerations(self, name: str, *overrides: str) -> list:
        self.server.kubectl("-n", self.ns, "run", name, "--image=nginx", "--restart=Never", *overrides)
        pod = json.loads(self.server.kubectl("-n", self.ns, "get", "pod", name, "-o", "json").stdout)
        return pod["spec"]["tolerations"]

    def test_pods_get_the_two_tolerations(self):
        self.assertEqual(self.tolerations("plain"), [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}])

    def test_a_pod_that_tolerates_everything_gets_none(self):
        own = {"operator": "Exists"}
        self.assertEqual(self.tolerations("tolerant", "--overrides", json.dumps({"spec": {"tolerations": [own]}})),
                         [own])

    def test_its_own_not_ready_toleration_is_kept(self):
        own = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 10}
        got = self.tolerations("own", "--overrides", json.dumps({"spec": {"tolerations": [own]}}))
        self.assertEqual([t["key"] for t in got], ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"])
        self.assertEqual(got[0]["tolerationSeconds"], 10)
