"""DefaultStorageClass, DefaultIngressClass, StorageObjectInUseProtection and
PersistentVolumeClaimResize on an in-process server, with the PVC and PV protection controllers."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.admission.class_defaulting import STORAGE_CLASS_DEFAULT, default_class
from kapiserver.controllers.storage_protection import pod_uses_claim
from kapiserver.testing.cases import ServerTestCase, run, sleep

NS = "/api/v1/namespaces/default"
CLASSES = "/apis/storage.k8s.io/v1/storageclasses"


def storage_class(name: str, default: bool = False, expandable: bool = False) -> dict:
    md: dict = {"name": name}
    if default:
        md["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": md, "provisioner": "example.com/x",
            "allowVolumeExpansion": expandable}


def claim(name: str, size: str = "1Gi", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **spec}}


class PieceTests(unittest.TestCase):
    def test_the_newest_default_class_wins_ties_by_name(self):
        classes = [{"metadata": {"name": n, "creationTimestamp": t, "annotations": {a: "true"}}}
                   for n, t, a in (("old", "2024-01-01T00:00:00Z", STORAGE_CLASS_DEFAULT[0]),
                                   ("b", "2025-01-01T00:00:00Z", STORAGE_CLASS_DEFAULT[1]),
                                   ("a", "2025-01-01T00:00:00Z", STORAGE_CLASS_DEFAULT[0]))]
        classes.append({"metadata": {"name": "newest", "creationTimestamp": "2026-01-01T00:00:00Z"}})
        self.assertEqual(default_class(classes, STORAGE_CLASS_DEFAULT)["metadata"]["name"], "a")
        self.assertIsNone(default_class(classes[3:], STORAGE_CLASS_DEFAULT))

    def test_only_scheduled_pods_hold_a_claim(self):
        pod = {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {
            "claimName": "data"}}]}}
        self.assertFalse(pod_uses_claim(pod, "data"))
        pod["spec"]["nodeName"] = "node-1"
        self.assertTrue(pod_uses_claim(pod, "data"))
        self.assertFalse(pod_uses_claim(pod, "other"))


class StoragePluginTests(ServerTestCase):
    @run
    async def test_claims_get_the_default_class_and_the_protection_finalizer(self):
        r = await self.client.post(f"{NS}/persistentvolumeclaims", claim("before"))
        self.assertEqual(r.code, 201, r.body)
        self.assertNotIn("storageClassName", r.body["spec"])  # no default class yet
        self.assertEqual(r.body["metadata"]["finalizers"], ["kubernetes.io/pvc-protection"])
        self.assertEqual((await self.client.post(CLASSES, storage_class("standard", default=True))).code, 201)
        await sleep(0.1)
        r = await self.client.post(f"{NS}/persistentvolumeclaims", claim("after"))
        self.assertEqual(r.body["spec"]["storageClassName"], "standard")
        r = await self.client.post(f"{NS}/persistentvolumeclaims", claim("explicit", storageClassName=""))
        self.assertEqual(r.body["spec"]["storageClassName"], "")
        r = await self.client.post("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["metadata"]["finalizers"], ["kubernetes.io/pv-protection"])

    @run
    async def test_a_claim_in_use_waits_for_its_pod(self):
        self.assertEqual((await self.client.post(f"{NS}/persistentvolumeclaims", claim("data"))).code, 201)
        r = await self.client.post(f"{NS}/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user"},
                                                  "spec": {"nodeName": "node-1",
                                                           "containers": [{"name": "c", "image": "nginx"}],
                                                           "volumes": [{"name": "v", "persistentVolumeClaim": {
                                                               "claimName": "data"}}]}})
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.delete(f"{NS}/persistentvolumeclaims/data")
        self.assertIn("deletionTimestamp", r.body["metadata"])
        await sleep(0.3)
        self.assertEqual((await self.client.get(f"{NS}/persistentvolumeclaims/data")).code, 200)
        await self.client.delete(f"{NS}/pods/user?gracePeriodSeconds=0")

        async def gone():
            return (await self.client.get(f"{NS}/persistentvolumeclaims/data")).code == 404
        await self.wait_for(gone, timeout=10)
        # an unused claim goes at once (once the controller removed the finalizer)
        self.assertEqual((await self.client.post(f"{NS}/persistentvolumeclaims", claim("free"))).code, 201)
        await self.client.delete(f"{NS}/persistentvolumeclaims/free")

        async def free_gone():
            return (await self.client.get(f"{NS}/persistentvolumeclaims/free")).code == 404
        await self.wait_for(free_gone)

    @run
    async def test_only_bound_claims_of_expandable_classes_grow(self):
        for sc in (storage_class("grows", expandable=True), storage_class("fixed")):
            self.assertEqual((await self.client.post(CLASSES, sc)).code, 201)
        for name, klass in (("a", "grows"), ("b", "fixed")):
            r = await self.client.post(f"{NS}/persistentvolumeclaims", claim(name, storageClassName=klass))
            self.assertEqual(r.code, 201, r.body)
            current = r.body
            current["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}
            r = await self.client.put(f"{NS}/persistentvolumeclaims/{name}/status", current)
            self.assertEqual(r.code, 200, r.body)
        r = await self.client.patch(f"{NS}/persistentvolumeclaims/a",
                                    {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
        self.assertEqual(r.code, 200, r.body)
        r = await self.client.patch(f"{NS}/persistentvolumeclaims/b",
                                    {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
        self.assertEqual(r.code, 403)
        self.assertEqual(r.body["message"], 'persistentvolumeclaims "b" is forbidden: only dynamically provisioned '
                                            'pvc can be resized and the storageclass that provisions the pvc must '
                                            'support resize')

    @run
    async def test_ingresses_get_the_default_class(self):
        r = await self.client.post("/apis/networking.k8s.io/v1/ingressclasses", {
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
            "spec": {"controller": "k8s.io/ingress-nginx"}})
        self.assertEqual(r.code, 201, r.body)
        await sleep(0.1)
        ingresses = "/apis/networking.k8s.io/v1/namespaces/default/ingresses"
        backend = {"service": {"name": "web", "port": {"number": 80}}}
        r = await self.client.post(ingresses, {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                               "metadata": {"name": "plain"}, "spec": {"defaultBackend": backend}})
        self.assertEqual(r.body["spec"]["ingressClassName"], "nginx")
        r = await self.client.post(ingresses, {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                                               "metadata": {"name": "annotated", "annotations": {
                                                   "kubernetes.io/ingress.class": "other"}},
                                               "spec": {"defaultBackend": backend}})
        self.assertNotIn("ingressClassName", r.body["spec"])
