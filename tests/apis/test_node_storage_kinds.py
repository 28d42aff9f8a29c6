"""RuntimeClasses, CSINodes, CSIStorageCapacities, VolumeAttachments,
ComponentStatuses and TokenReviews over HTTP on an in-process server:
validation, immutable fields, status, printer columns."""
from __future__ import annotations

from kapiserver.testing.cases import ServerTestCase, run

NODE = "/apis/node.k8s.io/v1"
STORAGE = "/apis/storage.k8s.io/v1"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
MERGE = "application/merge-patch+json"


def causes(reply) -> list[str]:
    return [f"{c.get('field', '')}: {c['message']}" for c in reply.body["details"]["causes"]]


class RuntimeClassTests(ServerTestCase):
    @run
    async def test_handler_is_a_fixed_dns_label(self):
        r = await self.client.post(f"{NODE}/runtimeclasses", {"metadata": {"name": "gvisor"}, "handler": "runsc",
                                                              "overhead": {"podFixed": {"memory": "120Mi"}}})
        self.assertEqual(r.code, 201, r.body)
        bad = await self.client.post(f"{NODE}/runtimeclasses", {"metadata": {"name": "bad"}, "handler": "Run_SC"})
        self.assertEqual(bad.code, 422)
        self.assertEqual(causes(bad)[0].split(":")[0], "handler")
        changed = dict(r.body, handler="runc")
        r = await self.client.put(f"{NODE}/runtimeclasses/gvisor", changed)
        self.assertEqual((r.code, causes(r)), (422, ['handler: Invalid value: "runc": field is immutable']))
        t = await self.client.get(f"{NODE}/runtimeclasses", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]], ["Name", "Handler", "Age"])
        self.assertEqual(t.body["rows"][0]["cells"][:2], ["gvisor", "runsc"])


class CSINodeTests(ServerTestCase):
    @run
    async def test_drivers_are_checked_and_fixed_once_registered(self):
        driver = {"name": "ebs.csi.aws.com", "nodeID": "i-123", "topologyKeys": ["topology.ebs.csi.aws.com/zone"]}
        r = await self.client.post(f"{STORAGE}/csinodes", {"metadata": {"name": "node-1"},
                                                           "spec": {"drivers": [driver]}})
        self.assertEqual(r.code, 201, r.body)
        dup = await self.client.post(f"{STORAGE}/csinodes", {"metadata": {"name": "node-2"}, "spec": {
            "drivers": [driver, dict(driver, nodeID="")]}})
        self.assertEqual(dup.code, 422)
        self.assertEqual(sorted(c.split(":")[0] for c in causes(dup)),
                         ["spec.drivers[1].name", "spec.drivers[1].nodeID"])
        changed = dict(r.body, spec={"drivers": [dict(driver, nodeID="i-456")]})
        self.assertEqual((await self.client.put(f"{STORAGE}/csinodes/node-1", changed)).code, 422)
        added = dict(r.body, spec={"drivers": [driver, {"name": "other.example.com", "nodeID": "x"}]})
        self.assertEqual((await self.client.put(f"{STORAGE}/csinodes/node-1", added)).code, 200)
        t = await self.client.get(f"{STORAGE}/csinodes", headers=TABLE)
        self.assertEqual(t.body["rows"][0]["cells"][:2], ["node-1", 2])


class CSIStorageCapacityTests(ServerTestCase):
    @run
    async def test_class_and_topology_are_fixed(self):
        path = f"{STORAGE}/namespaces/default/csistoragecapacities"
        r = await self.client.post(path, {"metadata": {"name": "cap"}, "storageClassName": "fast",
                                          "capacity": "100Gi",
                                          "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "a"}}})
        self.assertEqual(r.code, 201, r.body)
        moved = dict(r.body, storageClassName="slow")
        r2 = await self.client.put(f"{path}/cap", moved)
        self.assertEqual((r2.code, causes(r2)), (422, ['storageClassName: Invalid value: "slow": field is immutable']))
        grown = dict(r.body, capacity="200Gi")
        self.assertEqual((await self.client.put(f"{path}/cap", grown)).code, 200)
        t = await self.client.get(path, headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]], ["Name", "StorageClassName", "Capacity"])
        self.assertEqual(t.body["rows"][0]["cells"], ["cap", "fast", "200Gi"])


class VolumeAttachmentTests(ServerTestCase):
    ATTACHMENT = {"metadata": {"name": "va"}, "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "node-1",
                                                      "source": {"persistentVolumeName": "pv-1"}}}

    @run
    async def test_spec_fixed_status_through_subresource(self):
        r = await self.client.post(f"{STORAGE}/volumeattachments", dict(self.ATTACHMENT, status={"attached": True}))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["status"], {"attached": False})  # status is the attacher's, Go's zero on create
        moved = dict(r.body, spec=dict(r.body["spec"], nodeName="node-2"))
        self.assertEqual((await self.client.put(f"{STORAGE}/volumeattachments/va", moved)).code, 422)
        s = await self.client.patch(f"{STORAGE}/volumeattachments/va/status", {
            "metadata": {"labels": {"dropped": "yes"}},
            "status": {"attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdba"}}}, content_type=MERGE)
        self.assertEqual(s.code, 200, s.body)
        self.assertEqual(s.body["status"]["attached"], True)
        self.assertNotIn("labels", s.body["metadata"])  # upstream's ResetObjectMetaForStatus
        t = await self.client.get(f"{STORAGE}/volumeattachments", headers=TABLE)
        self.assertEqual([c["name"] for c in t.body["columnDefinitions"]],
                         ["Name", "Attacher", "PV", "Node", "Attached", "Age"])
        self.assertEqual(t.body["rows"][0]["cells"][:5], ["va", "ebs.csi.aws.com", "pv-1", "node-1", True])

    @run
    async def test_exactly_one_source(self):
        both = {"metadata": {"name": "va"}, "spec": {"attacher": "a.example.com", "nodeName": "n", "source": {
            "persistentVolumeName": "pv", "inlineVolumeSpec": {"csi": {"driver": "a", "volumeHandle": "h"}}}}}
        r = await self.client.post(f"{STORAGE}/volumeattachments", both)
        self.assertEqual((r.code, causes(r)), (422, ["spec.source: Forbidden: must specify exactly one of "
                                                     "inlineVolumeSpec and persistentVolumeName"]))


