"""Pod subresources over HTTP on an in-process server: binding (and the legacy
``bindings`` resource), eviction with PodDisruptionBudgets, ephemeral
containers, and what the kubelet ones (log, exec, attach, portforward, proxy)
answer before they reach a kubelet (``tests/node/`` reaches a real one)."""
from __future__ import annotations

from kapiserver.testing.cases import ServerTestCase, run

NS = "/api/v1/namespaces/default"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
MERGE = "application/merge-patch+json"
EVICTION = {"apiVersion": "policy/v1", "kind": "Eviction"}
# kube-apiserver v1.32.13's answers to the same requests
UPSTREAM_NOT_PROCESSED = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Cannot '
                          b'evict pod as it would violate the pod\'s disruption budget.","reason":"TooManyRequests",'
                          b'"details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web is '
                          b'still being processed by the server."}],"retryAfterSeconds":10},"code":429}\n')
UPSTREAM_NO_DISRUPTIONS = (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Cannot '
                           b'evict pod as it would violate the pod\'s disruption budget.","reason":"TooManyRequests",'
                           b'"details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web '
                           b'needs 2 healthy pods and has 2 currently"}]},"code":429}\n')
UPSTREAM_SUCCESS = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}\n'


def pod(name: str, labels: dict | None = None, **spec) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


class BindingTests(ServerTestCase):
    @run
    async def test_binding_assigns_the_node_once(self):
        await self.client.post(NS + "/pods", pod("p"))
        r = await self.client.post(NS + "/pods/p/binding", {"metadata": {"name": "p", "annotations": {"x": "y"}},
                                                            "target": {"name": "n1"}})
        self.assertEqual((r.code, r.raw), (201, UPSTREAM_SUCCESS))
        got = (await self.client.get(NS + "/pods/p")).body
        self.assertEqual(got["spec"]["nodeName"], "n1")
        self.assertEqual(got["metadata"]["annotations"], {"x": "y"})
        self.assertEqual([(c["type"], c["status"]) for c in got["status"]["conditions"]], [("PodScheduled", "True")])
        again = await self.client.post(NS + "/bindings", {"metadata": {"name": "p"}, "target": {"name": "n2"}})
        self.assertEqual(again.code, 409)
        self.assertEqual(again.body["message"],
                         'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n1"')
        self.assertEqual(again.body["details"], {"name": "p", "kind": "pods/binding"})

    @run
    async def test_binding_errors(self):
        await self.client.post(NS + "/pods", pod("p"))
        r = await self.client.post(NS + "/pods/p/binding", {"metadata": {"name": "other"}, "target": {"name": "n"}})
        self.assertEqual((r.code, r.body["message"]), (400, "name in URL does not match name in Binding object"))
        for path in (NS + "/bindings", NS + "/pods/p/binding"):  # the namespace first, as upstream's create handler
            r = await self.client.post(path, {"metadata": {"name": "p", "namespace": "elsewhere"}, "target": {}})
            self.assertEqual((r.code, r.body["message"]), (400, "the namespace of the provided object does not match "
                                                                "the namespace sent on the request"), path)
        r = await self.client.post(NS + "/pods/p/binding", {"metadata": {"name": "p"}, "target": {"kind": "Pod"}})
        # (upstream answers this 500 without a reason; a client's mistake is a 422 here)
        self.assertEqual((r.code, r.body["reason"]), (422, "Invalid"))
        self.assertEqual(r.body["message"], 'Binding "p" is invalid: [target.kind: Unsupported value: "Pod": '
                                            'supported values: "Node", "<empty>", target.name: Required value]')
        r = await self.client.post(NS + "/bindings", {"metadata": {"name": "nope"}, "target": {"name": "n"}})
        self.assertEqual((r.code, r.body["message"]), (404, 'pods "nope" not found'))
        r = await self.client.get(NS + "/bindings")
        self.assertEqual(r.code, 405)


