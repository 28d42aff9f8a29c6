"""apps/v1 through the in-process server: defaults, validation, generation, scale, Tables, discovery."""
from __future__ import annotations

import copy

from twisted.trial import unittest

from kapiserver.machinery import gorepr
from kapiserver.machinery import protobuf
from kapiserver.testing.cases import ServerTestCase, run

APPS = "/apis/apps/v1/namespaces/default"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
MISMATCH = ('spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
            '`selector` does not match template `labels`')


def template(restart: str = "") -> dict:
    spec = {"containers": [{"name": "nginx", "image": "nginx:1.27"}, {"name": "side", "image": "busybox"}]}
    if restart:
        spec["restartPolicy"] = restart
    return {"metadata": {"labels": {"app": "web"}}, "spec": spec}


def workload_obj(kind: str, name: str = "web", selector: dict | None = None, **spec) -> dict:
    body = {"selector": {"matchLabels": {"app": "web"}} if selector is None else selector, "template": template()}
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": body}


class AppsTests(ServerTestCase):
    async def create(self, plural: str, obj: dict):
        return await self.client.post(f"{APPS}/{plural}", obj)

    @run
    async def test_deployment_defaults_and_columns(self):
        r = await self.create("deployments", workload_obj("Deployment"))
        self.assertEqual(r.code, 201, r.body)
        spec = r.body["spec"]
        self.assertEqual(spec["replicas"], 1)
        self.assertEqual(spec["strategy"], {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        self.assertEqual((spec["revisionHistoryLimit"], spec["progressDeadlineSeconds"]), (10, 600))
        pod = spec["template"]["spec"]
        self.assertEqual((pod["restartPolicy"], pod["dnsPolicy"]), ("Always", "ClusterFirst"))
        self.assertEqual(r.body["status"], {})  # DeploymentStatus is a struct: written, all omitempty
        self.assertEqual(r.body["metadata"]["generation"], 1)
        t = await self.client.get(f"{APPS}/deployments", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]],
                         ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"])
        self.assertEqual([c["priority"] for c in t.body["columnDefinitions"]][5:], [1, 1, 1])
        self.assertEqual(t.body["rows"][0]["cells"][:4], ["web", "0/1", 0, 0])
        self.assertEqual(t.body["rows"][0]["cells"][5:], ["nginx,side", "nginx:1.27,busybox", "app=web"])

    @run
    async def test_deployment_validation(self):
        bad = workload_obj("Deployment", selector={"matchLabels": {"app": "other"}}, replicas=-1)
        bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
        r = await self.create("deployments", bad)
        self.assertEqual(r.code, 422, r.body)
        self.assertEqual(r.body["reason"], "Invalid")
        self.assertEqual(r.body["message"], 'Deployment.apps "web" is invalid: ['
                         'spec.replicas: Invalid value: -1: must be greater than or equal to 0, ' + MISMATCH + ', '
                         'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"]')
        r = await self.create("deployments", workload_obj("Deployment", selector={}))
        self.assertEqual(r.body["details"]["causes"][0], {
            "reason": "FieldValueInvalid", "field": "spec.selector",
            "message": "Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:"
                       "[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"})
        no_selector = workload_obj("Deployment")
        del no_selector["spec"]["selector"]
        r = await self.create("deployments", no_selector)
        self.assertEqual(r.body["details"]["causes"][0],
                         {"reason": "FieldValueRequired", "field": "spec.selector", "message": "Required value"})
        surge = workload_obj("Deployment", strategy={"type": "RollingUpdate",
                                                     "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}})
        r = await self.create("deployments", surge)
        self.assertIn("spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0",
                      r.body["message"])

    @run
    async def test_deployment_selector_immutable_generation_and_rollout_restart(self):
        created = (await self.create("deployments", workload_obj("Deployment"))).body
        changed = copy.deepcopy(created)
        changed["spec"]["selector"] = {"matchLabels": {"app": "web", "x": "y"}}
        changed["spec"]["template"]["metadata"]["labels"]["x"] = "y"
        r = await self.client.put(f"{APPS}/deployments/web", changed)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"], 'Deployment.apps "web" is invalid: spec.selector: Invalid value: '
                         'v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "x":"y"}, '
                         'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable')
        # kubectl rollout restart: a strategic merge patch of a template annotation
        patch = {"spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": "2025-01-01T00:00:00Z"}}}}}
        r = await self.client.patch(f"{APPS}/deployments/web", patch,
                                    content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["metadata"]["generation"], 2)
        self.assertEqual([c["name"] for c in r.body["spec"]["template"]["spec"]["containers"]], ["nginx", "side"])
        # a status update does not move the generation; the main resource cannot change status
        status = dict(r.body, status={"replicas": 1, "readyReplicas": 1})
        r = await self.client.put(f"{APPS}/deployments/web/status", status)
        self.assertEqual((r.code, r.body["metadata"]["generation"]), (200, 2), r.body)
        r = await self.client.patch(f"{APPS}/deployments/web", {"status": {"readyReplicas": 0}})
        self.assertEqual(r.body["status"]["readyReplicas"], 1)
        # an annotation on the Deployment itself bumps it (upstream copies them to ReplicaSets)
        r = await self.client.patch(f"{APPS}/deployments/web", {"metadata": {"annotations": {"a": "b"}}})
        self.assertEqual(r.body["metadata"]["generation"], 3)

    @run
    async def test_scale_subresource(self):
        await self.create("deployments", workload_obj("Deployment"))
        r = await self.client.get(f"{APPS}/deployments/web/scale")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((r.body["apiVersion"], r.body["kind"]), ("autoscaling/v1", "Scale"))
        self.assertEqual(r.body["spec"], {"replicas": 1})
        self.assertEqual(r.body["status"], {"replicas": 0, "selector": "app=web"})
        # kubectl scale sends a merge patch of the Scale
        r = await self.client.patch(f"{APPS}/deployments/web/scale", {"spec": {"replicas": 3}})
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 3), r.body)
        got = (await self.client.get(f"{APPS}/deployments/web")).body
        self.assertEqual((got["spec"]["replicas"], got["metadata"]["generation"]), (3, 2))
        r = await self.client.put(f"{APPS}/deployments/web/scale",
                                  {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"},
                                   "spec": {"replicas": -2}})
        self.assertEqual(r.code, 422)
        expr = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}
        await self.create("statefulsets", workload_obj("StatefulSet", "db", selector=expr))
        r = await self.client.get(f"{APPS}/statefulsets/db/scale")
        self.assertEqual(r.body["status"]["selector"], "app in (api,web)")
        await self.create("replicasets", workload_obj("ReplicaSet", "rs"))
        r = await self.client.patch(f"{APPS}/replicasets/rs/scale", {"spec": {"replicas": 0}})
        self.assertEqual(r.body["spec"], {"replicas": 0})

    @run
    async def test_statefulset_defaults_and_forbidden_update(self):
        r = await self.create("statefulsets", workload_obj("StatefulSet", "db", serviceName="db"))
        self.assertEqual(r.code, 201, r.body)
        spec = r.body["spec"]
        self.assertEqual(spec["podManagementPolicy"], "OrderedReady")
        self.assertEqual(spec["updateStrategy"], {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        self.assertEqual(spec["persistentVolumeClaimRetentionPolicy"],
                         {"whenDeleted": "Retain", "whenScaled": "Retain"})
        self.assertEqual((spec["replicas"], spec["revisionHistoryLimit"]), (1, 10))
        r = await self.client.patch(f"{APPS}/statefulsets/db", {"spec": {"serviceName": "other"}})
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"], 'StatefulSet.apps "db" is invalid: spec: Forbidden: ' +
                         "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                         "'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                         "'minReadySeconds' are forbidden")
        r = await self.client.patch(f"{APPS}/statefulsets/db", {"spec": {"replicas": 2, "minReadySeconds": 5}})
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 2))
        r = await self.create("statefulsets", workload_obj("StatefulSet", "bad", podManagementPolicy="Random"))
        self.assertEqual(r.body["details"]["causes"][0]["message"],
                         'Invalid value: "Random": must be \'OrderedReady\' or \'Parallel\'')
        t = await self.client.get(f"{APPS}/statefulsets", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]],
                         ["Name", "Ready", "Age", "Containers", "Images"])
        self.assertEqual(t.body["rows"][0]["cells"][:2], ["db", "0/2"])

    @run
    async def test_daemonset_defaults_validation_and_columns(self):
        ds = workload_obj("DaemonSet", "agent")
        ds["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}
        r = await self.create("daemonsets", ds)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["updateStrategy"],
                         {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        self.assertEqual(r.body["spec"]["revisionHistoryLimit"], 10)
        t = await self.client.get(f"{APPS}/daemonsets", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]],
                         ["Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector", "Age",
                          "Containers", "Images", "Selector"])
        self.assertEqual(t.body["rows"][0]["cells"][:7], ["agent", 0, 0, 0, 0, 0, "kubernetes.io/os=linux"])
        bad = workload_obj("DaemonSet", "bad", selector={"matchLabels": {"app": "nope"}})
        r = await self.create("daemonsets", bad)
        self.assertEqual(r.body["message"], 'DaemonSet.apps "bad" is invalid: ' + MISMATCH)
        self.assertNotIn("scale", [s for s in (await self.client.get("/apis/apps/v1")).body["resources"]
                                   if s["name"] == "daemonsets/scale"])

    @run
    async def test_replicaset_and_controllerrevision(self):
        r = await self.create("replicasets", workload_obj("ReplicaSet", "rs"))
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (201, 1), r.body)
        t = await self.client.get(f"{APPS}/replicasets", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]][:5],
                         ["Name", "Desired", "Current", "Ready", "Age"])
        self.assertEqual(t.body["rows"][0]["cells"][:4], ["rs", 1, 0, 0])
        owner = (await self.create("daemonsets", workload_obj("DaemonSet", "agent"))).body
        rev = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": 1, "data": {"spec": {}},
               "metadata": {"name": "agent-1", "ownerReferences": [
                   {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": owner["metadata"]["uid"],
                    "controller": True}]}}
        r = await self.create("controllerrevisions", rev)
        self.assertEqual(r.code, 201, r.body)
        t = await self.client.get(f"{APPS}/controllerrevisions", headers=TABLE)
        self.assertEqual(t.body["rows"][0]["cells"][:3], ["agent-1", "daemonset.apps/agent", 1])
        r = await self.client.patch(f"{APPS}/controllerrevisions/agent-1", {"data": {"spec": {"x": 1}}})
        self.assertEqual(r.code, 422)
        self.assertIn("data: Invalid value", r.body["message"])
        self.assertIn("field is immutable", r.body["message"])
        missing = dict(rev, metadata={"name": "empty"})
        del missing["data"]
        r = await self.create("controllerrevisions", missing)
        self.assertEqual(r.body["message"], 'ControllerRevision.apps "empty" is invalid: data: Required value: '
                         'data is mandatory')

    @run
    async def test_discovery_and_protobuf_body(self):
        r = await self.client.get("/apis/apps/v1")
        found = {res["name"]: res for res in r.body["resources"]}
        self.assertEqual(found["deployments"]["shortNames"], ["deploy"])
        self.assertEqual(found["deployments"]["categories"], ["all"])
        self.assertEqual(found["statefulsets"]["shortNames"], ["sts"])
        self.assertEqual(found["daemonsets"]["shortNames"], ["ds"])
        self.assertEqual(found["replicasets"]["shortNames"], ["rs"])
        for sub in ("deployments/scale", "deployments/status", "replicasets/scale", "statefulsets/scale",
                    "daemonsets/status", "controllerrevisions"):
            self.assertIn(sub, found)
        self.assertNotIn("daemonsets/scale", found)
        self.assertNotIn("categories", found["controllerrevisions"])
        # typed clients send protobuf (kubectl create deployment): decoded with the generated tables
        body = protobuf.encode_object({"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "pb"},
                                       "spec": {"selector": {"matchLabels": {"app": "pb"}},
                                                "template": {"metadata": {"labels": {"app": "pb"}},
                                                             "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
        r = await self.client.request("POST", f"{APPS}/deployments", raw=body,
                                      content_type="application/vnd.kubernetes.protobuf")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["replicas"], r.body["spec"]["revisionHistoryLimit"]), (1, 10))


class GoRenderingTests(unittest.TestCase):
    """The Go ``%#v`` form upstream's selector messages use."""

    def test_selector_rendering(self):
        self.assertEqual(gorepr.label_selector({"matchExpressions": [
            {"key": "a", "operator": "Exists"}]}),
            'v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{'
            'v1.LabelSelectorRequirement{Key:"a", Operator:"Exists", Values:[]string(nil)}}}')
        self.assertEqual(gorepr.string_map(None), "map[string]string(nil)")
