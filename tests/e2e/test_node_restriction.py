"""NodeRestriction (enabled in the server's configuration) as a kubelet meets it: kubectl
impersonating ``system:node:node-a`` (group ``system:nodes``, bound to the ``system:node``
ClusterRole) may register and update its own Node and create mirror pods bound to itself, and is
refused, with upstream's messages, everything that concerns another node."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

CONFIG = dict(E2E_CONFIG, admission={"enable_plugins": ["NodeRestriction"]})
NODE = "node-a"
AS_NODE = ("--as", f"system:node:{NODE}", "--as-group", "system:nodes")


def node(name: str, **labels: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})


def mirror_pod(name: str, node_name: str, **spec: object) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "annotations": {"kubernetes.io/config.mirror": "hash"}},
                       "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "nginx"}], **spec}})


class NodeRestrictionTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server("node-restriction", extra_config=CONFIG)
        self.kubectl = self.server.kubectl
        self.kubectl("create", "clusterrolebinding", "nodes-" + uuid.uuid4().hex[:6], "--clusterrole=system:node",
                     "--group=system:nodes")
        self.ns = "nr-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))
        self.kubectl("delete", "node", NODE, "--ignore-not-found")

    def as_node(self, *args: str, input: str = "", check: bool = True):
        return self.kubectl(*AS_NODE, *args, input=input or None, check=check)

    def assert_refused(self, result, message: str):
        self.assertNotEqual(result.returncode, 0, result.stdout)
        self.assertIn(message, result.stderr)

    def test_a_node_may_change_only_itself(self):
        self.as_node("create", "-f", "-", input=node(NODE, **{"kubernetes.io/hostname": NODE}))
        self.assert_refused(self.as_node("create", "-f", "-", input=node("node-b"), check=False),
                            'nodes "node-b" is forbidden: node "node-a" is not allowed to modify node "node-b"')
        self.assert_refused(
            self.as_node("create", "-f", "-", input=node("node-c", **{"node-restriction.kubernetes.io/x": "1"}),
                         check=False),
            'node "node-a" is not allowed to set the following labels: node-restriction.kubernetes.io/x')
        # the kubelet's own labels may change, others under kubernetes.io may not
        self.as_node("label", "node", NODE, "topology.kubernetes.io/zone=z1")
        self.assert_refused(self.as_node("label", "node", NODE, "node-role.kubernetes.io/control-plane=",
                                         check=False),
                            f'nodes "{NODE}" is forbidden: is not allowed to modify labels: '
                            f'node-role.kubernetes.io/control-plane')
        self.assert_refused(self.as_node("taint", "node", NODE, "dedicated=x:NoSchedule", check=False),
                            f'node "{NODE}" is not allowed to modify taints')
        # an administrator may do both
        self.kubectl("taint", "node", NODE, "dedicated=x:NoSchedule")
        self.kubectl("delete", "node", NODE)

    def test_a_node_creates_only_its_mirror_pods(self):
        plain = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                            "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "nginx"}]}})
        self.assert_refused(self.as_node("-n", self.ns, "create", "-f", "-", input=plain, check=False),
                            'pods "plain" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, '
                            'node "node-a" can only create mirror pods')
        self.assert_refused(self.as_node("-n", self.ns, "create", "-f", "-", input=mirror_pod("elsewhere", "node-b"),
                                         check=False),
                            'node "node-a" can only create pods with spec.nodeName set to itself')
        # (a Secret is refused before, by the ServiceAccount plugin's rule for mirror pods, as upstream)
        with_config = mirror_pod("configured", NODE, volumes=[{"name": "c", "configMap": {"name": "c"}}])
        self.assert_refused(self.as_node("-n", self.ns, "create", "-f", "-", input=with_config, check=False),
                            'node "node-a" can not create pods that reference configmaps')
        self.as_node("-n", self.ns, "create", "-f", "-", input=mirror_pod("static-web", NODE))
        pod = json.loads(self.kubectl("-n", self.ns, "get", "pod", "static-web", "-o", "json").stdout)
        self.assertEqual(pod["spec"]["nodeName"], NODE)
        self.assertNotIn("serviceAccountName", pod["spec"])  # the ServiceAccount plugin leaves mirror pods alone
        # pods bound elsewhere are not the node's to delete
        self.kubectl("-n", self.ns, "create", "-f", "-", input=mirror_pod("other-web", "node-b"))
        self.assert_refused(self.as_node("-n", self.ns, "delete", "pod", "other-web", check=False),
                            'node "node-a" can only delete pods with spec.nodeName set to itself')
        self.as_node("-n", self.ns, "delete", "pod", "static-web", "--wait=false")

    def test_node_leases_are_per_node(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "spec": {"holderIdentity": NODE, "leaseDurationSeconds": 40}}
        self.as_node("-n", "kube-node-lease", "apply", "-f", "-",
                     input=json.dumps(dict(lease, metadata={"name": NODE})))
        self.assert_refused(self.as_node("-n", "kube-node-lease", "create", "-f", "-",
                                         input=json.dumps(dict(lease, metadata={"name": "node-b"})), check=False),
                            "can only access node lease with the same name as the requesting node")
        self.assert_refused(self.as_node("-n", self.ns, "create", "-f", "-",
                                         input=json.dumps(dict(lease, metadata={"name": NODE})), check=False),
                            'can only access leases in the "kube-node-lease" system namespace')
