"""AlwaysPullImages (opt-in): every container pulls Always on create and on updates with new images."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.always_pull_images import AlwaysPullImages, aggregate_message
from kapiserver.machinery import errors
from kapiserver.registry.admission import UPDATE
from kapiserver.testing.cases import ServerTestCase, run
from tests.admission.plugin_fakes import attrs, pod


def policies(p: dict) -> list:
    return [c.get("imagePullPolicy") for key in ("initContainers", "containers", "ephemeralContainers")
            for c in p["spec"].get(key, [])]


class AlwaysPullImagesTests(unittest.TestCase):
    def run_phase(self, phase: str, obj: dict, **kwargs):
        return defer.ensureDeferred(getattr(AlwaysPullImages(), phase)(attrs(obj, **kwargs)))

    def test_every_kind_of_container_pulls_always(self):
        p = pod(initContainers=[{"name": "i", "image": "busybox", "imagePullPolicy": "Never"}],
                ephemeralContainers=[{"name": "e", "image": "debug", "imagePullPolicy": "IfNotPresent"}])
        self.successResultOf(self.run_phase("admit", p))
        self.assertEqual(policies(p), ["Always", "Always", "Always"])
        self.successResultOf(self.run_phase("validate", p))

    def test_updates_without_new_images_are_left_alone(self):
        old = pod()
        new = pod()
        new["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
        self.successResultOf(self.run_phase("admit", new, operation=UPDATE, old=old))
        self.assertEqual(policies(new), ["IfNotPresent"])
        self.successResultOf(self.run_phase("validate", new, operation=UPDATE, old=old))
        new["spec"]["containers"][0]["image"] = "nginx:2"
        self.successResultOf(self.run_phase("admit", new, operation=UPDATE, old=old))
        self.assertEqual(policies(new), ["Always"])

    def test_validate_refuses_with_upstream_field_errors(self):
        p = pod("web")
        p["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
        e = self.failureResultOf(self.run_phase("validate", p), errors.StatusError).value
        self.assertEqual((e.code, e.reason), (500, ""))
        self.assertEqual(e.message, 'pods "web" is forbidden: spec.containers[0].imagePullPolicy: Unsupported value: '
                                    '"IfNotPresent": supported values: "Always"')
        p["spec"]["initContainers"] = [{"name": "i", "image": "x"}]
        e = self.failureResultOf(self.run_phase("validate", p), errors.StatusError).value
        self.assertEqual(e.message, '[pods "web" is forbidden: spec.initContainers[0].imagePullPolicy: Unsupported '
                                    'value: "": supported values: "Always", pods "web" is forbidden: '
                                    'spec.containers[0].imagePullPolicy: Unsupported value: "IfNotPresent": '
                                    'supported values: "Always"]')

    def test_aggregate_deduplicates(self):
        self.assertEqual(aggregate_message(["a", "a"]), "a")


class OffByDefaultTests(ServerTestCase):
    @run
    async def test_not_enabled_by_default(self):
        p = pod("p")
        p["spec"]["containers"][0]["image"] = "nginx:1.27"  # a tag: defaulted to IfNotPresent
        r = await self.client.post("/api/v1/namespaces/default/pods", p)
        self.assertEqual(r.body["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent")


class EnabledTests(ServerTestCase):
    settings = {"enable_admission_plugins": ["AlwaysPullImages"]}

    @run
    async def test_enabled_pods_pull_always(self):
        p = pod("p")
        p["spec"]["containers"][0]["image"] = "nginx:1.27"
        r = await self.client.post("/api/v1/namespaces/default/pods", p)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["containers"][0]["imagePullPolicy"], "Always")
