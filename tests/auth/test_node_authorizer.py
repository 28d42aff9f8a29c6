"""The Node authorizer: its graph (pods bound to nodes and what they reference) and its decisions,
with upstream's reasons; the graph kept by informers over a server's Stores.

Mirrors upstream's graph_test.go and node_authorizer_test.go cases: references from every kind of
container and volume, a pod deleted or recreated on another node, a PersistentVolume reached
through its claim, ResourceClaims named directly or generated from a template, mirror pods.
"""
from __future__ import annotations

from typing import Any, cast

from twisted.internet import reactor
from twisted.trial import unittest

from kapiserver.auth.authorization_modes import build_authorizer
from kapiserver.auth.authorizer import NO_OPINION, Attributes, Decision, Rules, forbidden
from kapiserver.auth.node.authorizer import NodeAuthorizer
from kapiserver.auth.node.graph import Graph, VertexType
from kapiserver.auth.node.graph_populator import GraphPopulator
from kapiserver.auth.rbac.bootstrap_policy import node_rules
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.machinery.user import UserInfo
from kapiserver.endpoints.filters.authorization import attributes_for
from kapiserver.registry.store import Store
from kapiserver.request.info import parse_request_info
from kapiserver.server.config import config_from_dict
from kapiserver.testing.cases import ServerTestCase, run

NODE_A = UserInfo("system:node:node-a", ("system:nodes", "system:authenticated"))
NODE_B = UserInfo("system:node:node-b", ("system:nodes", "system:authenticated"))
UNRELATED_A = "no relationship found between node 'node-a' and this object"


def pod(name: str, node: str, namespace: str = "ns", **spec: Any) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}], **spec}}


def pv(name: str, claim_namespace: str, claim: str, **source: Any) -> dict:
    return {"metadata": {"name": name},
            "spec": {"claimRef": {"namespace": claim_namespace, "name": claim}, **source}}


def request(method: str, path: str, **query: str) -> Attributes:
    """The attributes the authorization filter sees for a request."""
    args = {k.encode(): [v.encode()] for k, v in query.items()}
    return attributes_for(parse_request_info(method, path, args))


