"""ResourceQuota: what objects cost (upstream's evaluators), the admission check and its
messages, and, on an in-process server, the charge written to status.used, two creates racing
for the last slot, and the quota controller giving back what deleted objects used."""
from __future__ import annotations

import json

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.resource_quota import QuotaConfigError, check_request, parse_configuration
from kapiserver.machinery import errors
from kapiserver.quota import resources as rl
from kapiserver.quota.evaluators import PodEvaluator, Registry, ServiceEvaluator
from kapiserver.registry.admission import CREATE, UPDATE, Attributes
from kapiserver.testing.cases import ServerTestCase, run

NS = "/api/v1/namespaces/default"


def pod(name: str = "p", requests: dict | None = None, limits: dict | None = None, **spec) -> dict:
    container: dict = {"name": "c", "image": "nginx"}
    if requests or limits:
        container["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [container], **spec}}


def quota(name: str, hard: dict, used: dict | None = None, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "5"},
            "spec": {"hard": hard, **spec},
            "status": {"hard": hard, "used": used if used is not None else {k: "0" for k in hard}}}


class _RType:
    def __init__(self, group: str, plural: str, kind: str) -> None:
        self.group, self.plural, self.kind, self.version, self.namespaced = group, plural, kind, "v1", True


PODS = _RType("", "pods", "Pod")


def attrs(obj: dict, rtype=PODS, operation: str = CREATE, old: dict | None = None) -> Attributes:
    return Attributes(operation, rtype, "ns", obj["metadata"]["name"], obj, old)  # type: ignore[arg-type]


def used(q: dict) -> dict:
    return q["status"]["used"]


class EvaluatorTests(unittest.TestCase):
    def test_pod_usage_adds_containers_and_sidecars_and_takes_the_largest_init(self):
        p = pod(requests={"cpu": "250m", "memory": "64Mi"}, limits={"memory": "128Mi"})
        p["spec"]["initContainers"] = [
            {"name": "sidecar", "image": "x", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "32Mi"}}}]
        p["spec"]["overhead"] = {"cpu": "10m"}
        usage = rl.to_json(PodEvaluator().usage(p))
        # containers 250m + sidecar 100m = 350m; the init container runs beside the sidecar: 1100m wins
        self.assertEqual(usage["requests.cpu"], "1110m")
        self.assertEqual(usage["cpu"], "1110m")
        self.assertEqual(usage["requests.memory"], "64Mi")
        self.assertEqual(usage["limits.memory"], "128Mi")
        self.assertEqual(usage["pods"], "1")
        self.assertEqual(usage["count/pods"], "1")

    def test_finished_pods_only_count_as_objects(self):
        p = pod(requests={"cpu": "1"})
        p["status"] = {"phase": "Succeeded"}
        self.assertEqual(rl.to_json(PodEvaluator().usage(p)), {"count/pods": "1"})

    def test_service_node_ports_and_load_balancers(self):
        svc = {"metadata": {"name": "s"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}}
        self.assertEqual(rl.to_json(ServiceEvaluator().usage(svc)),
                         {"count/services": "1", "services": "1", "services.loadbalancers": "1",
                          "services.nodeports": "2"})

    def test_claims_count_by_storage_class(self):
        pvc = {"metadata": {"name": "c"}, "spec": {"storageClassName": "gold",
                                                   "resources": {"requests": {"storage": "1Gi"}}}}
        usage = rl.to_json(Registry().get("", "persistentvolumeclaims").usage(pvc))
        self.assertEqual(usage["requests.storage"], "1Gi")
        self.assertEqual(usage["gold.storageclass.storage.k8s.io/requests.storage"], "1Gi")
        self.assertEqual(usage["gold.storageclass.storage.k8s.io/persistentvolumeclaims"], "1")

    def test_ignored_and_generic_resources(self):
        registry = Registry()
        self.assertIsNone(registry.get("", "events"))
        self.assertEqual(registry.get("apps", "deployments").names, ["count/deployments.apps"])
        self.assertEqual(registry.get("", "configmaps").names, ["count/configmaps", "configmaps"])
        tracked = {(e.group, e.resource) for e in registry.for_names(["count/widgets.example.com", "pods"])}
        self.assertEqual(tracked, {("example.com", "widgets"), ("", "pods")})

    def test_sums_keep_upstreams_formats(self):
        total = rl.add({"memory": rl.ZERO}, rl.parse_list({"memory": "1Gi"}))
        total = rl.add(total, rl.parse_list({"memory": "512Mi"}))
        self.assertEqual(rl.to_json(total), {"memory": "1536Mi"})
        self.assertEqual(rl.pretty(rl.parse_list({"pods": "1", "cpu": "500m"})), "cpu=500m,pods=1")


