"""Server-side apply and managedFields through the real APIServer in-process.

Built-in kinds and custom resources go through the same handlers and Store.
Expected managedFields are derived from upstream's documented behaviour: the
server-side apply page of the Kubernetes documentation (entry format, the
ConfigMap example, conflicts, ownership transfer, removal of fields an
applier stops applying) and kube-apiserver's integration tests of apply
(test/integration/apiserver/apply), which these tests retell.
"""
from __future__ import annotations

from tests.apiextensions.test_crd_api import CRDTestCase
from kapiserver.testing.cases import ServerTestCase, run

CM = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
APPLY = "application/apply-patch+yaml"
KUBECTL_UA = "kubectl/v1.32.4 (linux/amd64) kubernetes/0000000"


def deployment(name: str = "web", image: str = "nginx:1.25", replicas=2, **spec_extra) -> dict:
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "nginx", "image": image}], **spec_extra}}}
    if replicas is None:
        del spec["replicas"]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
            "spec": spec}


def by_manager(obj: dict) -> dict:
    """{(manager, operation, subresource): fieldsV1}."""
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields") or ()}


class ApplyTestCase(ServerTestCase):
    async def apply(self, path: str, body, manager: str = "apply_test", query: str = "", **kw):
        """An apply PATCH; ``body`` as JSON, or sent as is when it is YAML text."""
        if isinstance(body, str):
            kw["raw"] = body.encode()
            body = None
        return await self.client.patch(f"{path}?fieldManager={manager}{query}", body, content_type=APPLY, **kw)