class GraphTests(unittest.TestCase):
    def setUp(self) -> None:
        self.graph = Graph()
        self.graph.add_pod(pod("elsewhere", "node-b"))  # so node-b is known to the graph

    def related(self, node: str, vertex_type: VertexType, namespace: str, name: str) -> bool:
        return self.graph.has_path_from(node, vertex_type, namespace, name)[0]

    def test_every_container_and_volume_reference_reaches_the_node(self) -> None:
        self.graph.add_pod(pod(
            "web", "node-a", serviceAccountName="sa", imagePullSecrets=[{"name": "pull"}],
            initContainers=[{"name": "i", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "init-env",
                                                                                              "key": "k"}}}]}],
            ephemeralContainers=[{"name": "d", "envFrom": [{"configMapRef": {"name": "debug-env"}}]}],
            volumes=[{"name": "s", "secret": {"secretName": "vol-secret"}},
                     {"name": "p", "projected": {"sources": [{"configMap": {"name": "projected"}},
                                                             {"secret": {"name": "projected-secret"}}]}},
                     {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
                     {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                     {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-secret"}}}]))
        for vertex_type, name in ((VertexType.POD, "web"), (VertexType.SERVICE_ACCOUNT, "sa"),
                                  (VertexType.SECRET, "pull"), (VertexType.SECRET, "init-env"),
                                  (VertexType.CONFIGMAP, "debug-env"), (VertexType.SECRET, "vol-secret"),
                                  (VertexType.CONFIGMAP, "projected"), (VertexType.SECRET, "projected-secret"),
                                  (VertexType.PVC, "data"), (VertexType.PVC, "web-scratch"),
                                  (VertexType.SECRET, "csi-secret")):
            self.assertTrue(self.related("node-a", vertex_type, "ns", name), (vertex_type, name))
            self.assertEqual(self.graph.has_path_from("node-b", vertex_type, "ns", name),
                             (False, f"node 'node-b' cannot get {vertex_type.value} ns/{name}, no relationship to "
                                     f"this object was found in the node authorizer graph"))
        # the same name in another namespace is another object
        self.assertEqual(self.graph.has_path_from("node-a", VertexType.SECRET, "other", "pull"),
                         (False, "node 'node-a' cannot get unknown secret other/pull"))
        self.assertEqual(self.graph.has_path_from("node-c", VertexType.SECRET, "ns", "pull"),
                         (False, "unknown node 'node-c' cannot get secret ns/pull"))

    def test_a_deleted_pod_takes_its_references_with_it(self) -> None:
        self.graph.add_pod(pod("one", "node-a", volumes=[{"name": "s", "secret": {"secretName": "shared"}}]))
        self.graph.add_pod(pod("two", "node-a", volumes=[{"name": "s", "secret": {"secretName": "shared"}},
                                                         {"name": "c", "configMap": {"name": "own"}}]))
        self.graph.delete_pod("ns", "two")
        self.assertTrue(self.related("node-a", VertexType.SECRET, "ns", "shared"))  # still used by "one"
        self.assertEqual(self.graph.has_path_from("node-a", VertexType.CONFIGMAP, "ns", "own"),
                         (False, "node 'node-a' cannot get unknown configmap ns/own"))
        self.graph.delete_pod("ns", "one")
        self.assertFalse(self.related("node-a", VertexType.SECRET, "ns", "shared"))
        # nothing of node-a is left: its vertex went with its last pod
        self.assertIsNone(self.graph.vertex(VertexType.NODE, "", "node-a"))
        self.graph.delete_pod("ns", "elsewhere")
        self.assertEqual(len(self.graph), 0)

    def test_a_pod_recreated_on_another_node_moves_its_references(self) -> None:
        self.graph.add_pod(pod("web", "node-a", volumes=[{"name": "s", "secret": {"secretName": "token"}}]))
        self.assertTrue(self.related("node-a", VertexType.SECRET, "ns", "token"))
        self.graph.add_pod(pod("web", "node-b", volumes=[{"name": "s", "secret": {"secretName": "token"}}]))
        self.assertFalse(self.related("node-a", VertexType.SECRET, "ns", "token"))
        self.assertFalse(self.related("node-a", VertexType.POD, "ns", "web"))
        self.assertTrue(self.related("node-b", VertexType.SECRET, "ns", "token"))

    def test_a_persistent_volume_is_reached_through_its_claim(self) -> None:
        # the PV may be bound before or after the pod that uses its claim exists
        self.graph.add_pv(pv("pv-1", "ns", "data", csi={
            "driver": "d", "volumeHandle": "h",
            "nodeStageSecretRef": {"namespace": "storage", "name": "stage"},
            "controllerPublishSecretRef": {"namespace": "storage", "name": "controller"}}))
        self.assertFalse(self.related("node-a", VertexType.PV, "", "pv-1"))
        self.graph.add_pod(pod("db", "node-a", volumes=[{"name": "c", "persistentVolumeClaim": {"claimName": "data"}}]))
        self.assertTrue(self.related("node-a", VertexType.PV, "", "pv-1"))
        self.assertTrue(self.related("node-a", VertexType.SECRET, "storage", "stage"))
        # the controller's secret is not the kubelet's to read
        self.assertFalse(self.related("node-a", VertexType.SECRET, "storage", "controller"))
        self.assertFalse(self.related("node-b", VertexType.PV, "", "pv-1"))
        # a PV's secrets in the claim's namespace when the reference names none (rbd, as upstream)
        self.graph.add_pv(pv("pv-2", "ns", "data", rbd={"monitors": ["m"], "image": "i",
                                                        "secretRef": {"name": "ceph"}}))
        self.assertTrue(self.related("node-a", VertexType.SECRET, "ns", "ceph"))
        # unbound, the PV leads nowhere
        self.graph.add_pv({"metadata": {"name": "pv-1"}, "spec": {}})
        self.assertFalse(self.related("node-a", VertexType.PV, "", "pv-1"))
        self.assertFalse(self.related("node-a", VertexType.SECRET, "storage", "stage"))
        self.graph.delete_pod("ns", "db")
        self.assertFalse(self.related("node-a", VertexType.PV, "", "pv-2"))

    def test_resource_claims_named_or_generated_from_templates(self) -> None:
        claims = [{"name": "gpu", "resourceClaimName": "shared-gpu"},
                  {"name": "scratch", "resourceClaimTemplateName": "tpl"},
                  {"name": "unused", "resourceClaimTemplateName": "tpl"},
                  {"name": "pending", "resourceClaimTemplateName": "tpl"}]
        p = pod("job", "node-a", resourceClaims=claims)
        p["status"] = {"resourceClaimStatuses": [{"name": "scratch", "resourceClaimName": "job-scratch-x1"},
                                                 {"name": "unused"}]}
        self.graph.add_pod(p)
        self.assertTrue(self.related("node-a", VertexType.RESOURCE_CLAIM, "ns", "shared-gpu"))
        self.assertTrue(self.related("node-a", VertexType.RESOURCE_CLAIM, "ns", "job-scratch-x1"))
        self.assertFalse(self.related("node-b", VertexType.RESOURCE_CLAIM, "ns", "job-scratch-x1"))
        # no claim is the template's name, nor a claim not generated yet
        self.assertFalse(self.related("node-a", VertexType.RESOURCE_CLAIM, "ns", "tpl"))

    def test_a_mirror_pod_grants_nothing_but_itself(self) -> None:
        mirror = pod("static", "node-a", serviceAccountName="sa",
                     volumes=[{"name": "s", "secret": {"secretName": "s"}}])
        mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
        self.graph.add_pod(mirror)
        self.assertTrue(self.related("node-a", VertexType.POD, "ns", "static"))
        self.assertFalse(self.related("node-a", VertexType.SECRET, "ns", "s"))
        self.assertFalse(self.related("node-a", VertexType.SERVICE_ACCOUNT, "ns", "sa"))

    def test_volume_attachments_follow_their_node(self) -> None:
        self.graph.add_volume_attachment("va", "node-a")
        self.assertTrue(self.related("node-a", VertexType.VOLUME_ATTACHMENT, "", "va"))
        self.graph.add_volume_attachment("va", "node-b")
        self.assertFalse(self.related("node-a", VertexType.VOLUME_ATTACHMENT, "", "va"))
        self.assertTrue(self.related("node-b", VertexType.VOLUME_ATTACHMENT, "", "va"))
        self.graph.add_volume_attachment("va", "")
        self.assertIsNone(self.graph.vertex(VertexType.VOLUME_ATTACHMENT, "", "va"))

    def test_a_secret_used_on_many_nodes(self) -> None:
        for i in range(300):
            self.graph.add_pod(pod(f"p{i}", f"n{i % 50}", volumes=[{"name": "s", "secret": {"secretName": "ca"}}]))
        self.assertTrue(self.related("n49", VertexType.SECRET, "ns", "ca"))
        for i in range(300):
            if i % 50 == 49:
                self.graph.delete_pod("ns", f"p{i}")
        self.assertEqual(self.graph.has_path_from("n49", VertexType.SECRET, "ns", "ca")[0], False)
        self.assertTrue(self.related("n48", VertexType.SECRET, "ns", "ca"))


class AuthorizerTests(unittest.TestCase):
    def setUp(self) -> None:
        self.graph = Graph()
        self.graph.add_pod(pod("web", "node-a", serviceAccountName="sa",
                               volumes=[{"name": "s", "secret": {"secretName": "s-a"}},
                                        {"name": "c", "configMap": {"name": "cm-a"}},
                                        {"name": "d", "persistentVolumeClaim": {"claimName": "pvc-a"}}]))
        self.graph.add_pv(pv("pv-a", "ns", "pvc-a"))
        self.graph.add_pod(pod("db", "node-b", volumes=[{"name": "s", "secret": {"secretName": "s-b"}}]))
        self.graph.add_volume_attachment("va-a", "node-a")
        self.authorizer = NodeAuthorizer(self.graph, node_rules())

    def decide(self, attributes: Attributes, user: UserInfo = NODE_A) -> Decision:
        return self.authorizer.authorize(user, attributes)

    def assert_allowed(self, *cases: Attributes) -> None:
        for a in cases:
            self.assertEqual(self.decide(a), Decision(True), a)

    def assert_reason(self, reason: str, *cases: Attributes) -> None:
        for a in cases:
            self.assertEqual(self.decide(a), Decision(False, reason), a)

    def test_only_nodes_are_decided(self) -> None:
        get = request("GET", "/api/v1/namespaces/ns/secrets/s-a")
        for user in (UserInfo("alice", ("system:authenticated",)), UserInfo("system:node:node-a", ()),
                     UserInfo("kubelet", ("system:nodes",)), None):
            self.assertEqual(self.authorizer.authorize(user, get), NO_OPINION, user)
        self.assertEqual(self.decide(get, UserInfo("system:node:", ("system:nodes",))),
                         Decision(False, 'unknown node for user "system:node:"'))

    def test_secrets_and_configmaps_of_its_pods(self) -> None:
        self.assert_allowed(request("GET", "/api/v1/namespaces/ns/secrets/s-a"),
                            request("GET", "/api/v1/namespaces/ns/configmaps/cm-a"),
                            # the kubelet's watch of one object (name from the metadata.name field selector)
                            request("GET", "/api/v1/namespaces/ns/secrets", watch="true",
                                    fieldSelector="metadata.name=s-a"),
                            request("GET", "/api/v1/namespaces/ns/configmaps", fieldSelector="metadata.name=cm-a"))
        self.assert_reason(UNRELATED_A, request("GET", "/api/v1/namespaces/ns/secrets/s-b"),
                           request("GET", "/api/v1/namespaces/ns/secrets/unknown"),
                           request("GET", "/api/v1/namespaces/ns/secrets", watch="1",
                                   fieldSelector="metadata.name=s-b"))
        self.assert_reason("No Object name found", request("GET", "/api/v1/namespaces/ns/secrets"),
                           request("GET", "/api/v1/namespaces/ns/secrets", fieldSelector="type=Opaque"))
        self.assert_reason("can only read resources of this type",
                           request("DELETE", "/api/v1/namespaces/ns/secrets/s-a"),
                           request("PATCH", "/api/v1/namespaces/ns/configmaps/cm-a"))
        self.assert_reason("can only read namespaced object of this type", request("GET", "/api/v1/secrets"))
        self.assertEqual(self.decide(request("GET", "/api/v1/namespaces/ns/secrets/s-b"), NODE_B), Decision(True))

    def test_claims_volumes_and_attachments_are_get_only(self) -> None:
        self.assert_allowed(request("GET", "/api/v1/namespaces/ns/persistentvolumeclaims/pvc-a"),
                            request("GET", "/api/v1/persistentvolumes/pv-a"),
                            request("PATCH", "/api/v1/namespaces/ns/persistentvolumeclaims/pvc-a/status"),
                            request("GET", "/apis/storage.k8s.io/v1/volumeattachments/va-a"))
        self.assert_reason(UNRELATED_A, request("GET", "/api/v1/persistentvolumes/pv-b"),
                           request("PUT", "/api/v1/namespaces/ns/persistentvolumeclaims/other/status"),
                           request("GET", "/apis/resource.k8s.io/v1beta1/namespaces/ns/resourceclaims/rc"))
        self.assert_reason("can only get individual resources of this type",
                           request("GET", "/api/v1/persistentvolumes"),
                           request("GET", "/api/v1/namespaces/ns/persistentvolumeclaims", watch="true"))
        self.assert_reason("can only get/update/patch this type",
                           request("GET", "/api/v1/namespaces/ns/persistentvolumeclaims/pvc-a/status"))

    def test_tokens_of_its_pods_service_accounts(self) -> None:
        self.assert_allowed(request("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token"))
        self.assert_reason(UNRELATED_A, request("POST", "/api/v1/namespaces/ns/serviceaccounts/default/token"))
        self.assert_reason("can only create tokens for individual service accounts",
                           request("GET", "/api/v1/namespaces/ns/serviceaccounts/sa"),
                           request("POST", "/api/v1/namespaces/ns/serviceaccounts"))
        self.assert_reason("can only create token subresource of serviceaccount",
                           request("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/other"))

    def test_its_own_lease_csinode_and_node(self) -> None:
        lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        self.assert_allowed(request("GET", f"{lease}/node-a"), request("PUT", f"{lease}/node-a"),
                            request("POST", lease),  # its name is NodeRestriction's to check
                            request("GET", "/apis/storage.k8s.io/v1/csinodes/node-a"),
                            request("POST", "/apis/storage.k8s.io/v1/csinodes"),
                            request("GET", "/api/v1/nodes/node-a"),
                            request("GET", "/api/v1/nodes", watch="true", fieldSelector="metadata.name=node-a"),
                            request("POST", "/api/v1/nodes"), request("PATCH", "/api/v1/nodes/node-b"),
                            request("PATCH", "/api/v1/nodes/node-a/status"))
        self.assert_reason("can only access node lease with the same name as the requesting node",
                           request("GET", f"{lease}/node-b"))
        self.assert_reason('can only access leases in the "kube-node-lease" system namespace',
                           request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/node-a"))
        self.assert_reason("can only get, create, update, patch, or delete a node lease", request("GET", lease))
        self.assert_reason("can only access CSINode with the same name as the requesting node",
                           request("DELETE", "/apis/storage.k8s.io/v1/csinodes/node-b"))
        self.assert_reason("can only get, create, update, patch, or delete a CSINode",
                           request("GET", "/apis/storage.k8s.io/v1/csinodes"))
        self.assert_reason("node 'node-a' cannot read 'node-b', only its own Node object",
                           request("GET", "/api/v1/nodes/node-b"))
        self.assert_reason("node 'node-a' cannot read all nodes, only its own Node object",
                           request("GET", "/api/v1/nodes"), request("GET", "/api/v1/nodes", watch="true"))
        self.assert_reason("", request("DELETE", "/api/v1/nodes/node-a"), request("GET", "/api/v1/nodes/node-a/status"))

    def test_pods_bound_to_it(self) -> None:
        self.assert_allowed(request("GET", "/api/v1/namespaces/ns/pods/web"),
                            request("GET", "/api/v1/pods", fieldSelector="spec.nodeName=node-a"),
                            request("GET", "/api/v1/pods", watch="true", fieldSelector="spec.nodeName==node-a"),
                            request("GET", "/api/v1/namespaces/ns/pods", fieldSelector="metadata.name=web"),
                            request("POST", "/api/v1/namespaces/ns/pods"),
                            request("DELETE", "/api/v1/namespaces/ns/pods/db"),  # NodeRestriction refuses it
                            request("PATCH", "/api/v1/namespaces/ns/pods/web/status"),
                            request("POST", "/api/v1/namespaces/ns/pods/web/eviction"))
        self.assert_reason(UNRELATED_A, request("GET", "/api/v1/namespaces/ns/pods/db"))
        self.assert_reason("can only list/watch pods with spec.nodeName field selector",
                           request("GET", "/api/v1/pods"),
                           request("GET", "/api/v1/pods", fieldSelector="spec.nodeName=node-b"),
                           request("GET", "/api/v1/pods", fieldSelector="spec.nodeName!=node-a"),
                           # the deprecated watch paths carry no selector to authorize, as upstream
                           request("GET", "/api/v1/watch/pods", fieldSelector="spec.nodeName=node-a"))
        self.assert_reason("", request("GET", "/api/v1/namespaces/ns/pods/web/log"),
                           request("PUT", "/api/v1/namespaces/ns/pods/web"))

    def test_resource_slices(self) -> None:
        slices = "/apis/resource.k8s.io/v1beta1/resourceslices"
        self.assert_allowed(request("POST", slices),
                            request("GET", slices, watch="true", fieldSelector="spec.nodeName=node-a"),
                            request("DELETE", slices, fieldSelector="spec.nodeName=node-a"))
        self.assert_reason(UNRELATED_A, request("GET", f"{slices}/s1"))
        self.assert_reason("can only list/watch/deletecollection resourceslices with nodeName field selector",
                           request("GET", slices))

    def test_everything_else_by_the_system_node_rules(self) -> None:
        self.assert_allowed(request("GET", "/api/v1/services"),
                            request("GET", "/api/v1/namespaces/ns/endpoints/e"),
                            request("POST", "/apis/authentication.k8s.io/v1/tokenreviews"),
                            request("PATCH", "/api/v1/namespaces/ns/events/e"),
                            request("GET", "/apis/node.k8s.io/v1/runtimeclasses", watch="true"),
                            request("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests"))
        self.assert_reason("", request("GET", "/api/v1/namespaces/ns/endpoints"),
                           request("GET", "/apis/apps/v1/deployments"), request("GET", "/healthz"))

    def test_rules_are_not_enumerated(self) -> None:
        self.assertEqual(self.authorizer.rules_for(NODE_A, "ns"),
                         Rules(incomplete=True, evaluation_error="node authorizer does not support user rule "
                                                                 "resolution"))
        self.assertEqual(self.authorizer.rules_for(UserInfo("alice"), "ns"), Rules())

    def test_chained_before_rbac(self) -> None:
        config = config_from_dict({"authorization": {"modes": ["Node", "RBAC"]}})
        union = build_authorizer(config.authorization, PolicyIndex(), reactor=None, node_graph=self.graph)
        attributes = request("GET", "/api/v1/namespaces/ns/secrets/s-b")
        decision = union.authorize(NODE_A, attributes)
        assert isinstance(decision, Decision)  # the Node authorizer and RBAC answer at once
        self.assertEqual(decision, Decision(False, UNRELATED_A))
        self.assertEqual(forbidden(NODE_A, attributes, decision.reason).message,
                         'secrets "s-b" is forbidden: User "system:node:node-a" cannot get resource "secrets" in API '
                         'group "" in the namespace "ns": no relationship found between node \'node-a\' and this '
                         'object')
        self.assertEqual(union.authorize(NODE_A, request("GET", "/api/v1/namespaces/ns/secrets/s-a")), Decision(True))
        with self.assertRaises(ValueError):
            build_authorizer(config.authorization, PolicyIndex(), reactor=None)


class PopulatorEventTests(unittest.TestCase):
    """Which watch events change the graph (events fed to the informers as their watches deliver them)."""

    def setUp(self) -> None:
        self.graph = Graph()
        # never started: no Store is read
        self.populator = GraphPopulator(self.graph, lambda group, version, plural: cast(Store, None), reactor)

    def test_a_pod_is_added_again_when_its_claim_statuses_change(self) -> None:
        # (pods get no resourceClaims from the API while DynamicResourceAllocation is off, as upstream)
        p = pod("job", "node-a", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "tpl"}])
        self.populator.pods.send("ADDED", p)
        self.assertTrue(self.graph.has_path_from("node-a", VertexType.POD, "ns", "job")[0])
        p["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "job-gpu-1"}]}
        self.populator.pods.send("MODIFIED", p)
        self.assertTrue(self.graph.has_path_from("node-a", VertexType.RESOURCE_CLAIM, "ns", "job-gpu-1")[0])
        self.populator.pods.send("DELETED", p)
        self.assertEqual(len(self.graph), 0)

    def test_a_pod_recreated_elsewhere_under_its_name(self) -> None:
        self.populator.pods.send("ADDED", pod("web", "node-a", volumes=[{"name": "s", "secret": {"secretName": "s"}}]))
        # its deletion was missed (the watch was down); the new pod has another uid and node
        moved = pod("web", "node-b", volumes=[{"name": "s", "secret": {"secretName": "s"}}])
        moved["metadata"]["uid"] = "uid-2"
        self.populator.pods.send("ADDED", moved)
        self.assertFalse(self.graph.has_path_from("node-a", VertexType.SECRET, "ns", "s")[0])
        self.assertTrue(self.graph.has_path_from("node-b", VertexType.SECRET, "ns", "s")[0])


class PopulatorTests(ServerTestCase):
    """The graph follows the Stores: listed at start, then watched."""

    async def create(self, path: str, obj: dict) -> dict:
        reply = await self.client.post(path, obj)
        self.assertEqual(reply.code, 201, reply.body)
        return reply.body

    async def related(self, node: str, vertex_type: VertexType, namespace: str, name: str) -> bool:
        return self.graph.has_path_from(node, vertex_type, namespace, name)[0]

    async def unrelated(self, node: str, vertex_type: VertexType, namespace: str, name: str) -> bool:
        return not self.graph.has_path_from(node, vertex_type, namespace, name)[0]

    @run
    async def test_pods_volumes_and_attachments_are_followed(self):
        await self.create("/api/v1/namespaces", {"metadata": {"name": "ns"}})
        # there before the populator starts: found by its list
        await self.create("/api/v1/namespaces/ns/pods", pod("early", "node-a", volumes=[
            {"name": "s", "secret": {"secretName": "early-secret"}}]))
        self.graph = Graph()
        populator = GraphPopulator(self.graph, self.server.api.served.store, reactor)
        populator.start()
        self.addCleanup(populator.stop)
        await populator.synced
        self.assertTrue(await self.related("node-a", VertexType.SECRET, "ns", "early-secret"))
        # an unscheduled pod is not in the graph until it is bound
        await self.create("/api/v1/namespaces/ns/pods", pod("late", "", volumes=[
            {"name": "c", "persistentVolumeClaim": {"claimName": "data"}}]))
        await self.create("/api/v1/persistentvolumes", {
            "metadata": {"name": "pv-1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "hostPath": {"path": "/data"}, "claimRef": {"namespace": "ns", "name": "data"}}})
        reply = await self.client.post("/api/v1/namespaces/ns/pods/late/binding", {
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "late"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-b"}})
        self.assertEqual(reply.code, 201, reply.body)
        await self.wait_for(lambda: self.related("node-b", VertexType.PV, "", "pv-1"))
        await self.create("/apis/storage.k8s.io/v1/volumeattachments", {
            "metadata": {"name": "va-1"},
            "spec": {"attacher": "csi.example.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-1"}}})
        await self.wait_for(lambda: self.related("node-a", VertexType.VOLUME_ATTACHMENT, "", "va-1"))
        # deletions
        # a pod on a node is deleted gracefully: related until its kubelet's final delete (period 0)
        reply = await self.client.delete("/api/v1/namespaces/ns/pods/late?gracePeriodSeconds=0")
        self.assertEqual(reply.code, 200, reply.body)
        await self.wait_for(lambda: self.unrelated("node-b", VertexType.PV, "", "pv-1"))
        reply = await self.client.delete("/apis/storage.k8s.io/v1/volumeattachments/va-1")
        self.assertEqual(reply.code, 200, reply.body)
        await self.wait_for(lambda: self.unrelated("node-a", VertexType.VOLUME_ATTACHMENT, "", "va-1"))
        # a pod deleted while the watch is down is dropped when the informer lists again
        assert populator.pods._watch is not None
        populator.pods._watch.stop()  # as when a watch expires: the informer lists again a second later
        reply = await self.client.delete("/api/v1/namespaces/ns/pods/early?gracePeriodSeconds=0")
        self.assertEqual(reply.code, 200, reply.body)
        await self.wait_for(lambda: self.unrelated("node-a", VertexType.SECRET, "ns", "early-secret"))
