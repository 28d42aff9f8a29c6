"""NodeRestriction's rules one by one, with upstream's messages: who is a node, which labels a node
may set, pod status and eviction, PVC status, tokens bound to pods, CSINodes."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.node_restriction import NodeRestriction, forbidden_labels
from kapiserver.auth.node.identifier import node_identity
from kapiserver.machinery.user import UserInfo
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE
from tests.admission.plugin_fakes import PODS, RType, attrs, pod

NODE_USER = UserInfo("system:node:n1", ("system:nodes", "system:authenticated"))
PVCS = RType("", "persistentvolumeclaims", "PersistentVolumeClaim")
SERVICE_ACCOUNTS = RType("", "serviceaccounts", "ServiceAccount")
CSINODES = RType("storage.k8s.io", "csinodes", "CSINode", namespaced=False)


class FakeStore:
    def __init__(self, objects: dict) -> None:
        self.objects = objects  # (namespace, name) -> object

    async def get(self, namespace: str, name: str, **kw: object) -> dict:
        if (namespace, name) not in self.objects:
            raise errors.not_found("pods", "", name)
        return self.objects[(namespace, name)]


def bound_pod(name: str, node: str, uid: str = "u1") -> dict:
    p = pod(name, nodeName=node)
    p["metadata"]["uid"] = uid
    return p


class PieceTests(unittest.TestCase):
    def test_node_identity(self):
        self.assertEqual(node_identity(NODE_USER), ("n1", True))
        self.assertEqual(node_identity(UserInfo("system:node:n1", ())), ("", False))  # the group is needed
        # and so is the name's prefix, as upstream's identifier: another member of the group is no node
        self.assertEqual(node_identity(UserInfo("kubelet", ("system:nodes",))), ("", False))
        self.assertEqual(node_identity(UserInfo("system:node:", ("system:nodes",))), ("", True))
        self.assertEqual(node_identity(None), ("", False))

    def test_labels(self):
        self.assertEqual(forbidden_labels({"node-restriction.kubernetes.io/a": "1", "x.node-restriction.kubernetes.io"
                                           "/b": "1", "team": "a"}, {}, updating=False),
                         ["node-restriction.kubernetes.io/a", "x.node-restriction.kubernetes.io/b"])
        # on update, unknown kubernetes.io / k8s.io labels are forbidden too; the kubelet's own are not
        self.assertEqual(forbidden_labels({"node-role.kubernetes.io/master": "", "example.k8s.io/x": "1",
                                           "kubernetes.io/hostname": "n1", "node.kubernetes.io/exclude": "",
                                           "team": "b"}, {"team": "a"}, updating=True),
                         ["example.k8s.io/x", "node-role.kubernetes.io/master"])
        self.assertEqual(forbidden_labels({"a": "1"}, {"a": "1", "node-role.kubernetes.io/x": ""}, updating=True),
                         ["node-role.kubernetes.io/x"])  # removing counts as a change


class PluginTests(unittest.TestCase):
    def setUp(self):
        self.objects = {("ns", "mine"): bound_pod("mine", "n1"), ("ns", "theirs"): bound_pod("theirs", "n2")}
        store = FakeStore(self.objects)
        self.plugin = NodeRestriction(lambda group, version, plural: store)

    def admit(self, a) -> defer.Deferred:
        a.user = NODE_USER
        return defer.Deferred.fromCoroutine(self.plugin.admit(a))

    async def refused(self, a, message: str) -> None:
        try:
            await self.admit(a)
        except errors.StatusError as e:
            self.assertEqual(e.code, 403)
            self.assertIn(message, e.message)
        else:
            self.fail("not refused")

    @defer.inlineCallbacks
    def test_others_are_not_restricted(self):
        a = attrs(pod("anything"))
        a.user = UserInfo("alice", ("system:authenticated",))
        yield defer.Deferred.fromCoroutine(self.plugin.admit(a))

    @defer.inlineCallbacks
    def test_pod_status_and_eviction(self):
        mine, theirs = self.objects[("ns", "mine")], self.objects[("ns", "theirs")]
        yield self.admit(attrs(mine, operation=UPDATE, old=mine, subresource="status"))
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs(theirs, operation=UPDATE, old=theirs, subresource="status"),
            'node "n1" can only update pod status for pods with spec.nodeName set to itself'))
        relabelled = bound_pod("mine", "n1")
        relabelled["metadata"]["labels"] = {"a": "b"}
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs(relabelled, operation=UPDATE, old=mine, subresource="status"),
            'node "n1" cannot update labels through pod status'))
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "theirs"}}
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs(eviction, subresource="eviction"), "node n1 can only evict pods with spec.nodeName set to itself"))
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs(mine, operation=UPDATE, old=mine, subresource="ephemeralcontainers"),
            "unexpected pod subresource \"ephemeralcontainers\", only 'status' and 'eviction' are allowed"))
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs(mine, operation=UPDATE, old=mine), 'unexpected operation "UPDATE", node "n1" can only create and '
                                                     'delete mirror pods'))

    @defer.inlineCallbacks
    def test_tokens_must_be_bound_to_a_pod_on_the_node(self):
        def token(name: str, uid: str) -> dict:
            return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "default"},
                    "spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}}}
        yield self.admit(attrs(token("mine", "u1"), rtype=SERVICE_ACCOUNTS, subresource="token"))
        for body, message in (
                (token("theirs", "u1"), "node requested token bound to a pod scheduled on a different node"),
                (token("mine", "old"), "the UID in the bound object reference (old) does not match the UID in "
                                       "record (u1). The object might have been deleted and then recreated"),
                (token("mine", ""), "node requested token with a pod binding without a uid"),
                ({"metadata": {"name": "default"}, "spec": {}}, "node requested token not bound to a pod")):
            yield defer.Deferred.fromCoroutine(self.refused(attrs(body, rtype=SERVICE_ACCOUNTS, subresource="token"),
                                                            message))

    @defer.inlineCallbacks
    def test_claims_only_through_status_capacity_and_conditions(self):
        old = {"metadata": {"name": "c", "resourceVersion": "1"}, "spec": {"resources": {}},
               "status": {"phase": "Bound"}}
        new = {"metadata": {"name": "c", "resourceVersion": "2"}, "spec": {"resources": {}},
               "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}}}
        yield self.admit(attrs(new, rtype=PVCS, operation=UPDATE, old=old, subresource="status"))
        grown = dict(new, spec={"resources": {"requests": {"storage": "5Gi"}}})
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs(grown, rtype=PVCS, operation=UPDATE, old=old, subresource="status"),
            'node "n1" is not allowed to update fields other than status.capacity and status.conditions: spec'))
        yield defer.Deferred.fromCoroutine(self.refused(attrs(new, rtype=PVCS, operation=UPDATE, old=old),
                                                        "may only update PVC status"))

    @defer.inlineCallbacks
    def test_csinodes(self):
        yield self.admit(attrs({"metadata": {"name": "n1"}}, rtype=CSINODES))
        yield defer.Deferred.fromCoroutine(self.refused(
            attrs({"metadata": {"name": "n2"}}, rtype=CSINODES),
            "can only access CSINode with the same name as the requesting node"))

    @defer.inlineCallbacks
    def test_a_node_without_a_name_is_refused(self):
        a = attrs(pod("p"), rtype=PODS, operation=CREATE)
        a.user = UserInfo("system:node:", ("system:nodes",))
        try:
            yield defer.Deferred.fromCoroutine(self.plugin.admit(a))
        except errors.StatusError as e:
            self.assertIn('could not determine node from user "system:node:"', e.message)
        else:
            self.fail("not refused")