class ManagedFieldsFormatTests(ApplyTestCase):
    @run
    async def test_documented_configmap_example(self):
        """The documentation's ConfigMap: an applier's entry, then an updater taking .data.key."""
        r = await self.apply(CM + "/test-cm", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "test-cm", "namespace": "default", "labels": {"test-label": "test"}},
            "data": {"key": "value"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["metadata"]["managedFields"], [{
            "manager": "apply_test", "operation": "Apply", "apiVersion": "v1",
            "time": r.body["metadata"]["creationTimestamp"], "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:test-label": {}}}}}])
        await self.client.patch(CM + "/test-cm?fieldManager=updater", {"data": {"new-key": "value"}})
        r = await self.client.patch(CM + "/test-cm?fieldManager=updater", {"data": {"key": "new value"}})
        entries = r.body["metadata"]["managedFields"]
        self.assertEqual([(e["manager"], e["operation"], e["apiVersion"], e["fieldsType"]) for e in entries],
                         [("apply_test", "Apply", "v1", "FieldsV1"), ("updater", "Update", "v1", "FieldsV1")])
        self.assertEqual(entries[0]["fieldsV1"], {"f:metadata": {"f:labels": {"f:test-label": {}}}})
        self.assertEqual(entries[1]["fieldsV1"], {"f:data": {"f:key": {}, "f:new-key": {}}})
        self.assertEqual(list(entries[1]), ["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1"])

    @run
    async def test_create_label_edit_apply_scale(self):
        """Golden managedFields after what kubectl create, label, edit, apply --server-side and scale send.

        kubectl create owns what it sent and what defaulting filled in (upstream
        defaults on decode, before the field manager runs); each later writer
        takes over the fields it changed; the scale subresource is recorded as
        its own manager, written in the Deployment's version, without a time
        (upstream looks the time up under the Scale's identity).
        """
        created = await self.client.post(DEPLOYMENTS + "?fieldManager=kubectl-create", deployment())
        self.assertEqual(created.code, 201, created.body)
        await self.client.patch(DEPLOYMENTS + "/web?fieldManager=kubectl-label",
                                {"metadata": {"labels": {"tier": "frontend"}}})
        await self.client.patch(DEPLOYMENTS + "/web?fieldManager=kubectl-edit", {"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [{"name": "nginx", "image": "nginx:1.26"}]}}}},
            content_type="application/strategic-merge-patch+json")
        applied = deployment(image="nginx:1.26", replicas=3)
        conflict = await self.apply(DEPLOYMENTS + "/web", applied, manager="deployer")
        self.assertEqual(conflict.code, 409, conflict.body)
        self.assertEqual(conflict.body["message"], 'Apply failed with 1 conflict: conflict with "kubectl-create" '
                                                   'using apps/v1: .spec.replicas')
        r = await self.apply(DEPLOYMENTS + "/web", applied, manager="deployer", query="&force=true")
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 3))
        r = await self.client.patch(DEPLOYMENTS + "/web/scale", {"spec": {"replicas": 5}},
                                    headers={"User-Agent": KUBECTL_UA})
        self.assertEqual(r.code, 200, r.body)
        got = (await self.client.get(DEPLOYMENTS + "/web")).body
        self.assertEqual(got["spec"]["replicas"], 5)
        container = 'k:{"name":"nginx"}'
        self.assertEqual(by_manager(got), {
            ("deployer", "Apply", ""): {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:selector": {}, "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {container: {".": {}, "f:image": {}, "f:name": {}}}}}}},
            ("kubectl-create", "Update", ""): {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    "f:progressDeadlineSeconds": {}, "f:revisionHistoryLimit": {}, "f:selector": {},
                    "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}},
                                   "f:type": {}},
                    "f:template": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {
                            "f:containers": {container: {
                                ".": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
                                "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                            "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                            "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}}},
            ("kubectl-label", "Update", ""): {"f:metadata": {"f:labels": {"f:tier": {}}}},
            ("kubectl-edit", "Update", ""): {
                "f:spec": {"f:template": {"f:spec": {"f:containers": {container: {"f:image": {}}}}}}},
            ("kubectl", "Update", "scale"): {"f:spec": {"f:replicas": {}}},
        })
        entries = got["metadata"]["managedFields"]
        self.assertEqual(entries[0]["manager"], "deployer")  # appliers first
        scale = next(e for e in entries if e.get("subresource") == "scale")
        self.assertEqual((scale["apiVersion"], "time" in scale), ("apps/v1", False))
        self.assertTrue(all("time" in e for e in entries if e is not scale))

    @run
    async def test_status_subresource_entries(self):
        await self.client.post(DEPLOYMENTS + "?fieldManager=creator", deployment())
        r = await self.client.patch(DEPLOYMENTS + "/web/status?fieldManager=controller",
                                    {"status": {"observedGeneration": 1, "replicas": 2}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(by_manager(r.body)[("controller", "Update", "status")],
                         {"f:status": {"f:observedGeneration": {}, "f:replicas": {}}})
        # the main resource applies status in vain: it is reset, and not owned
        r = await self.apply(DEPLOYMENTS + "/web", {**deployment(), "status": {"replicas": 9}}, query="&force=true")
        self.assertEqual(r.body["status"]["replicas"], 2)
        self.assertNotIn("f:status", by_manager(r.body)[("apply_test", "Apply", "")])
        # an apply to the status subresource owns only status
        r = await self.apply(DEPLOYMENTS + "/web/status", {"apiVersion": "apps/v1", "kind": "Deployment",
                                                           "metadata": {"name": "web"},
                                                           "spec": {"replicas": 7}, "status": {"replicas": 3}},
                             manager="status-applier", query="&force=true")
        self.assertEqual((r.code, r.body["status"]["replicas"], r.body["spec"]["replicas"]), (200, 3, 2))
        self.assertEqual(by_manager(r.body)[("status-applier", "Apply", "status")], {"f:status": {"f:replicas": {}}})


class ApplyTests(ApplyTestCase):
    @run
    async def test_create_update_noop(self):
        r = await self.apply(CM + "/a", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                                         "data": {"k": "1"}})
        self.assertEqual((r.code, r.body["data"], r.body["metadata"]["namespace"]), (201, {"k": "1"}, "default"))
        rv = r.body["metadata"]["resourceVersion"]
        r = await self.apply(CM + "/a", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                                         "data": {"k": "1"}})
        self.assertEqual((r.code, r.body["metadata"]["resourceVersion"]), (200, rv))
        r = await self.apply(CM + "/a", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: '2'\n")
        self.assertEqual((r.code, r.body["data"]), (200, {"k": "2"}))
        self.assertNotEqual(r.body["metadata"]["resourceVersion"], rv)

    @run
    async def test_dry_run_creates_nothing(self):
        r = await self.apply(CM + "/a", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                                         "data": {"k": "v"}}, query="&dryRun=All")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["metadata"]["managedFields"][0]["manager"], "apply_test")
        self.assertEqual((await self.client.get(CM + "/a")).code, 404)

    @run
    async def test_fields_an_applier_stops_applying(self):
        """Removed if it alone owned them (replicas back to its default), kept if shared."""
        first = deployment(replicas=3, hostname="test-hostname")
        await self.apply(DEPLOYMENTS + "/web", first, manager="one")
        r = await self.apply(DEPLOYMENTS + "/web", deployment(replicas=None), manager="one")
        self.assertEqual(r.body["spec"]["replicas"], 1)
        self.assertNotIn("hostname", r.body["spec"]["template"]["spec"])
        await self.apply(DEPLOYMENTS + "/shared", deployment("shared", replicas=3, hostname="h"), manager="one")
        await self.apply(DEPLOYMENTS + "/shared", deployment("shared", replicas=3, hostname="h"), manager="two")
        r = await self.apply(DEPLOYMENTS + "/shared", deployment("shared", replicas=None), manager="one")
        self.assertEqual((r.body["spec"]["replicas"], r.body["spec"]["template"]["spec"]["hostname"]), (3, "h"))

    @run
    async def test_request_errors(self):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
        r = await self.client.patch(CM + "/a", body, content_type=APPLY)
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (422, "Invalid", (
            'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch')))
        self.assertEqual(r.body["details"], {"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [
            {"reason": "FieldValueRequired", "message": "Required value: is required for apply patch",
             "field": "fieldManager"}]})
        r = await self.client.patch(CM + "/a?force=true", {"data": {}})
        self.assertEqual((r.code, r.body["message"]), (422, 'PatchOptions.meta.k8s.io "" is invalid: force: '
                                                            'Forbidden: may not be specified for non-apply patch'))
        r = await self.client.post(CM + "?fieldManager=" + "x" * 129, {**body, "metadata": {"name": "b"}})
        self.assertEqual((r.code, r.body["message"]), (422, 'CreateOptions.meta.k8s.io "" is invalid: '
                                                            'fieldManager: Too long: may not be more than 128 bytes'))
        r = await self.apply(CM + "/a", {**body, "kind": "Secret"})
        self.assertEqual((r.code, r.body["message"]), (400, "invalid object type: /v1, Kind=Secret"))
        r = await self.apply(CM + "/b", body)
        self.assertEqual((r.code, r.body["message"]), (400, "the name of the object (a) does not match the name on "
                                                            "the URL (b)"))
        r = await self.apply(CM + "/a", {**body, "metadata": {"name": "a", "uid": "88e00824-7f0e-11e8-94a1-c8d3ffb15800"}})
        self.assertEqual((r.code, r.body["reason"]), (409, "Conflict"))
        self.assertIn("uid mismatch: the provided object specified uid 88e00824-7f0e-11e8-94a1-c8d3ffb15800, and "
                      "no existing object was found", r.body["message"])
        r = await self.apply(CM + "/a", {**body, "dta": {}})
        self.assertEqual((r.code, r.body["message"]), (400, "failed to create typed patch object (/a; /v1, "
                                                            "Kind=ConfigMap): .dta: field not declared in schema"))
        # upstream answers a 500 without a Status reason; the client's configuration is a 400 here
        self.assertEqual(r.body["reason"], "BadRequest")
        r = await self.client.request("PATCH", CM + "/a?fieldManager=m", raw=b"- a\n- b\n", content_type=APPLY)
        self.assertEqual((r.code, r.body["reason"]), (400, "BadRequest"))
        self.assertTrue(r.body["message"].startswith("error decoding YAML: "), r.body["message"])

    @run
    async def test_a_list_item_without_its_required_key_has_the_zero_key(self):
        """kube-openapi gives a Go field without omitempty its zero value as default, so an item that
        omits such a key is keyed by it (upstream, side by side: k:{"type":""}); the kind's validation
        then says what is missing."""
        ns = "/api/v1/namespaces/default"
        r = await self.apply(ns + "/status", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"},
                                              "status": {"conditions": [{"status": "True"}]}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["status"]["conditions"][0]["type"], "")
        entry = next(e for e in r.body["metadata"]["managedFields"] if e["manager"] == "apply_test")
        self.assertEqual(entry["fieldsV1"], {"f:status": {"f:conditions": {'k:{"type":""}': {".": {}, "f:status": {}}}}})
        r = await self.apply(ns + "/status", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"},
                                              "status": {"conditions": [{}, {"type": ""}]}})
        self.assertEqual((r.code, r.body["message"]), (400, "failed to create typed patch object (/default; /v1, "
                                                            "Kind=Namespace): .status.conditions: duplicate entries "
                                                            'for key [type=""]'))
        body = deployment("keys", replicas=1)
        body["spec"]["template"]["spec"]["containers"] = [{"name": "c", "image": "i", "ports": [{"protocol": "UDP"}]}]
        r = await self.apply(DEPLOYMENTS + "/keys", body)
        self.assertEqual((r.code, r.body["message"]), (422, 'Deployment.apps "keys" is invalid: spec.template.spec.'
                                                            "containers[0].ports[0].containerPort: Required value"))

    @run
    async def test_scale_subresource_ownership(self):
        """As upstream's TestScaleAllResources: the replicas move between appliers and scalers."""
        await self.apply(DEPLOYMENTS + "/web", deployment(replicas=1))
        r = await self.client.patch(DEPLOYMENTS + "/web/scale?fieldManager=scale_test", {"spec": {"replicas": 5}})
        self.assertEqual(r.code, 200, r.body)
        got = (await self.client.get(DEPLOYMENTS + "/web")).body
        self.assertEqual(by_manager(got)[("scale_test", "Update", "scale")], {"f:spec": {"f:replicas": {}}})
        self.assertEqual((await self.apply(DEPLOYMENTS + "/web", deployment(replicas=1))).code, 409)
        r = await self.apply(DEPLOYMENTS + "/web", deployment(replicas=1), query="&force=true")
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 1))
        scale = {"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "web", "namespace": "default"},
                 "spec": {"replicas": 17}}
        r = await self.apply(DEPLOYMENTS + "/web/scale", scale, manager="apply_scale")
        self.assertEqual(r.code, 409, r.body)
        self.assertIn('"apply_test"', r.body["message"])
        r = await self.apply(DEPLOYMENTS + "/web/scale", scale, manager="apply_scale", query="&force=true")
        self.assertEqual((r.code, r.body["kind"], r.body["spec"]["replicas"]), (200, "Scale", 17))
        got = (await self.client.get(DEPLOYMENTS + "/web")).body
        self.assertEqual(by_manager(got)[("apply_scale", "Apply", "scale")], {"f:spec": {"f:replicas": {}}})
        self.assertNotIn("f:replicas", by_manager(got)[("apply_test", "Apply", "")]["f:spec"])
        r = await self.client.put(DEPLOYMENTS + "/web/scale?fieldManager=replace_test", {**scale, "spec": {"replicas": 7}})
        got = (await self.client.get(DEPLOYMENTS + "/web")).body
        self.assertEqual((got["spec"]["replicas"], by_manager(got)[("replace_test", "Update", "scale")]),
                         (7, {"f:spec": {"f:replicas": {}}}))
        self.assertNotIn(("apply_scale", "Apply", "scale"), by_manager(got))

    @run
    async def test_clearing_managed_fields(self):
        """``managedFields: [{}]`` (merge or JSON patch) or ``[]`` (update) strips them; an update
        sending none keeps them."""
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"l": "v"}},
                "data": {"k": "1"}}
        for clear in (lambda: self.client.patch(CM + "/a", {"metadata": {"managedFields": [{}]}}),
                      lambda: self.client.patch(CM + "/a", [{"op": "replace", "path": "/metadata/managedFields",
                                                             "value": [{}]}],
                                                content_type="application/json-patch+json"),
                      lambda: self.client.put(CM + "/a", {**body, "metadata": {"name": "a", "labels": {"l": "v"},
                                                                               "managedFields": []}})):
            await self.apply(CM + "/a", body)
            r = await self.client.put(CM + "/a?fieldManager=replacer", {**body, "data": {"k": "2"}})
            self.assertEqual(set(by_manager(r.body)), {("apply_test", "Apply", ""), ("replacer", "Update", "")})
            r = await clear()
            self.assertEqual(r.code, 200, r.body)
            self.assertNotIn("managedFields", r.body["metadata"])
            self.assertNotIn("managedFields", (await self.client.get(CM + "/a")).body["metadata"])
            # an untracked object is tracked again by its next apply: before-first-apply takes all its
            # fields first and loses those the apply forces a new value into (.data.k); the label
            # applied with its live value is shared
            r = await self.apply(CM + "/a", {**body, "data": {"k": "3"}}, query="&force=true")
            self.assertEqual(by_manager(r.body), {
                ("apply_test", "Apply", ""): {"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:l": {}}}},
                ("before-first-apply", "Update", ""): {"f:data": {},
                                                       "f:metadata": {"f:labels": {".": {}, "f:l": {}}}}})
            await self.client.delete(CM + "/a")

    @run
    async def test_managers_from_user_agent_and_in_process_writes(self):
        r = await self.client.post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
                                   headers={"User-Agent": "OpenAPI-Generator/31.0.0/python"})
        self.assertEqual(r.body["metadata"].get("managedFields"), None)  # nothing set but server-owned metadata
        r = await self.client.post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
                                        "data": {"x": "y"}}, headers={"User-Agent": "OpenAPI-Generator/31.0.0/python"})
        self.assertEqual(list(by_manager(r.body)), [("OpenAPI-Generator", "Update", "")])
        # the namespace controller's kube-root-ca.crt is recorded as the server's own write
        async def root_ca_published():  # (written by the leader's controller, maybe not yet)
            reply = await self.client.get(CM + "/kube-root-ca.crt")
            return reply.body if reply.code == 200 else None
        got = await self.wait_for(root_ca_published)
        self.assertEqual([e["manager"] for e in got["metadata"].get("managedFields") or ()],
                         ["kube-controller-manager"])


