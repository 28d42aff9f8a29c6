"""What status writes may change, the status Go's encoding shows on create, and
``namespaces/{name}/finalize``, as kube-apiserver 1.32's strategies decide.

* a write to ``/status`` of a built-in kind resets only the spec: labels and
  annotations in a status patch are kept (upstream's status strategies do
  ``new.Spec = old.Spec``), except what a kind protects (Deployments: labels;
  Pods: ownerReferences); custom resources keep nothing but status;
* a new object's status is what Go's JSON encoding of the typed object shows
  (``status: {loadBalancer: {}}`` for a Service), in JSON and YAML alike;
* ``PUT namespaces/{name}/finalize`` writes everything but status; other
  methods answer 405.
"""
from __future__ import annotations

import yaml

from kapiserver.testing.cases import ServerTestCase, run

CORE = "/api/v1"
APPS = "/apis/apps/v1/namespaces/default"
MERGE = "application/merge-patch+json"


def pod(name: str = "p", **meta) -> dict:
    return {"metadata": {"name": name, **meta}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


class StatusWriteTests(ServerTestCase):
    @run
    async def test_namespace_status_patch_keeps_annotations_and_labels_not_spec(self):
        await self.client.post(f"{CORE}/namespaces", {"metadata": {"name": "st"}})
        r = await self.client.patch(f"{CORE}/namespaces/st/status", {
            "metadata": {"annotations": {"a": "b"}, "labels": {"l": "v"}},
            "spec": {"finalizers": []},
            "status": {"conditions": [{"type": "X", "status": "True"}]}}, content_type=MERGE)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["metadata"]["annotations"], {"a": "b"})
        self.assertEqual(r.body["metadata"]["labels"], {"kubernetes.io/metadata.name": "st", "l": "v"})
        self.assertEqual(r.body["spec"], {"finalizers": ["kubernetes"]})
        self.assertEqual(r.body["status"]["conditions"], [{"type": "X", "status": "True",
                                                            "lastTransitionTime": None}])
        got = (await self.client.get(f"{CORE}/namespaces/st")).body
        self.assertEqual(got["metadata"]["annotations"], {"a": "b"})

    @run
    async def test_deployment_status_write_keeps_its_labels(self):
        d = {"metadata": {"name": "d", "labels": {"app": "x"}}, "spec": {
            "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod()["spec"]}}}
        self.assertEqual((await self.client.post(f"{APPS}/deployments", d)).code, 201)
        r = await self.client.patch(f"{APPS}/deployments/d/status", {
            "metadata": {"labels": {"app": "changed"}, "annotations": {"note": "kept"}},
            "spec": {"replicas": 5}, "status": {"replicas": 3}}, content_type=MERGE)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["metadata"]["labels"], {"app": "x"})
        self.assertEqual(r.body["metadata"]["annotations"], {"note": "kept"})
        self.assertEqual((r.body["spec"]["replicas"], r.body["status"]["replicas"]), (1, 3))

    @run
    async def test_pod_status_write_keeps_owner_references_and_qos_class(self):
        cm = (await self.client.post(f"{CORE}/namespaces/default/configmaps", {"metadata": {"name": "o"}})).body
        owner = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": cm["metadata"]["uid"]}]
        created = await self.client.post(f"{CORE}/namespaces/default/pods", pod(ownerReferences=owner))
        self.assertEqual(created.code, 201, created.body)
        r = await self.client.patch(f"{CORE}/namespaces/default/pods/p/status", {
            "metadata": {"ownerReferences": None, "annotations": {"seen": "yes"}},
            "status": {"phase": "Running", "qosClass": None}}, content_type=MERGE)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["metadata"]["ownerReferences"], owner)
        self.assertEqual(r.body["metadata"]["annotations"], {"seen": "yes"})
        self.assertEqual((r.body["status"]["phase"], r.body["status"]["qosClass"]), ("Running", "BestEffort"))

    @run
    async def test_persistent_volume_phase_transition_time(self):
        pv = {"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                   "hostPath": {"path": "/data"}}}
        created = (await self.client.post(f"{CORE}/persistentvolumes", pv)).body
        self.assertEqual(created["status"]["phase"], "Pending")
        first = created["status"]["lastPhaseTransitionTime"]
        self.assertRegex(first, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        same = await self.client.patch(f"{CORE}/persistentvolumes/pv/status",
                                       {"status": {"message": "m"}}, content_type=MERGE)
        self.assertEqual(same.body["status"]["lastPhaseTransitionTime"], first)
        moved = await self.client.patch(f"{CORE}/persistentvolumes/pv/status",
                                        {"status": {"phase": "Available", "lastPhaseTransitionTime": None}},
                                        content_type=MERGE)
        self.assertEqual(moved.body["status"]["phase"], "Available")
        self.assertIn("lastPhaseTransitionTime", moved.body["status"])


class NodeConfigSourceTests(ServerTestCase):
    @run
    async def test_the_dynamic_kubelet_config_is_dropped_unless_in_use(self):
        """kube-apiserver v1.32.13's dropDisabledFields: a Node's spec.configSource and status.config are
        dropped on create, on update unless the node has one (so an invalid one is no 422), and on a status
        write unless its status has one."""
        created = await self.client.post(f"{CORE}/nodes", {"metadata": {"name": "n"}, "spec": {
            "configSource": {"configMap": {"name": "c"}}}, "status": {"config": {"active": {}}}})
        self.assertEqual(created.code, 201, created.body)
        self.assertNotIn("configSource", created.body["spec"])
        self.assertNotIn("config", created.body["status"])
        r = await self.client.put(f"{CORE}/nodes/n", {**created.body, "spec": {
            "configSource": {"configMap": {"uid": "a,b"}}}})
        self.assertEqual((r.code, r.body.get("spec")), (200, {}), r.body)
        r = await self.client.patch(f"{CORE}/nodes/n/status", {"status": {
            "config": {"lastKnownGood": {"configMap": {"name": "q"}}}}}, content_type=MERGE)
        self.assertEqual(r.code, 200, r.body)
        self.assertNotIn("config", r.body["status"])


class ZeroStatusTests(ServerTestCase):
    @run
    async def test_service_status_load_balancer_in_json_and_yaml(self):
        svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}}
        r = await self.client.post(f"{CORE}/namespaces/default/services", svc)
        self.assertEqual(r.body["status"], {"loadBalancer": {}})
        as_yaml = await self.client.get(f"{CORE}/namespaces/default/services/s",
                                        headers={"Accept": "application/yaml"})
        self.assertEqual(yaml.safe_load(as_yaml.raw)["status"], {"loadBalancer": {}})

    @run
    async def test_kinds_whose_status_has_fields_without_omitempty(self):
        node = (await self.client.post(f"{CORE}/nodes", {"metadata": {"name": "n"}})).body
        self.assertEqual(node["status"]["daemonEndpoints"], {"kubeletEndpoint": {"Port": 0}})
        self.assertEqual(node["status"]["nodeInfo"]["kubeletVersion"], "")
        hpa = {"metadata": {"name": "h"}, "spec": {"maxReplicas": 3, "scaleTargetRef": {
            "apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}
        v2 = await self.client.post("/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers", hpa)
        self.assertEqual(v2.body["status"], {"desiredReplicas": 0, "currentMetrics": None})
        pdb = {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}}
        r = await self.client.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb)
        self.assertEqual(r.body["status"], {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
                                            "expectedPods": 0})
        cm = (await self.client.post(f"{CORE}/namespaces/default/configmaps", {"metadata": {"name": "c"}})).body
        self.assertNotIn("status", cm)


class FinalizeTests(ServerTestCase):
    @run
    async def test_put_finalize_writes_everything_but_status(self):
        await self.client.post(f"{CORE}/namespaces", {"metadata": {"name": "fin"}})
        ns = (await self.client.get(f"{CORE}/namespaces/fin")).body
        ns["spec"] = {"finalizers": ["example.com/keep"]}
        ns["metadata"]["annotations"] = {"a": "b"}
        ns["status"] = {"phase": "Terminating"}
        r = await self.client.put(f"{CORE}/namespaces/fin/finalize", ns)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["spec"], {"finalizers": ["example.com/keep"]})
        self.assertEqual(r.body["metadata"]["annotations"], {"a": "b"})
        self.assertEqual(r.body["status"], {"phase": "Active"})
        bad = dict(r.body, spec={"finalizers": ["not a name"]})
        self.assertEqual((await self.client.put(f"{CORE}/namespaces/fin/finalize", bad)).code, 422)

    @run
    async def test_other_methods_are_not_allowed(self):
        await self.client.post(f"{CORE}/namespaces", {"metadata": {"name": "fin"}})
        for method in ("GET", "PATCH", "POST", "DELETE"):
            r = await self.client.request(method, f"{CORE}/namespaces/fin/finalize", body={} if method != "GET" else None,
                                          content_type=MERGE)
            self.assertEqual((r.code, r.body["reason"], r.body["details"]), (405, "MethodNotAllowed", {}), method)
            self.assertEqual(r.body["message"], "the server does not allow this method on the requested resource")

    @run
    async def test_finalize_of_a_deleted_namespace_removes_it(self):
        await self.client.post(f"{CORE}/namespaces", {"metadata": {"name": "gone"}})
        await self.client.delete(f"{CORE}/namespaces/gone")
        ns = (await self.client.get(f"{CORE}/namespaces/gone")).body
        if ns.get("kind") == "Namespace":  # the namespace controller may not have finished yet
            ns["spec"] = {}
            r = await self.client.put(f"{CORE}/namespaces/gone/finalize", ns)
            # gone meanwhile: the body's uid is a precondition no missing object meets (409, upstream's)
            self.assertIn(r.code, (200, 409), r.body)

        async def gone():
            return (await self.client.get(f"{CORE}/namespaces/gone")).code == 404
        await self.wait_for(gone)