class ComponentStatusTests(ServerTestCase):
    async def storage_check(self, healthy: bool) -> None:
        """The in-process server has no health checks: add the storage one the process registers."""
        async def check() -> None:
            await self.server.api.storage.current_revision()
            if not healthy:
                raise RuntimeError("database is locked")
        self.server.api.health.add("sqlite", check)

    @run
    async def test_storage_health_in_upstreams_shape(self):
        await self.storage_check(healthy=True)
        listed = await self.client.get("/api/v1/componentstatuses")
        self.assertEqual(listed.code, 200)
        self.assertIn("ComponentStatus is deprecated", listed.header("warning"))
        self.assertEqual(listed.body["items"], [{"metadata": {"name": "sqlite-0", "creationTimestamp": None},
                                                 "conditions": [{"type": "Healthy", "status": "True",
                                                                 "message": "ok"}]}])
        one = await self.client.get("/api/v1/componentstatuses/sqlite-0")
        self.assertEqual(one.body["conditions"][0]["status"], "True")
        t = await self.client.get("/api/v1/componentstatuses", headers=TABLE)
        self.assertEqual(t.body["rows"][0]["cells"], ["sqlite-0", "Healthy", "ok", ""])
        missing = await self.client.get("/api/v1/componentstatuses/etcd-0")
        self.assertEqual((missing.code, missing.body["message"]), (404, 'componentstatuses "etcd-0" not found'))
        none = await self.client.get("/api/v1/componentstatuses?labelSelector=a%3Db")
        self.assertEqual(none.body["items"], [])
        watch = await self.client.get("/api/v1/componentstatuses?watch=1")
        self.assertEqual((watch.code, watch.body["message"]),
                         (405, 'watch is not supported on resources of kind "componentstatuses"'))

    @run
    async def test_unhealthy_storage(self):
        await self.storage_check(healthy=False)
        t = await self.client.get("/api/v1/componentstatuses", headers=TABLE)
        self.assertEqual(t.body["rows"][0]["cells"], ["sqlite-0", "Unhealthy", "", "database is locked"])


class TokenReviewTests(ServerTestCase):
    @run
    async def test_no_token_authenticates(self):
        path = "/apis/authentication.k8s.io/v1/tokenreviews"
        r = await self.client.post(path, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                          "spec": {"token": "abc"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["status"], {"user": {}, "error": "invalid bearer token"})
        r = await self.client.post(path, {"spec": {}})
        self.assertEqual((r.code, r.body["message"]), (400, "token is required for TokenReview in authentication"))


class UnconditionalUpdateTests(ServerTestCase):
    """Kinds whose upstream strategy refuses AllowUnconditionalUpdate: a PUT without metadata.resourceVersion is
    kube-apiserver v1.32.13's 422, which names the resource where the kind goes."""

    @run
    async def test_put_without_resource_version_is_refused(self):
        kinds = [
            (f"{STORAGE}/csinodes", "csinodes.storage.k8s.io", {"spec": {"drivers": []}}),
            (f"{STORAGE}/csidrivers", "csidrivers.storage.k8s.io", {"spec": {}}),
            (f"{STORAGE}/volumeattachments", "volumeattachments.storage.k8s.io", {"spec": {
                "attacher": "csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv"}}}),
            ("/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities", "csistoragecapacities.storage.k8s.io",
             {"storageClassName": "standard"}),
            (f"{NODE}/runtimeclasses", "runtimeclasses.node.k8s.io", {"handler": "runc"}),
            ("/apis/policy/v1/namespaces/default/poddisruptionbudgets", "poddisruptionbudgets.policy",
             {"spec": {"minAvailable": 1}}),
        ]
        for collection, resource, fields in kinds:
            created = await self.client.post(collection, {"metadata": {"name": "u1"}, **fields})
            self.assertEqual(created.code, 201, created.body)
            replaced = await self.client.put(f"{collection}/u1", {"metadata": {"name": "u1"}, **fields})
            self.assertEqual((replaced.code, replaced.body["reason"], replaced.body["message"]), (
                422, "Invalid", f'{resource} "u1" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be '
                                f'specified for an update'))
            current = created.body["metadata"]["resourceVersion"]
            replaced = await self.client.put(f"{collection}/u1", {"metadata": {"name": "u1",
                                                                               "resourceVersion": current}, **fields})
            self.assertEqual(replaced.code, 200, replaced.body)
