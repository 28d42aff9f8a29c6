"""The Node authorizer on a real server (``authorization.modes: [Node, RBAC]``, NodeRestriction enabled), as two
kubelets meet it: ``system:node:node-a`` and ``system:node:node-b`` in ``system:nodes``, each with a client
certificate of the cluster CA, and nothing bound to them in RBAC (as upstream, ``system:node`` has no subjects).

Each node may read what the pods bound to it use (their Secrets, ConfigMaps, PVCs, the PVs bound to those and
the PVs' Secrets, tokens of their ServiceAccounts) and its own Node, Lease and CSINode; not the other node's,
nor anything no pod of its own uses; once a pod is deleted, what only it used is unreadable again.  Refusals are
403s ending in upstream's reasons (plugin/pkg/auth/authorizer/node, v1.32), which the expectations spell out.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server

NS = "node-authz"
CONFIG = dict(E2E_CONFIG, authorization={"modes": ["Node", "RBAC"]},
              admission={"enable_plugins": ["NodeRestriction"]})
NODES = ("node-a", "node-b")


def setup_manifest() -> str:
    objects: list[dict] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                           {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "unreferenced", "namespace": NS},
                            "stringData": {"k": "v"}}]
    for node in NODES:
        x = node[-1]  # a, b
        objects += [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": f"sa-{x}", "namespace": NS}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s-{x}", "namespace": NS},
             "stringData": {"k": "v"}},
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"csi-{x}", "namespace": NS},
             "stringData": {"k": "v"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{x}", "namespace": NS},
             "data": {"k": "v"}},
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{x}"},
             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                      "claimRef": {"namespace": NS, "name": f"pvc-{x}"},
                      "csi": {"driver": "csi.example.com", "volumeHandle": f"vol-{x}",
                              "nodePublishSecretRef": {"namespace": NS, "name": f"csi-{x}"}}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"pvc-{x}", "namespace": NS},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": f"pv-{x}",
                      "resources": {"requests": {"storage": "1Gi"}}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{x}", "namespace": NS},
             "spec": {"nodeName": node, "serviceAccountName": f"sa-{x}",
                      "containers": [{"name": "app", "image": "nginx",
                                      "envFrom": [{"configMapRef": {"name": f"cm-{x}"}}]}],
                      "volumes": [{"name": "secret", "secret": {"secretName": f"s-{x}"}},
                                  {"name": "data", "persistentVolumeClaim": {"claimName": f"pvc-{x}"}}]}},
            {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"va-{x}"},
             "spec": {"attacher": "csi.example.com", "nodeName": node, "source": {"persistentVolumeName": f"pv-{x}"}}},
        ]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})


def refusal(node: str, verb: str, resource: str, where: str, reason: str, name: str = "", group: str = "") -> str:
    """Upstream's 403 message for a request of ``node`` refused with ``reason``."""
    qualified = f"{resource.split('/')[0]}.{group}" if group else resource.split("/")[0]
    subject = f'{qualified} "{name}"' if name else qualified
    scope = f'in the namespace "{where}"' if where else "at the cluster scope"
    return (f'{subject} is forbidden: User "system:node:{node}" cannot {verb} resource "{resource}" in API group '
            f'"{group}" {scope}: {reason}')


def unrelated(node: str) -> str:
    return f"no relationship found between node '{node}' and this object"


_prepared: dict[str, ServerProcess] = {}


def node_server() -> ServerProcess:
    """The shared server, with the setup's objects (once per server process)."""
    server = shared_server("node-authorizer", extra_config=CONFIG)
    if _prepared.get("server") is not server:
        path = os.path.join(server.workdir, "node-authz-setup.json")
        with open(path, "w") as f:
            f.write(setup_manifest())
        server.kubectl("apply", "-f", path)
        _prepared["server"] = server
    return server


class NodeAuthorizerTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = node_server()
        from kubernetes import client as k8s
        self.k8s = k8s
        self.api: dict[str, Any] = {}
        for node in NODES:
            kubeconfig = self.server.kubeconfig_for(f"system:node:{node}", ("system:nodes",))
            self.api[node] = self.server.python_client(kubeconfig)
        self.core = {node: k8s.CoreV1Api(api) for node, api in self.api.items()}
        # the graph follows the pods a moment after they are stored
        wait_for(lambda: self.allowed(lambda: self.core["node-a"].read_namespaced_secret("s-a", NS)))

    def allowed(self, call: Callable[[], Any]) -> bool:
        from kubernetes.client.exceptions import ApiException
        try:
            call()
        except ApiException as e:
            if e.status == 403:
                return False
            raise
        return True

    def assert_refused(self, call: Callable[[], Any], message: str) -> None:
        from kubernetes.client.exceptions import ApiException
        with self.assertRaises(ApiException) as caught:
            call()
        self.assertEqual(caught.exception.status, 403, caught.exception.body)
        status = json.loads(caught.exception.body)
        self.assertEqual((status["reason"], status["message"]), ("Forbidden", message))

    def test_a_node_reads_what_its_pods_use_and_nothing_else(self) -> None:
        for node, other in (("node-a", "node-b"), ("node-b", "node-a")):
            x, y = node[-1], other[-1]
            core, storage = self.core[node], self.k8s.StorageV1Api(self.api[node])
            self.assertEqual(core.read_namespaced_secret(f"s-{x}", NS).data, {"k": "dg=="})
            self.assertEqual(core.read_namespaced_config_map(f"cm-{x}", NS).data, {"k": "v"})
            self.assertEqual(core.read_namespaced_persistent_volume_claim(f"pvc-{x}", NS).spec.volume_name, f"pv-{x}")
            self.assertEqual(core.read_persistent_volume(f"pv-{x}").spec.claim_ref.name, f"pvc-{x}")
            self.assertEqual(core.read_namespaced_secret(f"csi-{x}", NS).metadata.name, f"csi-{x}")  # the PV's
            self.assertEqual(storage.read_volume_attachment(f"va-{x}").spec.node_name, node)
            self.assertEqual(core.read_namespaced_pod(f"pod-{x}", NS).spec.node_name, node)
            # a watch of one Secret, as the kubelet's secret manager does it
            self.assertEqual([s.metadata.name for s in core.list_namespaced_secret(
                NS, field_selector=f"metadata.name=s-{x}").items], [f"s-{x}"])
            for call, verb, resource, where, name in (
                    (lambda: core.read_namespaced_secret(f"s-{y}", NS), "get", "secrets", NS, f"s-{y}"),
                    (lambda: core.read_namespaced_secret("unreferenced", NS), "get", "secrets", NS, "unreferenced"),
                    (lambda: core.read_namespaced_secret(f"csi-{y}", NS), "get", "secrets", NS, f"csi-{y}"),
                    (lambda: core.read_namespaced_config_map(f"cm-{y}", NS), "get", "configmaps", NS, f"cm-{y}"),
                    (lambda: core.read_namespaced_persistent_volume_claim(f"pvc-{y}", NS), "get",
                     "persistentvolumeclaims", NS, f"pvc-{y}"),
                    (lambda: core.read_persistent_volume(f"pv-{y}"), "get", "persistentvolumes", "", f"pv-{y}"),
                    (lambda: core.read_namespaced_pod(f"pod-{y}", NS), "get", "pods", NS, f"pod-{y}"),
                    (lambda: core.list_namespaced_secret(NS, field_selector=f"metadata.name=s-{y}"), "list",
                     "secrets", NS, f"s-{y}")):
                self.assert_refused(call, refusal(node, verb, resource, where, unrelated(node), name))
            self.assert_refused(lambda: storage.read_volume_attachment(f"va-{y}"), refusal(
                node, "get", "volumeattachments", "", unrelated(node), f"va-{y}", "storage.k8s.io"))
            # reading many at once is not the Node authorizer's to allow, nor RBAC's here
            self.assert_refused(lambda: core.list_namespaced_secret(NS),
                                refusal(node, "list", "secrets", NS, "No Object name found"))
            self.assert_refused(lambda: core.list_persistent_volume(), refusal(
                node, "list", "persistentvolumes", "", "can only get individual resources of this type"))

    def test_its_own_pods_by_field_selector(self) -> None:
        core = self.core["node-a"]
        pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-a").items
        self.assertIn("pod-a", [p.metadata.name for p in pods])
        self.assertNotIn("pod-b", [p.metadata.name for p in pods])
        self.assert_refused(lambda: core.list_pod_for_all_namespaces(), refusal(
            "node-a", "list", "pods", "", "can only list/watch pods with spec.nodeName field selector"))
        self.assert_refused(lambda: core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-b"), refusal(
            "node-a", "list", "pods", "", "can only list/watch pods with spec.nodeName field selector"))

    def test_tokens_for_its_pods_service_accounts(self) -> None:
        core = self.core["node-a"]
        for x, allowed in (("a", True), ("b", False)):
            pod = self.server.kubectl("-n", NS, "get", "pod", f"pod-{x}", "-o", "json").stdout
            request = self.k8s.AuthenticationV1TokenRequest(spec=self.k8s.V1TokenRequestSpec(
                audiences=[], bound_object_ref=self.k8s.V1BoundObjectReference(
                    api_version="v1", kind="Pod", name=f"pod-{x}", uid=json.loads(pod)["metadata"]["uid"])))
            if allowed:
                token = core.create_namespaced_service_account_token(f"sa-{x}", NS, request)
                self.assertTrue(token.status.token)
            else:
                self.assert_refused(lambda: core.create_namespaced_service_account_token(f"sa-{x}", NS, request),
                                    refusal("node-a", "create", "serviceaccounts/token", NS, unrelated("node-a"),
                                            f"sa-{x}"))

    def test_its_own_node_lease_and_csinode(self) -> None:
        core = self.core["node-a"]
        coordination = self.k8s.CoordinationV1Api(self.api["node-a"])
        storage = self.k8s.StorageV1Api(self.api["node-a"])
        self.server.kubectl("delete", "node", "node-a", "node-b", "--ignore-not-found")
        self.server.kubectl("-n", "kube-node-lease", "delete", "lease", "node-a", "node-b", "--ignore-not-found")
        self.server.kubectl("delete", "csinode", "node-a", "--ignore-not-found")
        # a kubelet reads its Node before registering it: a 404, not a 403
        from kubernetes.client.exceptions import ApiException
        with self.assertRaises(ApiException) as caught:
            core.read_node("node-a")
        self.assertEqual(caught.exception.status, 404)
        core.create_node(self.k8s.V1Node(metadata=self.k8s.V1ObjectMeta(name="node-a")))
        core.patch_node_status("node-a", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}]}})
        self.assertEqual(core.read_node("node-a").status.conditions[0].reason, "KubeletReady")
        self.assertEqual([n.metadata.name for n in core.list_node(field_selector="metadata.name=node-a").items],
                         ["node-a"])
        # the other node's: the authorizer refuses reads, NodeRestriction writes
        self.server.kubectl("create", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}}))
        self.assert_refused(lambda: core.read_node("node-b"), refusal(
            "node-a", "get", "nodes", "", "node 'node-a' cannot read 'node-b', only its own Node object", "node-b"))
        self.assert_refused(lambda: core.list_node(), refusal(
            "node-a", "list", "nodes", "", "node 'node-a' cannot read all nodes, only its own Node object"))
        self.assert_refused(lambda: core.patch_node_status("node-b", {"status": {"phase": "Running"}}),
                            'nodes "node-b" is forbidden: node "node-a" is not allowed to modify node "node-b"')
        lease = self.k8s.V1Lease(metadata=self.k8s.V1ObjectMeta(name="node-a"),
                                 spec=self.k8s.V1LeaseSpec(holder_identity="node-a", lease_duration_seconds=40))
        coordination.create_namespaced_lease("kube-node-lease", lease)
        self.assertEqual(coordination.read_namespaced_lease("node-a", "kube-node-lease").spec.holder_identity,
                         "node-a")
        self.server.kubectl("-n", "kube-node-lease", "create", "-f", "-", input=json.dumps(
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "node-b"}}))
        self.assert_refused(lambda: coordination.read_namespaced_lease("node-b", "kube-node-lease"), refusal(
            "node-a", "get", "leases", "kube-node-lease",
            "can only access node lease with the same name as the requesting node", "node-b", "coordination.k8s.io"))
        storage.create_csi_node(self.k8s.V1CSINode(metadata=self.k8s.V1ObjectMeta(name="node-a"),
                                                   spec=self.k8s.V1CSINodeSpec(drivers=[])))
        self.assertEqual(storage.read_csi_node("node-a").metadata.name, "node-a")
        self.assert_refused(lambda: storage.read_csi_node("node-b"), refusal(
            "node-a", "get", "csinodes", "", "can only access CSINode with the same name as the requesting node",
            "node-b", "storage.k8s.io"))

    def test_mirror_pods_and_pod_status_with_node_restriction(self) -> None:
        core = self.core["node-a"]
        self.server.kubectl("delete", "node", "node-a", "--ignore-not-found")
        node = core.create_node(self.k8s.V1Node(metadata=self.k8s.V1ObjectMeta(name="node-a")))
        mirror = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": "static-web", "annotations": {"kubernetes.io/config.mirror": "hash"},
                               "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-a",
                                                    "uid": node.metadata.uid, "controller": True}]},
                  "spec": {"nodeName": "node-a", "containers": [{"name": "web", "image": "nginx"}]}}
        self.server.kubectl("-n", NS, "delete", "pod", "static-web", "--ignore-not-found")
        core.create_namespaced_pod(NS, mirror)
        core.patch_namespaced_pod_status("static-web", NS, {"status": {"phase": "Running"}})
        core.patch_namespaced_pod_status("pod-a", NS, {"status": {"phase": "Running"}})
        self.assertEqual(core.read_namespaced_pod("static-web", NS).status.phase, "Running")
        # the authorizer lets nodes create and update pods' status; NodeRestriction keeps them to their own
        self.assert_refused(lambda: core.patch_namespaced_pod_status("pod-b", NS, {"status": {"phase": "Running"}}),
                            'pods "pod-b" is forbidden: node "node-a" can only update pod status for pods with '
                            'spec.nodeName set to itself')
        self.assert_refused(lambda: core.create_namespaced_pod(NS, dict(mirror, metadata={
            "name": "not-mirror"})), 'pods "not-mirror" is forbidden: pod does not have "kubernetes.io/config.mirror" '
                                     'annotation, node "node-a" can only create mirror pods')
        core.delete_namespaced_pod("static-web", NS)

    def test_can_i_and_rules_review_as_a_node(self) -> None:
        kubeconfig = self.server.kubeconfig_for("system:node:node-a", ("system:nodes",))
        # kubectl prints the reason of a refusal after "no"
        for target, answer in (("secret/s-a", "yes"), ("secret/s-b", f"no - {unrelated('node-a')}"),
                               ("configmap/cm-a", "yes"), ("persistentvolumeclaim/pvc-b", f"no - {unrelated('node-a')}"),
                               ("node/node-b", "no - node 'node-a' cannot read 'node-b', only its own Node object")):
            result = self.server.kubectl("--kubeconfig", kubeconfig, "-n", NS, "auth", "can-i", "get", target,
                                         check=False)
            self.assertEqual(result.stdout.strip(), answer, (target, result.stderr))
        review = self.k8s.AuthorizationV1Api(self.api["node-a"]).create_self_subject_rules_review(
            self.k8s.V1SelfSubjectRulesReview(spec=self.k8s.V1SelfSubjectRulesReviewSpec(namespace=NS)))
        self.assertTrue(review.status.incomplete)
        self.assertEqual(review.status.evaluation_error, "node authorizer does not support user rule resolution")

    def test_a_deleted_pod_no_longer_grants_access(self) -> None:
        manifest = {"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "short-lived", "namespace": NS},
             "stringData": {"k": "v"}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "short-lived", "namespace": NS},
             "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "nginx"}],
                      "volumes": [{"name": "s", "secret": {"secretName": "short-lived"}}]}}]}
        self.server.kubectl("apply", "-f", "-", input=json.dumps(manifest))
        core = self.core["node-a"]
        wait_for(lambda: self.allowed(lambda: core.read_namespaced_secret("short-lived", NS)))
        self.assertFalse(self.allowed(lambda: self.core["node-b"].read_namespaced_secret("short-lived", NS)))
        self.server.kubectl("-n", NS, "delete", "pod", "short-lived", "--grace-period=0", "--force")
        wait_for(lambda: not self.allowed(lambda: core.read_namespaced_secret("short-lived", NS)))
        self.assert_refused(lambda: core.read_namespaced_secret("short-lived", NS), refusal(
            "node-a", "get", "secrets", NS, unrelated("node-a"), "short-lived"))
