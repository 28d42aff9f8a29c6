"""What kube-apiserver itself keeps in the cluster, kept by kapiserver whatever runs the controllers:
the built-in PriorityClasses, the legacy token tracking ConfigMap, the identity Lease; and the
switch that leaves kube-controller-manager's controllers to a real kube-controller-manager."""
from __future__ import annotations

import datetime
import socket

from twisted.trial import unittest

from kapiserver.controllers.apiserver_identity import apiserver_id
from kapiserver.controllers.legacy_token_tracking import is_date
from kapiserver.machinery import meta
from kapiserver.server.controller_names import ControllerSelection, check_selection
from kapiserver.testing.cases import ServerTestCase, run, sleep

TRACKING = "/api/v1/namespaces/kube-system/configmaps/kube-apiserver-legacy-service-account-token-tracking"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


class APIServerObjectsTests(ServerTestCase):
    def setUp(self):
        self.started = datetime.datetime.now(datetime.timezone.utc)  # before this test's server starts
        return super().setUp()

    @run
    async def test_system_priority_classes(self):
        r = await self.client.get("/apis/scheduling.k8s.io/v1/priorityclasses")
        got = {i["metadata"]["name"]: (i["value"], i.get("globalDefault", False), i["preemptionPolicy"])
               for i in r.body["items"]}
        self.assertEqual(got, {"system-node-critical": (2000001000, False, "PreemptLowerPriority"),
                               "system-cluster-critical": (2000000000, False, "PreemptLowerPriority")})
        health = await self.client.get("/readyz?verbose")
        self.assertIn(b"[+]poststarthook/scheduling/bootstrap-system-priority-classes ok", health.raw)

    @run
    async def test_legacy_token_tracking_configmap_is_kept(self):
        async def since():
            r = await self.client.get(TRACKING)
            return r.body["data"]["since"] if r.code == 200 else None
        today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        self.assertIn(await self.wait_for(since), (today, (datetime.datetime.now(datetime.timezone.utc)
                                                           - datetime.timedelta(days=1)).strftime("%Y-%m-%d")))
        # a value that is not a date is put right
        r = await self.client.patch(TRACKING, {"data": {"since": "yesterday"}})
        self.assertEqual(r.code, 200)

        async def repaired():
            return is_date((await self.client.get(TRACKING)).body["data"]["since"])
        await self.wait_for(repaired)

    @run
    async def test_identity_lease(self):
        name = apiserver_id(socket.gethostname())

        async def leases():  # written just after the server started
            r = await self.client.get(f"{LEASES}?labelSelector=apiserver.kubernetes.io/identity%3Dkube-apiserver")
            return r.body["items"]
        items = await self.wait_for(leases)
        self.assertEqual([i["metadata"]["name"] for i in items], [name])
        lease = items[0]
        self.assertEqual(lease["metadata"]["labels"], {"apiserver.kubernetes.io/identity": "kube-apiserver",
                                                       "kubernetes.io/hostname": socket.gethostname()})
        self.assertTrue(lease["spec"]["holderIdentity"].startswith(name + "_"))
        self.assertEqual(lease["spec"]["leaseDurationSeconds"], 3600)
        # written by this server (since it started), in UTC, with microseconds
        renewed = meta.parse_rfc3339(lease["spec"]["renewTime"])
        self.assertTrue(self.started <= renewed <= datetime.datetime.now(datetime.timezone.utc),
                        (self.started, lease["spec"]["renewTime"]))

    @run
    async def test_expired_identity_leases_are_collected(self):
        stale = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "apiserver-gone", "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
                 "spec": {"holderIdentity": "apiserver-gone_x", "leaseDurationSeconds": 3600,
                          "renewTime": "2020-01-01T00:00:00.000000Z"}}
        other = dict(stale, metadata={"name": "kcm-lease", "labels": {
            "apiserver.kubernetes.io/identity": "kube-controller-manager"}})
        for lease in (stale, other):
            self.assertEqual((await self.client.post(LEASES, lease)).code, 201)

        async def ours():
            return (await self.client.get(f"{LEASES}/{apiserver_id(socket.gethostname())}")).code == 200
        await self.wait_for(ours)
        deleted = await self.server.api.controllers.identity.collect()
        self.assertEqual(deleted, ["apiserver-gone"])
        self.assertEqual((await self.client.get(f"{LEASES}/kcm-lease")).code, 200)
        self.assertEqual((await self.client.get(f"{LEASES}/{apiserver_id(socket.gethostname())}")).code, 200)

    @run
    async def test_creating_in_a_terminating_namespace_names_the_cause(self):
        await self.client.post("/api/v1/namespaces", {"metadata": {"name": "going"}})
        # a finalizer keeps the namespace terminating
        await self.client.post("/api/v1/namespaces/going/configmaps",
                               {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}})
        await self.client.delete("/api/v1/namespaces/going")
        r = await self.client.post("/api/v1/namespaces/going/configmaps", {"metadata": {"name": "new"}})
        self.assertEqual(r.code, 403)
        self.assertEqual(r.body["details"]["causes"], [{
            "reason": "NamespaceTerminating", "message": "namespace going is being terminated",
            "field": "metadata.namespace"}])
        await self.client.patch("/api/v1/namespaces/going/configmaps/held", {"metadata": {"finalizers": None}})


class ControllersDisabledTests(ServerTestCase):
    settings = {"controllers_enabled": False}

    @run
    async def test_kube_controller_managers_work_is_left_to_it(self):
        r = await self.client.post("/api/v1/namespaces", {"metadata": {"name": "fresh"}})
        self.assertEqual(r.code, 201)
        await sleep(1.0)
        sas = await self.client.get("/api/v1/namespaces/fresh/serviceaccounts")
        cms = await self.client.get("/api/v1/namespaces/fresh/configmaps")
        self.assertEqual((sas.body["items"], cms.body["items"]), ([], []))
        # the API server's own objects are still there
        r = await self.client.get("/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical")
        self.assertEqual(r.code, 200)

    @run
    async def test_crds_still_get_established(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "things.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "things", "kind": "Thing"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}
        self.assertEqual((await self.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                                 crd)).code, 201)

        async def established():
            r = await self.client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.example.com")
            return any(c["type"] == "Established" and c["status"] == "True"
                       for c in (r.body.get("status") or {}).get("conditions") or ())
        await self.wait_for(established)


class ControllerSelectionTests(unittest.TestCase):
    def test_star_minus_and_aliases_as_kube_controller_manager_reads_them(self):
        selection = ControllerSelection(True, ["*", "-garbagecollector", "bootstrap-signer-controller"])
        self.assertIn("namespace-controller", selection)
        self.assertNotIn("garbage-collector-controller", selection)
        self.assertIn("bootstrap-signer-controller", selection)
        self.assertNotIn("token-cleaner-controller", selection)  # off by default
        self.assertNotIn("namespace-controller", ControllerSelection(True, ["serviceaccount"]))
        self.assertNotIn("namespace-controller", ControllerSelection(False, ["*"]))
        self.assertNotIn("namespace-controller", ControllerSelection(True, []))

    def test_unknown_names_are_refused(self):
        self.assertIsNone(check_selection(["*", "-namespace", "csrsigning"]))
        self.assertEqual(check_selection(["*", "-namespaces"]), "'-namespaces' is not in the list of known controllers")
