"""APIServices on an in-process server: validation, status, Table, the local APIServices the
autoregistration and CRD registration keep, and the availability of APIServices whose Service
cannot be reached (no extension server needed: each check fails before connecting)."""
from __future__ import annotations

from kapiserver.aggregator import priorities
from kapiserver.aggregator.autoregister import AUTOMANAGED_LABEL
from kapiserver.testing.cases import InMemoryServerTestCase, run

APISERVICES = "/apis/apiregistration.k8s.io/v1/apiservices"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def remote_apiservice(group: str = "metrics.example.com", version: str = "v1beta1", **spec) -> dict:
    return {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": f"{version}.{group}"},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": 100, "versionPriority": 100,
                     "insecureSkipTLSVerify": True,
                     "service": {"namespace": "default", "name": "metrics"}, **spec}}


def crd(group: str = "stable.example.com") -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}},
                                  {"name": "v1beta1", "served": False, "storage": False,
                                   "schema": {"openAPIV3Schema": {"type": "object"}}}]}}


class APIServiceTests(InMemoryServerTestCase):
    async def apiservice(self, name: str):
        reply = await self.client.get(f"{APISERVICES}/{name}")
        return reply.body if reply.code == 200 else None

    async def condition(self, name: str) -> dict:
        obj = await self.apiservice(name) or {}
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition["type"] == "Available":
                return condition
        return {}

    @run
    async def test_builtin_group_versions_are_registered_as_local(self):
        async def listed():
            reply = await self.client.get(APISERVICES)
            return {i["metadata"]["name"]: i for i in reply.body["items"]} if len(reply.body["items"]) > 15 else None
        items = await self.wait_for(listed)
        for name, (group, version) in {"v1.": ("", "v1"), "v1.apps": ("apps", "v1"),
                                       "v1.rbac.authorization.k8s.io": ("rbac.authorization.k8s.io", "v1"),
                                       "v2.autoscaling": ("autoscaling", "v2"),
                                       "v1.apiextensions.k8s.io": ("apiextensions.k8s.io", "v1")}.items():
            obj = items[name]
            expected = priorities.BUILTIN_PRIORITIES[(group, version)]
            self.assertEqual((obj["spec"]["groupPriorityMinimum"], obj["spec"]["versionPriority"]), expected)
            self.assertEqual(obj["metadata"]["labels"][AUTOMANAGED_LABEL], "onstart")
            self.assertNotIn("service", obj["spec"])
            condition = obj["status"]["conditions"][0]
            self.assertEqual((condition["status"], condition["reason"], condition["message"]),
                             ("True", "Local", "Local APIServices are always available"))
        self.assertNotIn("v1.apiregistration.k8s.io", items)  # upstream registers only the delegates' groups

    @run
    async def test_crd_versions_get_local_apiservices_that_follow_the_crd(self):
        reply = await self.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd())
        self.assertEqual(reply.code, 201, reply.body)
        obj = await self.wait_for(lambda: self.apiservice("v1.stable.example.com"))
        self.assertEqual(obj["metadata"]["labels"][AUTOMANAGED_LABEL], "true")
        self.assertEqual((obj["spec"]["groupPriorityMinimum"], obj["spec"]["versionPriority"]), (1000, 100))
        self.assertIsNone(await self.apiservice("v1beta1.stable.example.com"))  # not served
        # a user's change of an automanaged APIService is put back
        reply = await self.client.patch(f"{APISERVICES}/v1.stable.example.com", {"spec": {"versionPriority": 7}})
        self.assertEqual(reply.code, 200, reply.body)

        async def restored():
            found = await self.apiservice("v1.stable.example.com")
            return found and found["spec"]["versionPriority"] == 100
        await self.wait_for(restored)
        reply = await self.client.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                         "widgets.stable.example.com")
        self.assertIn(reply.code, (200, 202))

        async def gone():
            return await self.apiservice("v1.stable.example.com") is None
        await self.wait_for(gone, timeout=15)

    @run
    async def test_validation_as_upstream(self):
        bad = remote_apiservice(groupPriorityMinimum=0, versionPriority=1001)
        bad["metadata"]["name"] = "wrong.name"
        bad["spec"]["caBundle"] = "Zm9v"
        bad["spec"]["service"] = {"namespace": "", "name": "metrics", "port": 70000}
        reply = await self.client.post(APISERVICES, bad)
        self.assertEqual(reply.code, 422, reply.body)
        messages = {c["field"]: c["message"] for c in reply.body["details"]["causes"]}
        self.assertEqual(messages["metadata.name"],
                         'Invalid value: "wrong.name": must be `spec.version+"."+spec.group`: '
                         '"v1beta1.metrics.example.com"')
        self.assertEqual(messages["spec.groupPriorityMinimum"],
                         "Invalid value: 0: must be positive and less than 20000")
        self.assertEqual(messages["spec.versionPriority"],
                         "Invalid value: 1001: must be positive and less than 1000")
        self.assertEqual(messages["spec.service.namespace"], "Required value")
        self.assertIn("port is not valid", messages["spec.service.port"])
        self.assertEqual(messages["spec.insecureSkipTLSVerify"],
                         "Invalid value: true: may not be true if caBundle is present")
        local = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.foo.io"},
                 "spec": {"group": "foo.io", "version": "v1", "groupPriorityMinimum": 10, "versionPriority": 10,
                          "caBundle": "Zm9v"}}
        reply = await self.client.post(APISERVICES, local)
        self.assertEqual(reply.code, 422)
        self.assertEqual(reply.body["details"]["causes"][0]["message"],
                         'Invalid value: "3 bytes": local APIServices may not have a caBundle')
        core = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v2."},
                "spec": {"version": "v2", "groupPriorityMinimum": 10, "versionPriority": 10}}
        reply = await self.client.post(APISERVICES, core)
        self.assertEqual(reply.code, 422)
        self.assertEqual(reply.body["details"]["causes"][0]["message"],
                         "Required value: only v1 may have an empty group and it better be legacy kube")

    @run
    async def test_status_subresource_keeps_spec_and_checks_condition_status(self):
        reply = await self.client.post(APISERVICES, remote_apiservice())
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["spec"]["service"]["port"], 443)  # defaulted
        name = "v1beta1.metrics.example.com"
        for _ in range(5):  # the availability controller writes the status too: retry its conflicts
            current = await self.apiservice(name)
            current["spec"]["versionPriority"] = 5
            current["status"] = {"conditions": [{"type": "Available", "status": "Maybe", "reason": "X",
                                                 "message": ""}]}
            reply = await self.client.put(f"{APISERVICES}/{name}/status", current)
            if reply.code != 409:
                break
        self.assertEqual(reply.code, 422, reply.body)
        self.assertIn('Unsupported value: "Maybe"', reply.body["details"]["causes"][0]["message"])

    @run
    async def test_availability_reasons_and_503_for_unreachable_service(self):
        name = "v1beta1.metrics.example.com"
        await self.client.post(APISERVICES, remote_apiservice())

        async def reason(expected: str):
            condition = await self.condition(name)
            return condition.get("reason") == expected and condition
        condition = await self.wait_for(lambda: reason("ServiceNotFound"))
        self.assertEqual((condition["status"], condition["message"]),
                         ("False", 'service/metrics in "default" is not present'))
        # an unavailable APIService: upstream's plain-text 503
        reply = await self.client.get("/apis/metrics.example.com/v1beta1/namespaces/default/pods")
        self.assertEqual((reply.code, reply.raw), (503, b"service unavailable\n"))
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics", "namespace": "default"},
                   "spec": {"ports": [{"name": "https", "port": 8443}]}}
        self.assertEqual((await self.client.post("/api/v1/namespaces/default/services", service)).code, 201)
        condition = await self.wait_for(lambda: reason("ServicePortError"))
        self.assertEqual(condition["message"], 'service/metrics in "default" is not listening on port 443')
        service = await self.client.get("/api/v1/namespaces/default/services/metrics")
        patched = {"spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}
        self.assertEqual((await self.client.patch("/api/v1/namespaces/default/services/metrics", patched)).code, 200)
        condition = await self.wait_for(lambda: reason("MissingEndpoints"))
        self.assertEqual(condition["message"],
                         'endpoints for service/metrics in "default" have no addresses with port name "https"')
        # the Table, as kubectl get apiservices shows it
        reply = await self.client.get(f"{APISERVICES}/{name}", headers={"Accept": TABLE})
        self.assertEqual([c["name"] for c in reply.body["columnDefinitions"]], ["Name", "Service", "Available", "Age"])
        self.assertEqual(reply.body["rows"][0]["cells"][:3], [name, "default/metrics", "False (MissingEndpoints)"])
        # discovery lists the group (as upstream's /apis does, available or not), after the built-in groups
        reply = await self.client.get("/apis")
        names = [g["name"] for g in reply.body["groups"]]
        self.assertEqual(names[0], "apiregistration.k8s.io")
        self.assertEqual(names[-1], "metrics.example.com")
        reply = await self.client.get("/apis/metrics.example.com")
        self.assertEqual(reply.body["preferredVersion"]["groupVersion"], "metrics.example.com/v1beta1")
