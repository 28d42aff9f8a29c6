"""CustomResourceDefinitions through the real APIServer in-process: the CRD API, its
status conditions, and custom resources served by the generic machinery."""
from __future__ import annotations

import copy
import json

import treq
from twisted.internet import defer, reactor
from twisted.trial import unittest

from tests.apiextensions.crd_fixtures import load
from kapiserver.testing.apiserver import start_api_server
from kapiserver.testing.cases import HANG_GUARD, ServerTestCase, run, sleep
from kapiserver.testing.client import JSONClient

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ISSUER_CRD = CRDS + "/issuers.certs.example.com"
ISSUERS = "/apis/certs.example.com/v1/namespaces/default/issuers"
ISSUERS_V1ALPHA1 = "/apis/certs.example.com/v1alpha1/namespaces/default/issuers"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def condition(crd: dict, ctype: str) -> dict:
    return next((c for c in (crd.get("status") or {}).get("conditions") or () if c["type"] == ctype), {})


def simple_crd(group: str = "example.com", plural: str = "widgets", kind: str = "Widget", scope: str = "Namespaced",
               schema: dict | None = None, singular: str = "", **version) -> dict:
    v = {"name": "v1", "served": True, "storage": True,
         "schema": {"openAPIV3Schema": schema or {"type": "object", "properties": {
             "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
             "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}}
    v.update(version)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"plural": plural, "kind": kind, "singular": singular or plural[:-1]},
                     "versions": [v]}}


class CRDTestCase(ServerTestCase):
    async def create_crd(self, crd: dict) -> dict:
        r = await self.client.post(CRDS, crd)
        self.assertEqual(r.code, 201, r.body)
        name = crd["metadata"]["name"]

        async def established():
            got = await self.client.get(f"{CRDS}/{name}")
            return got.body if condition(got.body, "Established").get("status") == "True" else None
        return await self.wait_for(established)

    async def create_issuers(self) -> dict:
        return await self.create_crd(load("issuer-crd.yaml"))

    async def post_issuer(self, fixture: str = "issuer-ca.yaml", **kw):
        return await self.client.post(ISSUERS, load(fixture), **kw)


class CRDAPITests(CRDTestCase):
    @run
    async def test_create_defaults_status_and_serves(self):
        r = await self.client.post(CRDS, load("issuer-crd.yaml"))
        self.assertEqual(r.code, 201, r.body)
        spec = r.body["spec"]
        self.assertEqual(spec["names"]["listKind"], "IssuerList")
        self.assertEqual(spec["conversion"], {"strategy": "None"})
        self.assertEqual(r.body["status"]["storedVersions"], ["v1"])

        async def served():
            return (await self.client.get(ISSUERS)).code == 200
        await self.wait_for(served, timeout=HANG_GUARD)  # how soon is not asserted: a busy machine is slower
        crd = (await self.client.get(ISSUER_CRD)).body
        self.assertEqual(condition(crd, "NamesAccepted")["reason"], "NoConflicts")
        self.assertEqual(condition(crd, "Established")["reason"], "InitialNamesAccepted")
        self.assertEqual(crd["status"]["acceptedNames"]["shortNames"], ["iss"])
        self.assertNotIn("NonStructuralSchema", [c["type"] for c in crd["status"]["conditions"]])
        disco = (await self.client.get("/apis/certs.example.com/v1")).body
        issuers = next(res for res in disco["resources"] if res["name"] == "issuers")
        self.assertEqual(issuers["shortNames"], ["iss"])
        self.assertEqual(issuers["categories"], ["certs"])
        self.assertIn("issuers/scale", [res["name"] for res in disco["resources"]])

    @run
    async def test_invalid_crd_is_422_with_causes(self):
        crd = simple_crd()
        crd["metadata"]["name"] = "wrong.example.com"
        crd["spec"]["versions"][0]["storage"] = False
        r = await self.client.post(CRDS, crd)
        self.assertEqual(r.code, 422, r.body)
        self.assertTrue(r.body["message"].startswith(
            'CustomResourceDefinition.apiextensions.k8s.io "wrong.example.com" is invalid: '), r.body["message"])
        fields = {c["field"] for c in r.body["details"]["causes"]}
        self.assertIn("metadata.name", fields)
        self.assertIn("spec.versions", fields)

    @run
    async def test_version_without_a_name_is_422_not_500(self):
        """Go decodes the missing name as ""; PrepareForCreate records "" as the stored version and
        validation refuses the name as a DNS-1035 label (nothing about storedVersions)."""
        crd = simple_crd()
        del crd["spec"]["versions"][0]["name"]
        r = await self.client.post(CRDS, crd)
        self.assertEqual((r.code, r.body["reason"]), (422, "Invalid"), r.body)
        self.assertEqual([(c["reason"], c["field"]) for c in r.body["details"]["causes"]],
                         [("FieldValueInvalid", "spec.versions[0].name")])
        self.assertTrue(r.body["details"]["causes"][0]["message"].startswith(
            'Invalid value: "": a DNS-1035 label must consist of lower case alphanumeric characters'))

    @run
    async def test_protected_group_needs_approval_annotation(self):
        crd = simple_crd(group="things.k8s.io")
        r = await self.client.post(CRDS, crd)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["details"]["causes"][0]["field"], "metadata.annotations[api-approved.kubernetes.io]")
        crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, testing only"}
        got = await self.create_crd(crd)
        cond = condition(got, "KubernetesAPIApprovalPolicyConformant")
        self.assertEqual((cond["status"], cond["reason"]), ("False", "UnapprovedAnnotation"))
        approved = simple_crd(group="other.k8s.io")
        approved["metadata"]["annotations"] = {
            "api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/1"}
        got = await self.create_crd(approved)
        self.assertEqual(condition(got, "KubernetesAPIApprovalPolicyConformant")["status"], "True")

    @run
    async def test_kind_conflict_is_not_accepted_nor_served(self):
        await self.create_crd(simple_crd())
        await self.client.post(CRDS, simple_crd(plural="gadgets", kind="Widget"))

        async def conflicted():
            got = (await self.client.get(CRDS + "/gadgets.example.com")).body
            return got if condition(got, "NamesAccepted").get("status") == "False" else None
        got = await self.wait_for(conflicted)
        self.assertEqual(condition(got, "NamesAccepted")["reason"], "KindConflict")
        self.assertEqual(condition(got, "NamesAccepted")["message"], '"Widget" is already in use')
        self.assertEqual(condition(got, "Established")["status"], "False")
        self.assertEqual((await self.client.get("/apis/example.com/v1/namespaces/default/gadgets")).code, 404)

    @run
    async def test_builtin_resource_names_conflict(self):
        crd = simple_crd(group="coordination.k8s.io", plural="mylocks", kind="Lease")
        crd["metadata"]["annotations"] = {"api-approved.kubernetes.io": "unapproved, test"}
        await self.client.post(CRDS, crd)

        async def conflicted():
            got = (await self.client.get(CRDS + "/mylocks.coordination.k8s.io")).body
            return got if condition(got, "NamesAccepted").get("status") == "False" else None
        got = await self.wait_for(conflicted)
        self.assertEqual(condition(got, "NamesAccepted")["reason"], "KindConflict")

    @run
    async def test_stored_versions_track_storage_version(self):
        crd = await self.create_crd(simple_crd())
        crd["spec"]["versions"][0]["storage"] = False
        crd["spec"]["versions"].append(dict(copy.deepcopy(crd["spec"]["versions"][0]), name="v2", storage=True))
        r = await self.client.put(CRDS + "/widgets.example.com", crd)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["status"]["storedVersions"], ["v1", "v2"])

    @run
    async def test_delete_removes_instances_then_endpoints_and_recreate_serves_again(self):
        await self.create_issuers()
        self.assertEqual((await self.post_issuer()).code, 201)
        r = await self.client.delete(ISSUER_CRD)
        self.assertEqual(r.code, 200)
        self.assertIn("customresourcecleanup.apiextensions.k8s.io", r.body["metadata"]["finalizers"])
        self.assertEqual(condition(r.body, "Terminating")["status"], "True")

        async def gone():
            return (await self.client.get(ISSUER_CRD)).code == 404
        await self.wait_for(gone)
        self.assertEqual((await self.client.get(ISSUERS)).code, 404)
        disco = await self.client.get("/apis")
        self.assertNotIn("certs.example.com", [g["name"] for g in disco.body["groups"]])
        await self.create_issuers()
        listed = await self.client.get(ISSUERS)
        self.assertEqual((listed.code, listed.body["items"]), (200, []))