class CustomResourceApplyTests(CRDTestCase, ApplyTestCase):
    GADGETS = "/apis/example.com/v1/namespaces/default/gadgets"

    async def gadgets(self):
        schema = {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["port", "protocol"],
                          "items": {"type": "object", "required": ["port"], "properties": {
                              "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"},
                              "name": {"type": "string"}}}},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                             "additionalProperties": {"type": "string"}}}},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gadgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "gadgets", "kind": "Gadget", "singular": "gadget"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": schema},
                                      "subresources": {"status": {}, "scale": {
                                          "specReplicasPath": ".spec.replicas",
                                          "statusReplicasPath": ".status.replicas"}}}]}}
        await self.create_crd(crd)

    def gadget(self, **spec) -> dict:
        return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}, "spec": spec}

    @run
    async def test_list_maps_sets_and_atomic_maps(self):
        await self.gadgets()
        r = await self.apply(self.GADGETS + "/g", self.gadget(
            replicas=1, ports=[{"port": 80, "name": "http"}, {"port": 53, "protocol": "UDP"}], tags=["a", "b"],
            selector={"app": "g"}), manager="one")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["spec"]["ports"], [{"port": 80, "name": "http", "protocol": "TCP"},
                                                   {"port": 53, "protocol": "UDP"}])
        self.assertEqual(by_manager(r.body)[("one", "Apply", "")], {"f:spec": {
            "f:ports": {'k:{"port":53,"protocol":"UDP"}': {".": {}, "f:port": {}, "f:protocol": {}},
                        'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}, "f:port": {}}},
            "f:replicas": {}, "f:selector": {}, "f:tags": {'v:"a"': {}, 'v:"b"': {}}}})
        # a second applier adds an item to each list and shares one
        r = await self.apply(self.GADGETS + "/g", self.gadget(ports=[{"port": 80, "name": "web"},
                                                                     {"port": 8080}], tags=["b", "c"]),
                             manager="two")
        self.assertEqual(r.code, 409, r.body)
        self.assertEqual(r.body["details"]["causes"], [{
            "reason": "FieldManagerConflict", "message": 'conflict with "one"',
            "field": '.spec.ports[port=80,protocol="TCP"].name'}])
        r = await self.apply(self.GADGETS + "/g", self.gadget(ports=[{"port": 8080}], tags=["b", "c"]),
                             manager="two")
        self.assertEqual((r.code, r.body["spec"]["tags"]), (200, ["a", "b", "c"]))
        self.assertEqual([p["port"] for p in r.body["spec"]["ports"]], [80, 53, 8080])
        # the first applier drops its items: only what nobody else applies goes away
        r = await self.apply(self.GADGETS + "/g", self.gadget(replicas=1, selector={"other": "x"}), manager="one")
        self.assertEqual((r.body["spec"]["tags"], [p["port"] for p in r.body["spec"]["ports"]]), (["b", "c"], [8080]))
        self.assertEqual(r.body["spec"]["selector"], {"other": "x"})  # atomic: replaced whole

    @run
    async def test_unknown_fields_and_subresources(self):
        await self.gadgets()
        r = await self.apply(self.GADGETS + "/g", self.gadget(replicaz=1))
        self.assertEqual((r.code, r.body["message"]), (400, "failed to create typed patch object (/g; example.com/v1, "
                                                            "Kind=Gadget): .spec.replicaz: field not declared in schema"))
        r = await self.apply(self.GADGETS + "/g", {**self.gadget(replicas=1), "metadata": {"name": "g", "nam": "x"}})
        self.assertEqual(r.body["message"], "failed to create typed patch object (/g; example.com/v1, Kind=Gadget): "
                                            ".metadata.nam: field not declared in schema")
        r = await self.apply(self.GADGETS + "/g", self.gadget(replicas=1))
        self.assertEqual(r.code, 201, r.body)
        status = {**self.gadget(), "status": {"replicas": 4}}
        r = await self.apply(self.GADGETS + "/g/status", status, manager="ctrl")
        self.assertEqual((r.code, r.body["status"]), (200, {"replicas": 4}))
        self.assertEqual(by_manager(r.body)[("ctrl", "Apply", "status")], {"f:status": {"f:replicas": {}}})
        r = await self.client.patch(self.GADGETS + "/g/scale?fieldManager=hpa", {"spec": {"replicas": 3}})
        self.assertEqual(r.code, 200, r.body)
        got = (await self.client.get(self.GADGETS + "/g")).body
        self.assertEqual((got["spec"]["replicas"], by_manager(got)[("hpa", "Update", "scale")]),
                         (3, {"f:spec": {"f:replicas": {}}}))
        self.assertEqual(by_manager(got).get(("apply_test", "Apply", "")), None)  # it owned only the replicas


class ClientManagedFieldsTests(ApplyTestCase):
    @run
    async def test_client_entries_are_kept_where_unchanged_and_validated(self):
        """A create changes every field it sets: a client's entry keeps only what the object does
        not hold; what is kept is validated as upstream's ObjectMeta validation does."""
        entry = {"manager": "x" * 129, "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:data": {"f:k": {}, "f:elsewhere": {}}}}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [entry]},
                "data": {"k": "v"}}
        r = await self.client.post(CM, body)
        self.assertEqual((r.code, r.body["message"]), (422, 'ConfigMap "a" is invalid: metadata.managedFields[0]'
                                                            '.manager: Too long: may not be more than 128 bytes'))
        entry["manager"] = "mine"
        r = await self.client.post(CM + "?fieldManager=creator", body)
        self.assertEqual(by_manager(r.body), {("mine", "Update", ""): {"f:data": {"f:elsewhere": {}}},
                                              ("creator", "Update", ""): {"f:data": {".": {}, "f:k": {}}}})