class CheckRequestTests(unittest.TestCase):
    def test_the_charge_and_upstreams_refusal(self):
        out = check_request([quota("q", {"pods": "2"}, {"pods": "1"})], attrs(pod()), PodEvaluator(), [])
        self.assertEqual(used(out[0]), {"pods": "2"})
        with self.assertRaises(errors.StatusError) as caught:
            check_request(out, attrs(pod("third")), PodEvaluator(), [])
        self.assertEqual(caught.exception.code, 403)
        self.assertEqual(caught.exception.reason, "Forbidden")
        self.assertEqual(caught.exception.message, 'pods "third" is forbidden: exceeded quota: q, requested: '
                                                   'pods=1, used: pods=2, limited: pods=2')

    def test_compute_quota_needs_requests_and_limits(self):
        q = quota("compute", {"requests.cpu": "1", "limits.memory": "1Gi"})
        with self.assertRaises(errors.StatusError) as caught:
            check_request([q], attrs(pod(requests={"cpu": "100m"})), PodEvaluator(), [])
        self.assertEqual(caught.exception.message, 'pods "p" is forbidden: failed quota: compute: must specify '
                                                   'limits.memory for: c')
        out = check_request([q], attrs(pod(requests={"cpu": "600m"}, limits={"memory": "512Mi"})),
                            PodEvaluator(), [])
        self.assertEqual(used(out[0]), {"limits.memory": "512Mi", "requests.cpu": "600m"})
        with self.assertRaises(errors.StatusError) as caught:
            check_request(out, attrs(pod("big", requests={"cpu": "500m"}, limits={"memory": "512Mi"})),
                          PodEvaluator(), [])
        self.assertEqual(caught.exception.message, 'pods "big" is forbidden: exceeded quota: compute, requested: '
                                                   'requests.cpu=500m, used: requests.cpu=600m, limited: '
                                                   'requests.cpu=1')

    def test_status_unknown_until_the_controller_counted(self):
        q = quota("q", {"pods": "2"})
        del q["status"]["used"]
        with self.assertRaises(errors.StatusError) as caught:
            check_request([q], attrs(pod()), PodEvaluator(), [])
        self.assertEqual(caught.exception.message, 'pods "p" is forbidden: status unknown for quota: q, '
                                                   'resources: pods')

    def test_scopes_pick_the_pods_a_quota_counts(self):
        best_effort = quota("be", {"pods": "0"}, scopes=["BestEffort"])
        # a pod with requests is not BestEffort: the quota does not count it
        out = check_request([best_effort], attrs(pod(requests={"cpu": "1"})), PodEvaluator(), [])
        self.assertEqual(used(out[0]), {"pods": "0"})
        with self.assertRaises(errors.StatusError):
            check_request([best_effort], attrs(pod()), PodEvaluator(), [])
        high = quota("high", {"pods": "1"}, scopeSelector={"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]})
        out = check_request([high], attrs(pod(priorityClassName="low")), PodEvaluator(), [])
        self.assertEqual(used(out[0]), {"pods": "0"})
        out = check_request([high], attrs(pod(priorityClassName="high")), PodEvaluator(), [])
        self.assertEqual(used(out[0]), {"pods": "1"})
        terminating = quota("t", {"pods": "5"}, scopes=["Terminating"])
        out = check_request([terminating], attrs(pod(activeDeadlineSeconds=30)), PodEvaluator(), [])
        self.assertEqual(used(out[0]), {"pods": "1"})

    def test_service_update_charges_only_the_difference(self):
        services = _RType("", "services", "Service")
        q = quota("q", {"services": "1", "services.nodeports": "1"}, {"services": "1", "services.nodeports": "0"})
        old = {"metadata": {"name": "s", "resourceVersion": "3"}, "spec": {"type": "ClusterIP", "ports": [{"port": 80}]}}
        new = json.loads(json.dumps(old))
        new["spec"]["type"] = "NodePort"
        out = check_request([q], attrs(new, services, UPDATE, old), ServiceEvaluator(), [])
        self.assertEqual(used(out[0]), {"services": "1", "services.nodeports": "1"})
        new["spec"]["ports"].append({"port": 81})
        with self.assertRaises(errors.StatusError) as caught:
            check_request([q], attrs(new, services, UPDATE, old), ServiceEvaluator(), [])
        self.assertIn("exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, limited: "
                      "services.nodeports=1", caught.exception.message)

    def test_object_counts_of_any_resource(self):
        deployments = _RType("apps", "deployments", "Deployment")
        q = quota("q", {"count/deployments.apps": "1"}, {"count/deployments.apps": "1"})
        with self.assertRaises(errors.StatusError) as caught:
            check_request([q], attrs({"metadata": {"name": "d"}}, deployments), Registry().get("apps", "deployments"),
                          [])
        self.assertEqual(caught.exception.message, 'deployments.apps "d" is forbidden: exceeded quota: q, '
                                                   'requested: count/deployments.apps=1, used: '
                                                   'count/deployments.apps=1, limited: count/deployments.apps=1')

    def test_limited_resources_need_a_covering_quota(self):
        limited = parse_configuration(b"apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\n"
                                      b"limitedResources:\n- resource: pods\n  matchContains: [requests.cpu]\n")
        with self.assertRaises(errors.StatusError) as caught:
            check_request([], attrs(pod(requests={"cpu": "1"})), PodEvaluator(), limited)
        self.assertEqual(caught.exception.message, 'pods "p" is forbidden: insufficient quota to consume: '
                                                   'requests.cpu')
        check_request([], attrs(pod()), PodEvaluator(), limited)  # uses no cpu: nothing to cover
        q = quota("q", {"requests.cpu": "2"})
        out = check_request([q], attrs(pod(requests={"cpu": "1"})), PodEvaluator(), limited)
        self.assertEqual(used(out[0]), {"requests.cpu": "1"})
        with self.assertRaises(QuotaConfigError):
            parse_configuration(b"apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\n"
                                b"limitedResources:\n- matchContains: [cpu]\n")


def make_pod(name: str, **kw) -> dict:
    p = pod(name, **kw)
    del p["metadata"]["namespace"]
    return p


class QuotaInProcessTests(ServerTestCase):
    """The real server: admission charges status.used, the controller recounts it."""

    async def make_quota(self, name: str, hard: dict, **spec) -> dict:
        r = await self.client.post(f"{NS}/resourcequotas", {"apiVersion": "v1", "kind": "ResourceQuota",
                                                           "metadata": {"name": name}, "spec": {"hard": hard, **spec}})
        self.assertEqual(r.code, 201, r.body)

        async def counted():
            got = await self.client.get(f"{NS}/resourcequotas/{name}")
            status = got.body.get("status") or {}
            return status if set(status.get("used") or {}) == set(hard) else None
        return await self.wait_for(counted)

    async def used(self, name: str) -> dict:
        return ((await self.client.get(f"{NS}/resourcequotas/{name}")).body.get("status") or {}).get("used") or {}

    @run
    async def test_the_controller_fills_status_from_what_exists(self):
        for i in range(2):
            r = await self.client.post(f"{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                            "metadata": {"name": f"cm{i}"}})
            self.assertEqual(r.code, 201)
        status = await self.make_quota("objects", {"configmaps": "5", "count/secrets": "3", "pods": "4"})
        self.assertEqual(status["hard"], {"configmaps": "5", "count/secrets": "3", "pods": "4"})
        # the two above and kube-root-ca.crt, which every namespace gets
        existing = len((await self.client.get(f"{NS}/configmaps")).body["items"])
        self.assertEqual(existing, 3)
        self.assertEqual(status["used"], {"configmaps": "3", "count/secrets": "0", "pods": "0"})
        # raising the limit is seen in status.hard
        r = await self.client.patch(f"{NS}/resourcequotas/objects", {"spec": {"hard": {"pods": "10"}}},
                                    content_type="application/merge-patch+json")
        self.assertEqual(r.code, 200, r.body)

        async def raised():
            got = await self.client.get(f"{NS}/resourcequotas/objects")
            return got.body["status"]["hard"].get("pods") == "10"
        await self.wait_for(raised)

    @run
    async def test_two_creates_race_for_the_last_slot(self):
        await self.make_quota("q", {"pods": "3"})
        results = await defer.gatherResults([self.client.post(f"{NS}/pods", make_pod(f"p{i}")) for i in range(5)])
        codes = sorted(r.code for r in results)
        self.assertEqual(codes, [201, 201, 201, 403, 403])
        self.assertEqual((await self.used("q"))["pods"], "3")

    @run
    async def test_deletes_and_finished_pods_give_usage_back(self):
        await self.make_quota("q", {"pods": "1", "requests.cpu": "1"})
        r = await self.client.post(f"{NS}/pods", make_pod("a", requests={"cpu": "500m"}))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(await self.used("q"), {"pods": "1", "requests.cpu": "500m"})
        r = await self.client.post(f"{NS}/pods", make_pod("b", requests={"cpu": "100m"}))
        self.assertEqual(r.code, 403)
        # a finished pod uses no compute: the controller sees the phase change
        current = (await self.client.get(f"{NS}/pods/a")).body
        current["status"] = {"phase": "Succeeded"}
        r = await self.client.put(f"{NS}/pods/a/status", current)
        self.assertEqual(r.code, 200, r.body)

        async def freed():
            return await self.used("q") == {"pods": "0", "requests.cpu": "0"}
        await self.wait_for(freed)
        r = await self.client.post(f"{NS}/pods", make_pod("b", requests={"cpu": "100m"}))
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.delete(f"{NS}/pods/b")
        self.assertIn(r.code, (200, 202))

        async def deleted():
            return (await self.used("q"))["pods"] == "0"
        await self.wait_for(deleted)

    @run
    async def test_dry_run_is_checked_but_not_charged(self):
        await self.make_quota("q", {"pods": "1"})
        r = await self.client.post(f"{NS}/pods?dryRun=All", make_pod("a"))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((await self.used("q"))["pods"], "0")
        r = await self.client.post(f"{NS}/pods", make_pod("a"))
        self.assertEqual(r.code, 201)
        r = await self.client.post(f"{NS}/pods?dryRun=All", make_pod("b"))
        self.assertEqual(r.code, 403)

    @run
    async def test_other_namespaces_are_not_limited(self):
        async def published():  # the root CA publisher's ConfigMap counts too: let it be there first
            return (await self.client.get(f"{NS}/configmaps/kube-root-ca.crt")).code == 200
        await self.wait_for(published)
        await self.make_quota("q", {"count/configmaps": "0"})
        r = await self.client.post(f"{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                        "metadata": {"name": "c"}})
        self.assertEqual(r.code, 403)
        self.assertEqual(r.body["message"], 'configmaps "c" is forbidden: exceeded quota: q, requested: '
                                            'count/configmaps=1, used: count/configmaps=1, limited: '
                                            'count/configmaps=0')
        r = await self.client.post("/api/v1/namespaces/kube-public/configmaps",
                                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        self.assertEqual(r.code, 201)
