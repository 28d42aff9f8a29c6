"""Pods are deleted gracefully, as upstream's BeforeDelete with the pod strategy's CheckGracefulDelete.

A pod a node runs is only marked (deletionTimestamp, deletionGracePeriodSeconds)
until its kubelet deletes it with a period of 0; a later delete may shorten the
period, never lengthen it; a pod no node runs, or that has ended, goes at once.
Other kinds are deleted at once (or marked for their finalizers).
"""
from __future__ import annotations

import datetime
import time

from kapiserver.testing.cases import ServerTestCase, run

PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def seconds_between(earlier: str, later: str) -> float:
    def parse(value: str) -> datetime.datetime:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return (parse(later) - parse(earlier)).total_seconds()


class GracefulDeletionTests(ServerTestCase):
    @run
    async def test_a_running_pod_is_marked_until_deleted_with_no_grace(self):
        await self.client.post(PODS, pod("p", nodeName="n1", terminationGracePeriodSeconds=45))
        before = int(time.time())
        first = await self.client.delete(f"{PODS}/p")
        after = time.time()
        self.assertEqual(first.code, 200)
        md = first.body["metadata"]
        self.assertEqual(md["deletionGracePeriodSeconds"], 45)  # the pod's own period
        # the deadline is the delete's time plus the period (an ordering of points, in whole seconds)
        deadline = datetime.datetime.fromisoformat(md["deletionTimestamp"].replace("Z", "+00:00")).timestamp()
        self.assertTrue(before + 45 <= deadline <= after + 45, (before, deadline, after))
        still = await self.client.get(f"{PODS}/p")
        self.assertEqual((still.code, still.body["metadata"]["deletionTimestamp"]), (200, md["deletionTimestamp"]))
        # a longer period changes nothing; a shorter one moves the deadline back
        longer = await self.client.delete(f"{PODS}/p?gracePeriodSeconds=100")
        self.assertEqual(longer.body["metadata"]["deletionGracePeriodSeconds"], 45)
        shorter = await self.client.delete(f"{PODS}/p?gracePeriodSeconds=5")
        self.assertEqual(shorter.body["metadata"]["deletionGracePeriodSeconds"], 5)
        self.assertEqual(seconds_between(shorter.body["metadata"]["deletionTimestamp"], md["deletionTimestamp"]), 40)
        # the kubelet's final delete: period 0 with the pod's uid
        final = await self.client.request("DELETE", f"{PODS}/p", {
            "gracePeriodSeconds": 0, "preconditions": {"uid": md["uid"]}})
        self.assertEqual(final.code, 200)
        self.assertEqual(final.body["metadata"]["deletionGracePeriodSeconds"], 0)
        self.assertEqual((await self.client.get(f"{PODS}/p")).code, 404)

    @run
    async def test_pods_no_node_runs_or_that_ended_go_at_once(self):
        await self.client.post(PODS, pod("unscheduled"))
        gone = await self.client.delete(f"{PODS}/unscheduled?gracePeriodSeconds=30")
        self.assertEqual(gone.code, 200)
        self.assertEqual((await self.client.get(f"{PODS}/unscheduled")).code, 404)
        await self.client.post(PODS, pod("done", nodeName="n1"))
        status = await self.client.request("PATCH", f"{PODS}/done/status", {"status": {"phase": "Succeeded"}},
                                           content_type="application/merge-patch+json")
        self.assertEqual(status.code, 200, status.body)
        await self.client.delete(f"{PODS}/done")
        self.assertEqual((await self.client.get(f"{PODS}/done")).code, 404)

    @run
    async def test_other_kinds_are_not_graceful(self):
        await self.client.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "c"}})
        await self.client.delete("/api/v1/namespaces/default/configmaps/c?gracePeriodSeconds=30")
        self.assertEqual((await self.client.get("/api/v1/namespaces/default/configmaps/c")).code, 404)