class CustomResourceTests(CRDTestCase):
    def setUp(self):
        d = super().setUp()
        d.addCallback(lambda _: defer.Deferred.fromCoroutine(self.create_issuers()))
        return d

    @run
    async def test_create_applies_defaults_and_get_returns_them(self):
        r = await self.post_issuer()
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["apiVersion"], "certs.example.com/v1")
        self.assertEqual(r.body["metadata"]["generation"], 1)
        self.assertEqual((r.body["spec"]["keyAlgorithm"], r.body["spec"]["keySize"]), ("RSA", 2048))
        got = await self.client.get(ISSUERS + "/internal-ca")
        self.assertEqual(got.body["spec"]["replicas"], 2)

    @run
    async def test_invalid_object_is_422_with_upstream_messages(self):
        r = await self.post_issuer("issuer-invalid.yaml")
        self.assertEqual(r.code, 422)
        self.assertTrue(r.body["message"].startswith('Issuer.certs.example.com "broken" is invalid: ['))
        causes = {c["field"]: c["message"] for c in r.body["details"]["causes"]}
        self.assertEqual(causes["spec.type"], 'Unsupported value: "Vault": supported values: "ACME", "CA", '
                                              '"SelfSigned"')
        self.assertEqual(causes["spec.replicas"],
                         "Invalid value: 0: spec.replicas in body should be greater than or equal to 1")
        self.assertEqual(causes["spec.acme.server"],
                         'Invalid value: "http://acme.example.com": the ACME server must use https')

    @run
    async def test_cel_rules_on_create_and_transition_rule_on_update(self):
        acme = load("issuer-acme.yaml")
        acme["spec"]["keySize"] = 1024
        r = await self.client.post(ISSUERS, acme)
        self.assertEqual(r.code, 422)
        self.assertIn("spec: Invalid value: ECDSA keys must be 256, 384 or 521 bits, not 1024",
                      r.body["message"])
        self.assertEqual((await self.post_issuer()).code, 201)
        r = await self.client.patch(ISSUERS + "/internal-ca", {"spec": {"type": "SelfSigned"}})
        self.assertEqual(r.code, 422)
        self.assertIn("type is immutable", r.body["message"])

    @run
    async def test_cel_rules_apply_to_big_objects_too(self):
        from kapiserver.apiextensions.custom_resource import CEL_THREAD_THRESHOLD_BYTES
        acme = load("issuer-acme.yaml")
        acme["spec"]["keySize"] = 1024
        acme["spec"]["podTemplate"]["metadata"]["annotations"] = {"big": "x" * CEL_THREAD_THRESHOLD_BYTES}
        r = await self.client.post(ISSUERS, acme)
        self.assertEqual(r.code, 422)
        self.assertIn("ECDSA keys must be 256, 384 or 521 bits, not 1024", r.body["message"])
        acme["spec"]["keySize"] = 384
        self.assertEqual((await self.client.post(ISSUERS, acme)).code, 201)

    @run
    async def test_unknown_fields_pruned_warned_or_rejected(self):
        body = load("issuer-ca.yaml")
        body["spec"]["color"] = "blue"
        body["extra"] = 1
        r = await self.client.post(ISSUERS, body)
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("color", r.body["spec"])
        self.assertNotIn("extra", r.body)
        warnings = r.headers.getRawHeaders("warning")
        self.assertEqual(sorted(warnings), ['299 - "unknown field \\"extra\\""',
                                            '299 - "unknown field \\"spec.color\\""'])
        body["metadata"]["name"] = "strict"
        r = await self.client.post(ISSUERS + "?fieldValidation=Strict", body)
        self.assertEqual(r.code, 400)
        self.assertIn('strict decoding error: unknown field "spec.color"', r.body["message"])
        body["metadata"]["name"] = "ignored"
        r = await self.client.post(ISSUERS + "?fieldValidation=Ignore", body)
        self.assertEqual(r.code, 201)
        self.assertIsNone(r.headers.getRawHeaders("warning"))
        # preserve-unknown-fields subtrees keep everything
        acme = load("issuer-acme.yaml")
        acme["spec"]["podTemplate"]["spec"]["anything"] = True
        r = await self.client.post(ISSUERS, acme)
        self.assertEqual(r.code, 201, r.body)
        self.assertTrue(r.body["spec"]["podTemplate"]["spec"]["anything"])

    @run
    async def test_status_subresource_and_generation(self):
        created = (await self.post_issuer()).body
        status = {"readyReplicas": 2, "conditions": [{"type": "Ready", "status": "True"}]}
        r = await self.client.patch(ISSUERS + "/internal-ca/status", {"status": status, "spec": {"replicas": 9}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["status"]["readyReplicas"], 2)
        self.assertEqual(r.body["spec"]["replicas"], 2)  # /status ignores spec
        self.assertEqual(r.body["metadata"]["generation"], 1)
        r = await self.client.patch(ISSUERS + "/internal-ca", {"status": {"readyReplicas": 7}, "metadata": {
            "labels": {"a": "b"}}})
        self.assertEqual(r.body["status"]["readyReplicas"], 2)  # the main resource ignores status
        self.assertEqual(r.body["metadata"]["generation"], 1)
        r = await self.client.patch(ISSUERS + "/internal-ca", {"spec": {"replicas": 3}})
        self.assertEqual(r.body["metadata"]["generation"], 2)
        self.assertNotEqual(r.body["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"])

    @run
    async def test_patch_types_and_delete_returns_object(self):
        await self.post_issuer()
        r = await self.client.patch(ISSUERS + "/internal-ca", [{"op": "replace", "path": "/spec/replicas",
                                                                 "value": 4}],
                                    content_type="application/json-patch+json")
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 4))
        r = await self.client.patch(ISSUERS + "/internal-ca", {"spec": {"replicas": 5}},
                                    content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 415)
        self.assertEqual(r.body["reason"], "UnsupportedMediaType")
        r = await self.client.delete(ISSUERS + "/internal-ca")
        self.assertEqual((r.code, r.body["kind"], r.body["metadata"]["name"]), (200, "Issuer", "internal-ca"))
        self.assertEqual((await self.client.get(ISSUERS + "/internal-ca")).code, 404)

    @run
    async def test_list_field_selectors_and_deletecollection(self):
        await self.post_issuer()
        await self.post_issuer("issuer-acme.yaml")
        r = await self.client.get(ISSUERS + "?fieldSelector=spec.type%3DCA")
        self.assertEqual([i["metadata"]["name"] for i in r.body["items"]], ["internal-ca"])
        self.assertEqual(r.body["kind"], "IssuerList")
        # unstructured upstream: a custom resource's list items keep their kind and apiVersion
        self.assertEqual([(i["kind"], i["apiVersion"]) for i in r.body["items"]],
                         [("Issuer", "certs.example.com/v1")])
        r = await self.client.get(ISSUERS + "?fieldSelector=spec.port%3D1")
        self.assertEqual(r.code, 400)
        self.assertEqual(r.body["message"], "field label not supported: spec.port")
        r = await self.client.delete(ISSUERS)
        self.assertEqual(r.code, 200)
        self.assertEqual(len(r.body["items"]), 2)
        self.assertEqual((await self.client.get(ISSUERS)).body["items"], [])

    @run
    async def test_table_has_printer_columns(self):
        await self.post_issuer()
        r = await self.client.get(ISSUERS, headers={"Accept": TABLE})
        self.assertEqual(r.code, 200, r.body)
        cols = [(c["name"], c["type"], c["priority"]) for c in r.body["columnDefinitions"]]
        self.assertEqual(cols, [("Name", "string", 0), ("Type", "string", 0), ("Ready", "string", 0),
                                ("Replicas", "integer", 1), ("Age", "date", 0)])
        cells = r.body["rows"][0]["cells"]
        self.assertEqual(cells[:4], ["internal-ca", "CA", None, 2])
        r = await self.client.get(ISSUERS_V1ALPHA1, headers={"Accept": TABLE})
        self.assertEqual([c["name"] for c in r.body["columnDefinitions"]], ["Name", "Age"])

    @run
    async def test_scale_subresource(self):
        await self.post_issuer()
        r = await self.client.get(ISSUERS + "/internal-ca/scale")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((r.body["kind"], r.body["apiVersion"]), ("Scale", "autoscaling/v1"))
        self.assertEqual((r.body["spec"], r.body["status"]), ({"replicas": 2}, {"replicas": 0}))
        await self.client.patch(ISSUERS + "/internal-ca/status",
                                {"status": {"readyReplicas": 2, "selector": "app=ca"}})
        r = await self.client.patch(ISSUERS + "/internal-ca/scale", {"spec": {"replicas": 5}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["status"], {"replicas": 2, "selector": "app=ca"})
        got = (await self.client.get(ISSUERS + "/internal-ca")).body
        self.assertEqual((got["spec"]["replicas"], got["metadata"]["generation"]), (5, 2))
        scale = r.body
        scale["spec"]["replicas"] = -1
        r = await self.client.put(ISSUERS + "/internal-ca/scale", scale)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"], 'Scale.autoscaling "internal-ca" is invalid: spec.replicas: '
                                            'Invalid value: -1: must be greater than or equal to 0')
        scale["spec"]["replicas"] = 3
        scale["metadata"]["resourceVersion"] = "1"
        r = await self.client.put(ISSUERS + "/internal-ca/scale", scale)
        self.assertEqual(r.code, 409)
        # the schema still applies to the result (maximum 10)
        r = await self.client.patch(ISSUERS + "/internal-ca/scale", {"spec": {"replicas": 11}})
        self.assertEqual(r.code, 422)

    @run
    async def test_deprecated_version_warns_and_converts_api_version(self):
        await self.post_issuer()
        r = await self.client.get(ISSUERS_V1ALPHA1 + "/internal-ca")
        self.assertEqual(r.code, 200)
        self.assertEqual(r.body["apiVersion"], "certs.example.com/v1alpha1")
        self.assertEqual(r.header("warning"), '299 - "certs.example.com/v1alpha1 Issuer is deprecated; use '
                                              'certs.example.com/v1 Issuer"')
        body = {"apiVersion": "certs.example.com/v1alpha1", "kind": "Issuer", "metadata": {"name": "old"},
                "spec": {"type": "SelfSigned", "anything": 1}}
        r = await self.client.post(ISSUERS_V1ALPHA1, body)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["apiVersion"], "certs.example.com/v1alpha1")
        got = await self.client.get(ISSUERS + "/old")
        self.assertEqual(got.body["apiVersion"], "certs.example.com/v1")
        self.assertIsNone(got.header("warning"))

    @run
    async def test_watch_sees_custom_resources(self):
        rv = (await self.client.get(ISSUERS)).body["metadata"]["resourceVersion"]
        d = treq.get(self.server.url + ISSUERS + f"?watch=true&resourceVersion={rv}&timeoutSeconds=1",
                     unbuffered=True, persistent=False)
        await sleep(0.1)
        await self.post_issuer()
        response = await d
        events = [json.loads(line) for line in (await treq.content(response)).splitlines() if line]
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "internal-ca")])
        self.assertEqual(events[0]["object"]["spec"]["keySize"], 2048)


    @run
    async def test_watches_end_when_the_crd_stops_being_served_as_it_was(self):
        # as upstream tears a custom resource's storage down: clients see the stream end and
        # watch again (or learn the resource is gone).  The watches ask for an hour: only the
        # change of the CRD ends them before the guard against a hang gives up.
        def watch() -> defer.Deferred:
            return treq.get(self.server.url + ISSUERS + "?watch=true&timeoutSeconds=3600", unbuffered=True,
                            persistent=False)

        async def ended(stream: defer.Deferred) -> None:
            await treq.content(await stream).addTimeout(HANG_GUARD, reactor)

        stream = watch()
        await sleep(0.2)
        crd = (await self.client.get(ISSUER_CRD)).body
        crd["spec"]["versions"][-1]["additionalPrinterColumns"].append(
            {"name": "Size", "type": "integer", "jsonPath": ".spec.keySize"})
        self.assertEqual((await self.client.put(ISSUER_CRD, crd)).code, 200)
        await ended(stream)

        stream = watch()
        await sleep(0.2)
        await self.client.delete(ISSUER_CRD)
        await ended(stream)
        self.assertEqual((await self.client.get(ISSUERS)).code, 404)