class EvictionTests(ServerTestCase):
    async def running(self, name: str, labels: dict, ready: bool = True) -> None:
        self.assertEqual((await self.client.post(NS + "/pods", pod(name, labels))).code, 201)
        r = await self.client.patch(NS + f"/pods/{name}/status", {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}},
            content_type=MERGE)
        self.assertEqual(r.code, 200, r.body)

    async def evict(self, name: str):
        return await self.client.post(NS + f"/pods/{name}/eviction", dict(EVICTION, metadata={"name": name}),
                                      headers={"User-Agent": "kubectl"})

    async def budget(self, status: dict | None = None, **spec) -> None:
        r = await self.client.post(PDBS, {"metadata": {"name": "web"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}}, **(spec or {"minAvailable": 2})}})
        self.assertEqual(r.code, 201, r.body)
        if status is not None:
            r = await self.client.patch(PDBS + "/web/status", {"status": status}, content_type=MERGE)
            self.assertEqual(r.code, 200, r.body)

    @run
    async def test_pending_pod_is_evicted_whatever_the_budget(self):
        await self.budget()
        await self.client.post(NS + "/pods", pod("pending", {"app": "web"}))
        r = await self.evict("pending")
        self.assertEqual((r.code, r.raw), (201, UPSTREAM_SUCCESS))
        self.assertEqual((await self.client.get(NS + "/pods/pending")).code, 404)

    @run
    async def test_budget_not_yet_processed_blocks(self):
        await self.running("a", {"app": "web"})
        await self.budget()
        r = await self.evict("a")
        self.assertEqual((r.code, r.raw), (429, UPSTREAM_NOT_PROCESSED))
        self.assertEqual(r.header("retry-after"), "10")
        self.assertEqual((await self.client.get(NS + "/pods/a")).code, 200)

    @run
    async def test_no_disruption_allowed_blocks_then_one_allowed_is_used_up(self):
        await self.running("a", {"app": "web"})
        await self.running("b", {"app": "web"})
        await self.budget({"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 2,
                           "desiredHealthy": 2, "expectedPods": 2})
        r = await self.evict("a")
        self.assertEqual((r.code, r.raw), (429, UPSTREAM_NO_DISRUPTIONS))
        self.assertIsNone(r.header("retry-after"))
        await self.client.patch(PDBS + "/web/status", {"status": {"disruptionsAllowed": 1}}, content_type=MERGE)
        r = await self.evict("a")
        self.assertEqual((r.code, r.raw), (201, UPSTREAM_SUCCESS))
        self.assertEqual((await self.client.get(NS + "/pods/a")).code, 404)
        status = (await self.client.get(PDBS + "/web")).body["status"]
        self.assertEqual(status["disruptionsAllowed"], 0)
        self.assertEqual(list(status["disruptedPods"]), ["a"])
        self.assertEqual([(c["type"], c["status"], c["reason"]) for c in status["conditions"]],
                         [("DisruptionAllowed", "False", "InsufficientPods")])
        r = await self.evict("b")
        self.assertEqual(r.code, 429)

    @run
    async def test_pod_without_budget_is_deleted_and_dry_run_keeps_it(self):
        await self.running("free", {"app": "other"})
        await self.budget({"observedGeneration": 1, "disruptionsAllowed": 0})
        r = await self.client.post(NS + "/pods/free/eviction?dryRun=All", dict(EVICTION, metadata={"name": "free"}))
        self.assertEqual(r.code, 201)
        self.assertEqual((await self.client.get(NS + "/pods/free")).code, 200)
        r = await self.evict("free")
        self.assertEqual(r.code, 201)
        self.assertEqual((await self.client.get(NS + "/pods/free")).code, 404)

    @run
    async def test_unhealthy_pod_goes_when_the_budget_allows_it(self):
        await self.running("sick", {"app": "web"}, ready=False)
        await self.budget({"observedGeneration": 1, "disruptionsAllowed": 0}, minAvailable=2,
                          unhealthyPodEvictionPolicy="AlwaysAllow")
        self.assertEqual((await self.evict("sick")).code, 201)

    @run
    async def test_two_budgets_are_not_supported(self):
        await self.running("a", {"app": "web", "tier": "x"})
        await self.budget()
        await self.client.post(PDBS, {"metadata": {"name": "other"},
                                      "spec": {"minAvailable": 1, "selector": {"matchLabels": {"tier": "x"}}}})
        r = await self.evict("a")
        self.assertEqual(r.code, 201)
        self.assertEqual((r.body["status"], r.body["code"]), ("Failure", 500))
        self.assertEqual(r.body["message"], "This pod has more than one PodDisruptionBudget, which the eviction "
                                            "subresource does not support.")

    @run
    async def test_name_must_match_and_unknown_pod(self):
        await self.running("a", {"app": "web"})
        r = await self.client.post(NS + "/pods/a/eviction", dict(EVICTION, metadata={"name": "b"}))
        self.assertEqual((r.code, r.body["message"]), (400, "name in URL does not match name in Eviction object"))
        r = await self.evict("missing")
        self.assertEqual((r.code, r.body["message"]), (404, 'pods "missing" not found'))


