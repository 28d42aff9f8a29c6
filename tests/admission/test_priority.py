"""Priority: pods get their PriorityClass's value and preemptionPolicy (or the global default's),
upstream's 403 messages, and one globalDefault PriorityClass; in process, with the plugin on and off."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.priority import Priority, default_priority_class
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE
from kapiserver.testing.cases import ServerTestCase, run, sleep
from tests.admission.plugin_fakes import PRIORITY_CLASSES, FakeLister, attrs, pod


def pc(name: str, value: int, default: bool = False, policy: str = "PreemptLowerPriority") -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "globalDefault": default, "preemptionPolicy": policy}


class PriorityTests(unittest.TestCase):
    async def admitted(self, plugin: Priority, obj: dict, operation: str = CREATE, old: dict = None) -> dict:
        await plugin.admit(attrs(obj, operation=operation, old=old))
        return obj["spec"]

    async def refused(self, plugin: Priority, obj: dict) -> errors.StatusError:
        try:
            await plugin.admit(attrs(obj))
        except errors.StatusError as e:
            return e
        self.fail("admitted")

    @defer.inlineCallbacks
    def test_the_named_class_gives_value_and_policy(self):
        plugin = Priority(FakeLister(pc("high", 1000, policy="Never")))
        spec = yield defer.ensureDeferred(self.admitted(plugin, pod(priorityClassName="high")))
        self.assertEqual((spec["priority"], spec["preemptionPolicy"], spec["priorityClassName"]),
                         (1000, "Never", "high"))

    @defer.inlineCallbacks
    def test_system_classes_resolve_before_they_are_stored(self):
        spec = yield defer.ensureDeferred(self.admitted(Priority(FakeLister()),
                                                        pod(priorityClassName="system-node-critical")))
        self.assertEqual((spec["priority"], spec["preemptionPolicy"]), (2000001000, "PreemptLowerPriority"))

    @defer.inlineCallbacks
    def test_without_a_class_the_lowest_global_default_or_zero(self):
        spec = yield defer.ensureDeferred(self.admitted(Priority(FakeLister(pc("x", 5))), pod()))
        self.assertEqual(spec["priority"], 0)
        self.assertEqual(spec["preemptionPolicy"], "PreemptLowerPriority")
        self.assertNotIn("priorityClassName", spec)
        plugin = Priority(FakeLister(pc("b", 50, True, "Never"), pc("a", 10, True, "Never"), pc("c", 1)))
        spec = yield defer.ensureDeferred(self.admitted(plugin, pod()))
        self.assertEqual((spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]), ("a", 10, "Never"))

    def test_default_class_ties_by_name(self):
        self.assertEqual(default_priority_class([pc("b", 1, True), pc("a", 1, True)])["metadata"]["name"], "a")
        self.assertIsNone(default_priority_class([pc("a", 1)]))

    @defer.inlineCallbacks
    def test_upstream_messages(self):
        plugin = Priority(FakeLister(pc("high", 1000)))
        e = yield defer.ensureDeferred(self.refused(plugin, pod("p1", priorityClassName="nope")))
        self.assertEqual((e.code, e.reason, e.message),
                         (403, "Forbidden", 'pods "p1" is forbidden: no PriorityClass with name nope was found'))
        e = yield defer.ensureDeferred(self.refused(plugin, pod("p2", priorityClassName="high", priority=7)))
        self.assertEqual(e.message, 'pods "p2" is forbidden: the integer value of priority (7) must not be provided '
                                    'in pod spec; priority admission controller computed 1000 from the given '
                                    'PriorityClass name')
        e = yield defer.ensureDeferred(self.refused(plugin, pod("p3", priorityClassName="high",
                                                                preemptionPolicy="Never")))
        self.assertEqual(e.message, 'pods "p3" is forbidden: the string value of PreemptionPolicy (Never) must not be '
                                    'provided in pod spec; priority admission controller computed '
                                    'PreemptLowerPriority from the given PriorityClass name')
        # the same values as computed are accepted
        spec = yield defer.ensureDeferred(self.admitted(plugin, pod(priorityClassName="high", priority=1000,
                                                                    preemptionPolicy="PreemptLowerPriority")))
        self.assertEqual(spec["priority"], 1000)

    @defer.inlineCallbacks
    def test_updates_keep_the_stored_priority(self):
        old = pod(priority=10, preemptionPolicy="Never", priorityClassName="x")
        spec = yield defer.ensureDeferred(self.admitted(Priority(FakeLister()), pod(priorityClassName="x"),
                                                        UPDATE, old))
        self.assertEqual((spec["priority"], spec["preemptionPolicy"]), (10, "Never"))

    @defer.inlineCallbacks
    def test_only_one_global_default(self):
        plugin = Priority(FakeLister(pc("a", 10, True)))
        try:
            yield defer.ensureDeferred(plugin.validate(attrs(pc("b", 5, True), PRIORITY_CLASSES)))
        except errors.StatusError as e:
            self.assertEqual(e.message, 'priorityclasses.scheduling.k8s.io "b" is forbidden: PriorityClass a is '
                                        'already marked as default. Only one default can exist')
        else:
            self.fail("a second default was admitted")
        # updating the default itself, and creating a non-default class, are fine
        yield defer.ensureDeferred(plugin.validate(attrs(pc("a", 10, True), PRIORITY_CLASSES, UPDATE, pc("a", 10))))
        yield defer.ensureDeferred(plugin.validate(attrs(pc("c", 5), PRIORITY_CLASSES)))


NS = "/api/v1/namespaces/default"
CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


class InProcessTests(ServerTestCase):
    @run
    async def test_pods_get_priority_and_a_default_class_applies(self):
        r = await self.client.post(f"{NS}/pods", pod("plain"))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["priority"], r.body["spec"]["preemptionPolicy"]), (0, "PreemptLowerPriority"))
        r = await self.client.post(CLASSES, pc("everyone", 42, True))
        self.assertEqual(r.code, 201, r.body)
        await sleep(0.1)  # the plugin reads classes through an informer
        r = await self.client.post(CLASSES, pc("another", 43, True))
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.body["message"], 'priorityclasses.scheduling.k8s.io "another" is forbidden: PriorityClass '
                                            'everyone is already marked as default. Only one default can exist')
        r = await self.client.post(f"{NS}/pods", pod("defaulted"))
        self.assertEqual((r.body["spec"]["priorityClassName"], r.body["spec"]["priority"]), ("everyone", 42))
        # an update without the fields keeps them
        body = r.body
        del body["spec"]["priority"], body["spec"]["preemptionPolicy"]
        r = await self.client.put(f"{NS}/pods/defaulted", body)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["spec"]["priority"], 42)
        r = await self.client.post(f"{NS}/pods", pod("unknown", priorityClassName="nope"))
        self.assertEqual(r.code, 403, r.body)
        self.assertEqual(r.body["message"], 'pods "unknown" is forbidden: no PriorityClass with name nope was found')


class DisabledTests(ServerTestCase):
    settings = {"disable_admission_plugins": ["Priority"]}

    @run
    async def test_without_the_plugin_pods_get_no_priority(self):
        r = await self.client.post(f"{NS}/pods", pod("plain"))
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("priority", r.body["spec"])
        self.assertNotIn("preemptionPolicy", r.body["spec"])
