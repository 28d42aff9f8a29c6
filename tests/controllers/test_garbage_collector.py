"""The garbage collector through the real in-process server: what a client sees
after deleting an owner with each propagation policy."""
from __future__ import annotations

import json
from typing import Optional

from twisted.trial import unittest

from kapiserver.testing.cases import ServerTestCase, run, sleep, wait_for
from kapiserver.testing.process import E2E_CONFIG, shared_server

CM = "/api/v1/namespaces/default/configmaps"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
TIMEOUT = 3.0


def ref(owner: dict, block: bool = False) -> dict:
    md = owner["metadata"]
    out = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": md["name"], "uid": md["uid"]}
    if block:
        out["blockOwnerDeletion"] = True
    return out


def crd(plural: str, kind: str, scope: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.gc.example.com"},
            "spec": {"group": "gc.example.com", "scope": scope,
                     "names": {"plural": plural, "kind": kind, "singular": kind.lower()},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


class GarbageCollectorTests(ServerTestCase):
    async def cm(self, name: str, *owners: dict, namespace: str = "default", finalizers=None,
                 data: Optional[dict] = None) -> dict:
        md: dict = {"name": name}
        if owners:
            md["ownerReferences"] = list(owners)
        if finalizers:
            md["finalizers"] = finalizers
        body: dict = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
        if data is not None:
            body["data"] = data
        r = await self.client.post(f"/api/v1/namespaces/{namespace}/configmaps", body)
        self.assertEqual(r.code, 201, r.body)
        return r.body

    async def gone(self, path: str) -> None:
        async def check():
            return (await self.client.get(path)).code == 404
        await self.wait_for(check, TIMEOUT)

    async def exists(self, path: str) -> dict:
        r = await self.client.get(path)
        self.assertEqual(r.code, 200, r.body)
        return r.body

    async def install_crd(self, plural: str, kind: str, scope: str) -> str:
        self.assertEqual((await self.client.post(CRDS, crd(plural, kind, scope))).code, 201)
        base = (f"/apis/gc.example.com/v1/namespaces/default/{plural}" if scope == "Namespaced"
                else f"/apis/gc.example.com/v1/{plural}")

        async def served():
            return (await self.client.get(base)).code == 200
        await self.wait_for(served, TIMEOUT)
        return base

    @run
    async def test_background_cascades_through_a_chain(self):
        a = await self.cm("a")
        b = await self.cm("b", ref(a))
        await self.cm("c", ref(b))
        single = await self.cm("single-dep", ref(a))
        r = await self.client.delete(CM + "/a")
        self.assertEqual(r.code, 200)
        self.assertEqual(r.body["kind"], "Status")  # background: the owner is gone at once
        self.assertEqual((await self.client.get(CM + "/a")).code, 404)
        for name in ("b", "c", single["metadata"]["name"]):
            await self.gone(f"{CM}/{name}")

    @run
    async def test_dependent_with_two_owners_lives_until_both_are_gone(self):
        o1, o2 = await self.cm("o1"), await self.cm("o2")
        await self.cm("shared", ref(o1), ref(o2))
        await self.client.delete(CM + "/o1")

        async def lost_o1():
            body = (await self.client.get(CM + "/shared")).body
            return body if [r["name"] for r in body["metadata"].get("ownerReferences", [])] == ["o2"] else None
        await self.wait_for(lost_o1, TIMEOUT)
        await sleep(0.2)
        await self.exists(CM + "/shared")
        await self.client.delete(CM + "/o2")
        await self.gone(CM + "/shared")

    @run
    async def test_owner_matched_by_uid_not_name(self):
        owner = await self.cm("reborn")
        await self.client.delete(CM + "/reborn")
        await self.cm("reborn")  # same name, new uid
        await self.cm("stale", ref(owner))  # points at the old uid
        await self.cm("never", {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": "no-such-uid"})
        # a cluster-scoped object naming a namespaced owner kind is never collected (upstream)
        r = await self.client.post("/api/v1/namespaces", {"metadata": {"name": "gc-owned", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "nobody", "uid": "no-such-uid"}]}})
        self.assertEqual(r.code, 201, r.body)
        await self.gone(CM + "/stale")
        await self.gone(CM + "/never")
        await self.exists(CM + "/reborn")
        await sleep(0.2)
        self.assertFalse((await self.exists("/api/v1/namespaces/gc-owned"))["metadata"].get("deletionTimestamp"))

    @run
    async def test_policy_finalizers_on_delete(self):
        await self.cm("held", finalizers=["example.com/hold"])
        # (a body's options are the request's: a dry run is asked for there, as clients do)
        r = await self.client.delete(CM + "/held", {"propagationPolicy": "Foreground", "dryRun": ["All"]})
        self.assertEqual(r.body["metadata"]["finalizers"], ["example.com/hold", "foregroundDeletion"])
        self.assertNotIn("deletionTimestamp", (await self.exists(CM + "/held"))["metadata"])
        r = await self.client.delete(CM + "/held")  # background: only its own finalizer holds it
        self.assertEqual(r.body["metadata"]["finalizers"], ["example.com/hold"])
        self.assertNotIn("generation", r.body["metadata"])  # marking bumps only a set one, as upstream
        # a later delete may still switch the policy of an object being deleted
        r = await self.client.delete(CM + "/held", {"propagationPolicy": "Orphan"})
        self.assertEqual(r.body["metadata"]["finalizers"], ["example.com/hold", "orphan"])

        async def orphaned():  # the collector drops "orphan" (no dependents); the own finalizer stays
            return (await self.exists(CM + "/held"))["metadata"]["finalizers"] == ["example.com/hold"]
        await self.wait_for(orphaned, TIMEOUT)

    @run
    async def test_foreground_waits_for_blocking_dependents(self):
        owner = await self.cm("fg")
        await self.cm("blocker", ref(owner, block=True), finalizers=["example.com/hold"])
        await self.cm("plain", ref(owner))
        r = await self.client.delete(CM + "/fg", {"propagationPolicy": "Foreground"})
        self.assertEqual(r.code, 200)
        self.assertEqual(r.body["kind"], "ConfigMap")
        self.assertTrue(r.body["metadata"]["deletionTimestamp"])
        self.assertEqual(r.body["metadata"]["finalizers"], ["foregroundDeletion"])
        await self.gone(CM + "/plain")
        await self.held_until_blocker_released("fg", "blocker")
        await self.gone(CM + "/fg")

    async def held_until_blocker_released(self, owner: str, blocker_name: str) -> None:
        """Wait for the blocking dependent to be deleted in turn, see the owner still held by
        foregroundDeletion meanwhile, then release the dependent's own finalizer."""
        async def blocker_deleting():
            body = (await self.client.get(CM + "/" + blocker_name)).body
            return body if body["metadata"].get("deletionTimestamp") else None
        blocker = await self.wait_for(blocker_deleting, TIMEOUT)
        await sleep(0.2)
        held = await self.exists(CM + "/" + owner)  # still readable while a blocking dependent remains
        self.assertEqual(held["metadata"]["finalizers"], ["foregroundDeletion"])
        blocker["metadata"]["finalizers"] = []
        self.assertEqual((await self.client.put(CM + "/" + blocker_name, blocker)).code, 200)

    @run
    async def test_large_objects_owned_and_deleting_in_the_foreground(self):
        # Objects of many tiny parts (a managedFields entry per data key): the collector reads
        # their metadata without decoding the rest, and still sees every reference, finalizer
        # and deletion.
        data = {f"k{i}": "" for i in range(20_000)}
        owner = await self.cm("big-owner", data=data)
        await self.cm("big-blocker", ref(owner, block=True), finalizers=["example.com/hold"], data=data)
        await self.cm("big-plain", ref(owner), data=data)
        r = await self.client.delete(CM + "/big-owner", {"propagationPolicy": "Foreground"})
        self.assertEqual(r.code, 200)
        await self.gone(CM + "/big-plain")
        await self.held_until_blocker_released("big-owner", "big-blocker")
        await self.gone(CM + "/big-blocker")
        await self.gone(CM + "/big-owner")

    @run
    async def test_orphan_keeps_dependents_without_the_reference(self):
        owner = await self.cm("parent")
        other = await self.cm("other")
        await self.cm("child", ref(owner), ref(other))
        await self.cm("only-child", ref(owner))
        r = await self.client.delete(CM + "/parent", {"propagationPolicy": "Orphan"})
        self.assertEqual(r.code, 200)
        self.assertEqual(r.body["metadata"]["finalizers"], ["orphan"])
        self.assertTrue(r.body["metadata"]["deletionTimestamp"])
        await self.gone(CM + "/parent")
        child = await self.exists(CM + "/child")
        self.assertEqual([x["name"] for x in child["metadata"]["ownerReferences"]], ["other"])
        only = await self.exists(CM + "/only-child")
        self.assertNotIn("ownerReferences", only["metadata"])
        # orphanDependents: true (the older field) orphans too
        owner2 = await self.cm("parent2")
        await self.cm("child2", ref(owner2))
        r = await self.client.delete(CM + "/parent2", {"orphanDependents": True})
        self.assertEqual(r.body["metadata"]["finalizers"], ["orphan"])
        await self.gone(CM + "/parent2")
        self.assertNotIn("ownerReferences", (await self.exists(CM + "/child2"))["metadata"])

    @run
    async def test_custom_resource_owns_a_configmap(self):
        base = await self.install_crd("gadgets", "Gadget", "Namespaced")
        r = await self.client.post(base, {"apiVersion": "gc.example.com/v1", "kind": "Gadget",
                                          "metadata": {"name": "g"}})
        self.assertEqual(r.code, 201, r.body)
        await self.cm("of-gadget", ref(r.body))
        await sleep(0.2)
        await self.exists(CM + "/of-gadget")  # its owner exists: not collected
        self.assertEqual((await self.client.delete(base + "/g")).code, 200)
        await self.gone(CM + "/of-gadget")

    @run
    async def test_cluster_scoped_owner_of_namespaced_dependents(self):
        base = await self.install_crd("realms", "Realm", "Cluster")
        owner = (await self.client.post(base, {"apiVersion": "gc.example.com/v1", "kind": "Realm",
                                               "metadata": {"name": "r"}})).body
        other_ns = "gc-other"
        self.assertEqual((await self.client.post("/api/v1/namespaces", {"metadata": {"name": other_ns}})).code, 201)
        await self.cm("in-default", ref(owner))
        await self.cm("in-other", ref(owner), namespace=other_ns)
        # a namespaced owner counts only in its own namespace: elsewhere it is absent
        local = await self.cm("local-owner")
        await self.cm("cross-ns", ref(local), namespace=other_ns)
        await self.gone(f"/api/v1/namespaces/{other_ns}/configmaps/cross-ns")
        await self.exists(CM + "/local-owner")
        await self.exists(CM + "/in-default")
        r = await self.client.delete(base + "/r", {"propagationPolicy": "Foreground"})
        self.assertEqual(r.body["metadata"]["finalizers"], ["foregroundDeletion"])
        await self.gone(CM + "/in-default")
        await self.gone(f"/api/v1/namespaces/{other_ns}/configmaps/in-other")
        await self.gone(base + "/r")


class KubectlCascadeTests(unittest.TestCase):
    """``kubectl delete --cascade`` against a real server process."""

    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "gc-kubectl"
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def uid(self, name: str) -> str:
        return self.kubectl("-n", self.ns, "get", "cm", name, "-o", "jsonpath={.metadata.uid}").stdout

    def dependent(self, name: str, owner: str) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": name, "namespace": self.ns, "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": owner, "uid": self.uid(owner),
                 "blockOwnerDeletion": True}]}}
        self.kubectl("create", "-f", "-", input=json.dumps(body))

    def names(self) -> set[str]:
        out = self.kubectl("-n", self.ns, "get", "cm", "-o", "name").stdout
        return {line.split("/", 1)[1] for line in out.split()}

    def test_cascade_foreground_orphan_background(self):
        for owner in ("fg", "orphan", "bg"):
            self.kubectl("-n", self.ns, "create", "cm", owner)
            self.dependent(f"{owner}-dep", owner)
        # --cascade=foreground waits (kubectl's default --wait) until the owner is gone
        self.kubectl("-n", self.ns, "delete", "cm", "fg", "--cascade=foreground", timeout=30)
        self.assertNotIn("fg-dep", self.names())
        self.kubectl("-n", self.ns, "delete", "cm", "orphan", "--cascade=orphan", timeout=30)
        self.assertIn("orphan-dep", self.names())
        refs = self.kubectl("-n", self.ns, "get", "cm", "orphan-dep", "-o",
                            "jsonpath={.metadata.ownerReferences}").stdout
        self.assertEqual(refs, "")
        self.kubectl("-n", self.ns, "delete", "cm", "bg")
        wait_for(lambda: "bg-dep" not in self.names(), timeout=10)