class EphemeralContainerTests(ServerTestCase):
    DEBUG = {"name": "debugger", "image": "busybox", "stdin": True, "tty": True}

    @run
    async def test_add_through_the_subresource_only(self):
        await self.client.post(NS + "/pods", pod("p"))
        r = await self.client.patch(NS + "/pods/p/ephemeralcontainers", {
            "metadata": {"labels": {"ignored": "yes"}},
            "spec": {"ephemeralContainers": [self.DEBUG], "activeDeadlineSeconds": 5}}, content_type=MERGE)
        self.assertEqual(r.code, 200, r.body)
        added = r.body["spec"]["ephemeralContainers"]
        self.assertEqual([c["name"] for c in added], ["debugger"])
        self.assertEqual(added[0]["terminationMessagePolicy"], "File")  # defaulted like any container
        self.assertNotIn("activeDeadlineSeconds", r.body["spec"])
        self.assertNotIn("ignored", r.body["metadata"].get("labels") or {})
        got = await self.client.get(NS + "/pods/p/ephemeralcontainers")
        self.assertEqual((got.body["kind"], len(got.body["spec"]["ephemeralContainers"])), ("Pod", 1))

    @run
    async def test_existing_ones_may_not_change_or_go(self):
        await self.client.post(NS + "/pods", pod("p"))
        pod_now = (await self.client.patch(NS + "/pods/p/ephemeralcontainers",
                                           {"spec": {"ephemeralContainers": [self.DEBUG]}}, content_type=MERGE)).body
        changed = dict(pod_now)
        changed["spec"] = dict(pod_now["spec"], ephemeralContainers=[dict(self.DEBUG, image="alpine")])
        r = await self.client.put(NS + "/pods/p/ephemeralcontainers", changed)
        self.assertEqual(r.code, 422)
        # upstream's ValidatePodEphemeralContainersUpdate reports changes at spec.ephemeralContainers
        self.assertEqual(r.body["details"]["causes"][0]["field"], "spec.ephemeralContainers")
        self.assertTrue(r.body["details"]["causes"][0]["message"].startswith(
            'Forbidden: existing ephemeral containers "debugger" may not be changed\n'), r.body)
        removed = dict(pod_now)
        removed["spec"] = dict(pod_now["spec"], ephemeralContainers=[])
        r = await self.client.put(NS + "/pods/p/ephemeralcontainers", removed)
        self.assertEqual(r.code, 422)
        self.assertIn('existing ephemeral containers "debugger" may not be removed',
                      r.body["details"]["causes"][0]["message"])

    @run
    async def test_what_an_ephemeral_container_may_not_have(self):
        await self.client.post(NS + "/pods", pod("p"))
        r = await self.client.patch(NS + "/pods/p/ephemeralcontainers", {"spec": {"ephemeralContainers": [
            dict(self.DEBUG, ports=[{"containerPort": 80}], readinessProbe={"exec": {"command": ["true"]}},
                 targetContainerName="nope")]}}, content_type=MERGE)
        self.assertEqual(r.code, 422)
        self.assertEqual(sorted(c["field"] for c in r.body["details"]["causes"]), [
            "spec.ephemeralContainers[0].ports", "spec.ephemeralContainers[0].readinessProbe",
            "spec.ephemeralContainers[0].targetContainerName"])
        created = await self.client.post(NS + "/pods", pod("q", ephemeralContainers=[self.DEBUG]))
        self.assertEqual(created.code, 422)
        self.assertIn("spec.ephemeralContainers: Forbidden: cannot be set on create", created.body["message"])