class WhatTheServerAddsTests(ApplyTestCase):
    """Upstream records a write before the strategy prepares the object and before admission:
    what those add is owned by nobody, while defaults (applied on decode upstream) belong to
    the writer."""

    @run
    async def test_namespace_pod_and_job(self):
        r = await self.client.post("/api/v1/namespaces?fieldManager=kubectl-create",
                                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "owned"}})
        self.assertEqual(r.body["spec"], {"finalizers": ["kubernetes"]})
        self.assertEqual(by_manager(r.body), {("kubectl-create", "Update", ""): {
            "f:metadata": {"f:labels": {".": {}, "f:kubernetes.io/metadata.name": {}}}}})
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}
        r = await self.client.post("/api/v1/namespaces/default/pods?fieldManager=kubectl-run", pod)
        self.assertEqual((r.code, r.body["spec"]["serviceAccountName"]), (201, "default"))
        spec = by_manager(r.body)[("kubectl-run", "Update", "")]["f:spec"]
        self.assertIn("f:dnsPolicy", spec)
        for added in ("f:serviceAccountName", "f:tolerations", "f:priority"):
            self.assertNotIn(added, spec)
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                                              "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}
        r = await self.client.post("/apis/batch/v1/namespaces/default/jobs?fieldManager=kubectl-create", job)
        self.assertEqual(r.code, 201, r.body)
        self.assertIn("matchLabels", r.body["spec"]["selector"])
        spec = by_manager(r.body)[("kubectl-create", "Update", "")]["f:spec"]
        self.assertIn("f:backoffLimit", spec)
        self.assertNotIn("f:selector", spec)
        self.assertNotIn("f:metadata", spec["f:template"])