class VersionsAndScopeTests(CRDTestCase):
    @run
    async def test_cluster_scoped_crd(self):
        await self.create_crd(simple_crd(plural="clusterwidgets", kind="ClusterWidget", scope="Cluster"))
        path = "/apis/example.com/v1/clusterwidgets"
        r = await self.client.post(path, {"apiVersion": "example.com/v1", "kind": "ClusterWidget",
                                          "metadata": {"name": "a"}, "spec": {"size": 1}})
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("namespace", r.body["metadata"])
        self.assertEqual((await self.client.get(path + "/a")).code, 200)
        self.assertEqual((await self.client.get("/apis/example.com/v1/namespaces/default/clusterwidgets")).code,
                         404)

    @run
    async def test_without_status_subresource_status_changes_bump_generation(self):
        await self.create_crd(simple_crd())
        path = "/apis/example.com/v1/namespaces/default/widgets"
        r = await self.client.post(path, {"apiVersion": "example.com/v1", "kind": "Widget",
                                          "metadata": {"name": "w"}, "status": {"phase": "x"}})
        self.assertEqual(r.body["status"], {"phase": "x"})
        r = await self.client.patch(path + "/w", {"status": {"phase": "y"}})
        self.assertEqual((r.body["status"], r.body["metadata"]["generation"]), ({"phase": "y"}, 2))
        self.assertEqual((await self.client.get(path + "/w/status")).code, 404)

    @run
    async def test_defaults_added_later_apply_on_read(self):
        crd = await self.create_crd(simple_crd())
        path = "/apis/example.com/v1/namespaces/default/widgets"
        await self.client.post(path, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                                      "spec": {}})
        props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        props["size"]["default"] = 3
        self.assertEqual((await self.client.put(CRDS + "/widgets.example.com", crd)).code, 200)

        async def defaulted():
            return (await self.client.get(path + "/w")).body["spec"].get("size") == 3
        await self.wait_for(defaulted)

    @run
    async def test_webhook_conversion_is_accepted_and_an_unreachable_webhook_fails_clearly(self):
        crd = simple_crd()
        v2 = dict(copy.deepcopy(crd["spec"]["versions"][0]), name="v2", storage=False)
        crd["spec"]["versions"].append(v2)
        crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://127.0.0.1:1/convert"}}}
        await self.create_crd(crd)
        r = await self.client.post("/apis/example.com/v1/namespaces/default/widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
        self.assertEqual(r.code, 201)
        r = await self.client.get("/apis/example.com/v2/namespaces/default/widgets/w")
        self.assertEqual(r.code, 500)
        self.assertIn("conversion webhook for example.com/v1, Kind=Widget failed", r.body["message"])
        self.assertIn("connection refused", r.body["message"])


class StartupSyncTests(unittest.TestCase):
    @run
    async def test_unknown_groups_are_503_and_readyz_fails_until_stored_crds_are_installed(self):
        from kapiserver.app.apiserver import APIServer
        from kapiserver.machinery.metrics import Metrics
        from kapiserver.server.healthz import HealthChecks
        from kapiserver.testing.apiserver import test_config
        first = await start_api_server()
        try:
            client = JSONClient(first.url)
            r = await client.post(CRDS, load("issuer-crd.yaml"))
            self.assertEqual(r.code, 201)
            await sleep(0.3)
            gate = defer.Deferred()
            api = APIServer(test_config(), first.storage, b"ca", HealthChecks(), Metrics(), reactor)
            original = api.apiextensions.initial_install

            async def gated():
                await gate
                await original()
            api.apiextensions.initial_install = gated
            port = reactor.listenTCP(0, api.site, interface="127.0.0.1")
            starting = defer.Deferred.fromCoroutine(api.start())
            second = JSONClient(f"http://127.0.0.1:{port.getHost().port}")
            try:
                r = await second.get(ISSUERS)
                self.assertEqual(r.code, 503)
                self.assertEqual(r.body["reason"], "ServiceUnavailable")
                ready = await second.request("GET", "/readyz?verbose")
                self.assertEqual(ready.code, 500)
                self.assertIn(b"[-]poststarthook/crd-informer-synced failed", ready.raw)
                gate.callback(None)
                await starting
                self.assertEqual((await second.get(ISSUERS)).code, 200)
                self.assertEqual((await second.get("/apis/nothing.example.com/v1/things")).code, 404)
                self.assertEqual((await second.request("GET", "/readyz")).code, 200)
            finally:
                if not gate.called:
                    gate.callback(None)
                    await starting
                await api.stop()
                await port.stopListening()
        finally:
            await first.stop()
