"""TaintNodesByCondition: new Nodes get the not-ready NoSchedule taint once."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.taint_nodes_by_condition import TaintNodesByCondition
from kapiserver.registry.admission import UPDATE
from kapiserver.testing.cases import ServerTestCase, run
from tests.admission.plugin_fakes import NODES, attrs

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


def node(**spec) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "spec": spec}


class TaintTests(unittest.TestCase):
    def admitted(self, obj: dict, **kwargs) -> list:
        d = defer.ensureDeferred(TaintNodesByCondition().admit(attrs(obj, NODES, **kwargs)))
        self.successResultOf(d)
        return obj["spec"].get("taints")

    def test_a_new_node_gets_the_taint_after_its_own(self):
        own = {"key": "a", "value": "b", "effect": "NoExecute"}
        self.assertEqual(self.admitted(node(taints=[own])), [own, NOT_READY])
        self.assertEqual(self.admitted({"metadata": {"name": "bare"}}), [NOT_READY])

    def test_same_key_and_effect_is_enough(self):
        own = {"key": "node.kubernetes.io/not-ready", "value": "x", "effect": "NoSchedule"}
        self.assertEqual(self.admitted(node(taints=[own])), [own])
        other_effect = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
        self.assertEqual(self.admitted(node(taints=[other_effect])), [other_effect, NOT_READY])

    def test_only_creates_of_nodes_themselves(self):
        self.assertIsNone(self.admitted(node(), subresource="status"))
        plugin = TaintNodesByCondition()
        self.assertFalse(plugin.handles(UPDATE))


class InProcessTests(ServerTestCase):
    @run
    async def test_created_node_is_tainted(self):
        r = await self.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["taints"], [NOT_READY])
        # an update may remove it (the node lifecycle controller does)
        r.body["spec"]["taints"] = []
        r = await self.client.put("/api/v1/nodes/n1", r.body)
        self.assertEqual(r.code, 200, r.body)
        self.assertFalse(r.body["spec"].get("taints"))