class KubeletSubresourceTests(ServerTestCase):
    @run
    async def test_before_a_node_runs_the_pod(self):
        await self.client.post(NS + "/pods", {"metadata": {"name": "two"}, "spec": {"containers": [
            {"name": "a", "image": "nginx"}, {"name": "b", "image": "nginx"}]}})
        r = await self.client.get(NS + "/pods/two/log?container=a")
        self.assertEqual((r.code, r.raw), (204, b""))
        r = await self.client.get(NS + "/pods/two/log")
        self.assertEqual((r.code, r.body["message"]),
                         (400, "a container name must be specified for pod two, choose one of: [a b]"))
        r = await self.client.get(NS + "/pods/two/log?container=zz")
        self.assertEqual((r.code, r.body["message"]), (400, "container zz is not valid for pod two"))
        r = await self.client.post(NS + "/pods/two/exec?container=a&command=ls&stdout=true")
        self.assertEqual((r.code, r.body["message"]), (400, "pod two does not have a host assigned"))
        r = await self.client.get(NS + "/pods/missing/log")
        self.assertEqual((r.code, r.body["message"]), (404, 'pods "missing" not found'))

    @run
    async def test_what_is_checked_before_a_kubelet_is_dialed(self):
        # upstream's answers when the node, its address or the pod's IP is missing
        await self.client.post(NS + "/pods", pod("p", nodeName="n1"))
        r = await self.client.get(NS + "/pods/p/log")
        self.assertEqual((r.code, r.body["message"]), (404, 'nodes "n1" not found'))
        r = await self.client.post(NS + "/pods/p/exec?command=ls&stdout=true")
        self.assertEqual((r.code, r.body["message"]), (400, "Upgrade request required"))
        r = await self.client.post(NS + "/pods/p/portforward?ports=80")
        self.assertEqual((r.code, r.body["message"]), (400, "Upgrade request required"))
        r = await self.client.post(NS + "/pods/p/exec?command=ls&dryRun=All")
        self.assertEqual((r.code, r.body["message"]), (400, "dryRun is not supported"))
        await self.client.post("/api/v1/nodes", {"metadata": {"name": "n1"}})
        r = await self.client.get(NS + "/pods/p/log")
        self.assertEqual((r.code, r.body.get("reason"), r.body["message"]),
                         (500, None, "no preferred addresses found; known addresses: []"))
        r = await self.client.get(NS + "/pods/p/proxy/healthz")
        self.assertEqual((r.code, r.body["message"]), (400, "address not allowed"))
        r = await self.client.request("OPTIONS", NS + "/pods/p/proxy/healthz")  # routed as upstream's proxyMethods
        self.assertEqual((r.code, r.body["message"]), (400, "address not allowed"))
        r = await self.client.get(NS + "/pods/p/log?tailLines=-1&limitBytes=0")
        self.assertEqual((r.code, r.body["reason"]), (422, "Invalid"))
        self.assertEqual(r.body["message"], 'PodLogOptions "p" is invalid: [tailLines: Invalid value: -1: must be '
                                            'greater than or equal to 0, limitBytes: Invalid value: 0: must be '
                                            'greater than 0]')
        r = await self.client.get(NS + "/pods/p/log?tailLines=x")
        self.assertEqual((r.code, r.body["message"]), (400, 'strconv.ParseInt: parsing "x": invalid syntax'))
        r = await self.client.get("/api/v1/nodes/https:n2:10250/proxy/stats")
        self.assertEqual((r.code, r.body["message"]), (404, 'nodes "n2" not found'))
        r = await self.client.get(NS + "/services/web/proxy/")
        self.assertEqual((r.code, r.body["message"]), (404, 'endpoints "web" not found'))
        r = await self.client.get(NS + "/services/web:80/proxy/")
        self.assertEqual((r.code, r.body["message"]), (404, 'services "web" not found'))
        r = await self.client.request("PUT", NS + "/pods/p/log")
        self.assertEqual(r.code, 405)
