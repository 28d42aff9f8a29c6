"""Service cluster IPs and node ports allocated from the stored RangeAllocation records,
the repair of those records, and the ``kubernetes`` Service (in-process server on SQLite)."""
from __future__ import annotations

import base64

import orjson
from twisted.internet import defer

from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.apis.core.service_allocator import NODE_PORTS_KEY, SERVICE_IPS_KEY
from kapiserver.apis.core.service_ranges import IPRange, PortRange
from kapiserver.testing import TEST_ADVERTISE_ADDRESS
from kapiserver.testing.cases import ServerTestCase, run

NS = "/api/v1/namespaces/default"
IPS, PORTS = IPRange("10.0.0.0/24"), PortRange()


def service(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}}


class AllocationTests(ServerTestCase):
    async def record(self, key: str) -> dict:
        kv = await self.server.storage.get(key)
        self.assertIsNotNone(kv, f"no record at {key}")
        return orjson.loads(kv.value)

    async def taken_ips(self) -> set[str]:
        record = await self.record(SERVICE_IPS_KEY)
        self.assertEqual((record["kind"], record["apiVersion"], record["range"]),
                         ("RangeAllocation", "v1", "10.0.0.0/24"))
        bitmap = AllocationBitmap.from_snapshot(IPS.size, IPS.reserved, base64.b64decode(record["data"]))
        return {IPS.value_at(o) for o in bitmap.offsets()}

    async def taken_ports(self) -> set[int]:
        record = await self.record(NODE_PORTS_KEY)
        self.assertEqual(record["range"], "30000-32767")
        bitmap = AllocationBitmap.from_snapshot(PORTS.size, PORTS.reserved, base64.b64decode(record["data"]))
        return {PORTS.value_at(o) for o in bitmap.offsets()}

    def repair(self):
        return self.server.api.controllers.repair

    @run
    async def test_allocations_are_stored_and_released_on_delete(self) -> None:
        self.assertEqual(await self.taken_ips(), {"10.0.0.1"})  # the kubernetes Service
        a = (await self.client.post(NS + "/services", service("a"))).body
        b = (await self.client.post(NS + "/services", service("b", type="NodePort",
                                                              ports=[{"name": "x", "port": 80},
                                                                     {"name": "y", "port": 81,
                                                                      "nodePort": 30081}]))).body
        ports = [p["nodePort"] for p in b["spec"]["ports"]]
        self.assertEqual(ports[1], 30081)
        # dynamic addresses come from above the static band (upstream's offset strategy)
        for ip in (a["spec"]["clusterIP"], b["spec"]["clusterIP"]):
            self.assertGreaterEqual(IPS.offset_of(ip), IPS.reserved)
        self.assertEqual(await self.taken_ips(), {"10.0.0.1", a["spec"]["clusterIP"], b["spec"]["clusterIP"]})
        self.assertEqual(await self.taken_ports(), set(ports))
        await self.client.delete(NS + "/services/b")
        self.assertEqual(await self.taken_ips(), {"10.0.0.1", a["spec"]["clusterIP"]})
        self.assertEqual(await self.taken_ports(), set())
        r = await self.client.post(NS + "/services", service("c", type="NodePort", clusterIP=b["spec"]["clusterIP"],
                                                             ports=[{"port": 80, "nodePort": 30081}]))
        self.assertEqual(r.code, 201, r.body)

    @run
    async def test_a_failed_create_gives_back_what_it_took(self) -> None:
        await self.client.post(NS + "/services", service("np", type="NodePort", ports=[{"port": 80,
                                                                                       "nodePort": 30080}]))
        before_ips, before_ports = await self.taken_ips(), await self.taken_ports()
        # addresses from the static band: "np" cannot have drawn them at random
        r = await self.client.post(NS + "/services", service("clash", type="NodePort", clusterIP="10.0.0.10",
                                                             ports=[{"name": "a", "port": 81},
                                                                    {"name": "b", "port": 82, "nodePort": 30080}]))
        self.assertEqual((r.code, r.body["reason"]), (422, "Invalid"))
        self.assertEqual(r.body["details"]["causes"], [{
            "reason": "FieldValueInvalid", "field": "spec.ports[1].nodePort",
            "message": "Invalid value: 30080: provided port is already allocated"}])
        self.assertEqual((await self.taken_ips(), await self.taken_ports()), (before_ips, before_ports))
        # an AlreadyExists after allocating gives the values back as well
        r = await self.client.post(NS + "/services", service("np", clusterIP="10.0.0.11"))
        self.assertEqual(r.code, 409)
        self.assertNotIn("10.0.0.11", await self.taken_ips())

    @run
    async def test_updates_take_and_give_back(self) -> None:
        svc = (await self.client.post(NS + "/services", service("web", type="NodePort"))).body
        ip, node_port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]
        svc["spec"]["type"] = "ClusterIP"
        svc["spec"]["ports"][0].pop("nodePort")
        svc["spec"].pop("externalTrafficPolicy")
        r = await self.client.put(NS + "/services/web", svc)
        self.assertEqual(r.code, 200, r.body)
        self.assertNotIn(node_port, await self.taken_ports())
        r = await self.client.patch(NS + "/services/web", {"spec": {"type": "NodePort",
                                                                    "ports": [{"port": 80, "nodePort": 31000}]}})
        self.assertEqual((r.code, r.body["spec"]["ports"][0]["nodePort"]), (200, 31000), r.body)
        self.assertEqual(await self.taken_ports(), {31000})
        current = (await self.client.get(NS + "/services/web")).body
        current["spec"] = {"type": "ExternalName", "externalName": "example.com"}
        r = await self.client.put(NS + "/services/web", current)
        self.assertEqual(r.code, 200, r.body)
        self.assertNotIn("clusterIP", r.body["spec"])
        self.assertNotIn(ip, await self.taken_ips())
        self.assertEqual(await self.taken_ports(), set())
        r = await self.client.patch(NS + "/services/web", {"spec": {"type": "ClusterIP", "externalName": None,
                                                                    "ports": [{"port": 80}]}})
        self.assertEqual(r.code, 200, r.body)
        self.assertIn(r.body["spec"]["clusterIP"], await self.taken_ips())

    @run
    async def test_dry_run_takes_nothing_and_answers_as_upstream(self) -> None:
        await self.client.post(NS + "/services", service("np", type="NodePort", ports=[{"port": 80,
                                                                                       "nodePort": 30080}]))
        before = (await self.taken_ips(), await self.taken_ports())
        # stand-ins for what would be picked, as upstream's dry-run allocators answer
        r = await self.client.post(NS + "/services?dryRun=All", service("dry", type="NodePort", ports=[
            {"name": "a", "port": 80}, {"name": "b", "port": 81}]))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["clusterIP"], [p["nodePort"] for p in r.body["spec"]["ports"]]),
                         ("10.0.0.0", [32769, 32770]))
        # an address asked for is checked against the range only; a node port also against the bitmap
        r = await self.client.post(NS + "/services?dryRun=All", service("dry", clusterIP="10.0.0.1"))
        self.assertEqual((r.code, r.body["spec"]["clusterIP"]), (201, "10.0.0.1"))
        r = await self.client.post(NS + "/services?dryRun=All", service("dry", clusterIP="10.9.0.1"))
        self.assertEqual(r.code, 422)
        r = await self.client.post(NS + "/services?dryRun=All", service("dry", type="NodePort", ports=[
            {"port": 80, "nodePort": 30080}]))
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["details"]["causes"][0]["message"],
                         "Invalid value: 30080: provided port is already allocated")
        self.assertEqual((await self.taken_ips(), await self.taken_ports()), before)

    @run
    async def test_concurrent_creates_get_distinct_addresses(self) -> None:
        replies = await defer.gatherResults([
            self.client.post(NS + "/services", service(f"s{i}", type="NodePort")) for i in range(60)])
        self.assertEqual([r.code for r in replies], [201] * 60)
        ips = {r.body["spec"]["clusterIP"] for r in replies}
        ports = {r.body["spec"]["ports"][0]["nodePort"] for r in replies}
        self.assertEqual((len(ips), len(ports)), (60, 60))
        self.assertEqual(await self.taken_ips(), ips | {"10.0.0.1"})
        self.assertEqual(await self.taken_ports(), ports)

    @run
    async def test_a_full_range_is_an_internal_error(self) -> None:
        allocator = self.repair().ranges[0].stored

        def fill(bitmap: AllocationBitmap):
            while bitmap.allocate_next() is not None:
                pass
            return None, []
        await allocator.change(fill)
        r = await self.client.post(NS + "/services", service("late"))
        self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                         (500, "InternalError", "Internal error occurred: failed to allocate a serviceIP: range is "
                                                "full"))

    @run
    async def test_repair_rebuilds_a_lost_record_and_frees_leaks(self) -> None:
        kept = (await self.client.post(NS + "/services", service("kept", type="NodePort"))).body
        await self.server.storage.delete(SERVICE_IPS_KEY)
        r = await self.client.post(NS + "/services", service("early"))
        self.assertEqual((r.code, r.body["message"]),
                         (500, "Internal error occurred: cannot allocate resources of type serviceipallocations at "
                               "this time"))
        await self.repair().run_once()
        self.assertEqual(await self.taken_ips(), {"10.0.0.1", kept["spec"]["clusterIP"]})
        r = await self.client.post(NS + "/services", service("copy", clusterIP=kept["spec"]["clusterIP"]))
        self.assertEqual(r.code, 422)
        self.assertIn("provided IP is already allocated", r.body["details"]["causes"][0]["message"])
        # a value marked with no Service holding it is freed on the third repair that finds it unowned
        leaked = IPS.offset_of("10.0.0.12")  # the static band: "kept" cannot have drawn it

        def leak(bitmap: AllocationBitmap):
            bitmap.allocate(leaked)
            return None, []
        await self.repair().ranges[0].stored.change(leak)
        for _ in range(2):
            await self.repair().run_once()
            self.assertIn("10.0.0.12", await self.taken_ips())
        await self.repair().run_once()
        self.assertNotIn("10.0.0.12", await self.taken_ips())
        self.assertEqual(await self.taken_ports(), {kept["spec"]["ports"][0]["nodePort"]})

    @run
    async def test_a_value_freed_behind_the_allocators_back_is_given_again(self) -> None:
        """Another server (or a reset of the store) rewrote the record: the copy this server last
        wrote still holds the value, the stored record does not."""
        before = (await self.server.storage.get(SERVICE_IPS_KEY)).value
        r = await self.client.post(NS + "/services", service("first", clusterIP="10.0.0.77"))
        self.assertEqual(r.code, 201)
        await self.server.storage.update(SERVICE_IPS_KEY, before)  # as the other writer did
        r = await self.client.post(NS + "/services", service("second", clusterIP="10.0.0.77"))
        self.assertEqual((r.code, r.body["spec"]["clusterIP"]), (201, "10.0.0.77"))
        self.assertIn("10.0.0.77", await self.taken_ips())

    @run
    async def test_repair_marks_values_services_hold(self) -> None:
        svc = (await self.client.post(NS + "/services", service("held", type="NodePort"))).body
        ip, port = svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["nodePort"]

        def forget(offset: int):
            def change(bitmap: AllocationBitmap):
                bitmap.release(offset)
                return None, []
            return change
        await self.repair().ranges[0].stored.change(forget(IPS.offset_of(ip)))
        await self.repair().ranges[1].stored.change(forget(PORTS.offset_of(port)))
        self.assertNotIn(ip, await self.taken_ips())
        await self.repair().run_once()
        self.assertIn(ip, await self.taken_ips())
        self.assertIn(port, await self.taken_ports())


class KubernetesServiceTests(ServerTestCase):
    @run
    async def test_kubernetes_service_endpoints_and_slice(self) -> None:
        port = self.server.api.secure_port
        svc = (await self.client.get(NS + "/services/kubernetes")).body
        self.assertEqual(svc["metadata"]["labels"], {"component": "apiserver", "provider": "kubernetes"})
        spec = svc["spec"]
        self.assertEqual((spec["type"], spec["clusterIP"], spec["clusterIPs"], spec["ipFamilyPolicy"],
                          spec["ipFamilies"], spec["sessionAffinity"]),
                         ("ClusterIP", "10.0.0.1", ["10.0.0.1"], "SingleStack", ["IPv4"], "None"))
        self.assertEqual(spec["ports"], [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}])
        self.assertNotIn("selector", spec)
        ep = (await self.client.get(NS + "/endpoints/kubernetes")).body
        self.assertEqual(ep["metadata"]["labels"], {"endpointslice.kubernetes.io/skip-mirror": "true"})
        self.assertEqual(ep["subsets"], [{"addresses": [{"ip": TEST_ADVERTISE_ADDRESS}],
                                          "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}])
        slices = (await self.client.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
                                        "?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes")).body["items"]
        self.assertEqual(len(slices), 1)
        es = slices[0]
        self.assertEqual((es["metadata"]["name"], es["addressType"], es["endpoints"], es["ports"]),
                         ("kubernetes", "IPv4",
                          [{"addresses": [TEST_ADVERTISE_ADDRESS], "conditions": {"ready": True}}],
                          [{"name": "https", "port": port, "protocol": "TCP"}]))

    @run
    async def test_deleted_endpoints_come_back(self) -> None:
        await self.client.delete(NS + "/endpoints/kubernetes")
        await self.client.delete("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
        await self.client.delete(NS + "/services/kubernetes")
        await self.server.api.controllers.kubernetes_service.sync()
        for path in ("/services/kubernetes", "/endpoints/kubernetes"):
            self.assertEqual((await self.client.get(NS + path)).code, 200, path)
        es = await self.client.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
        self.assertEqual(es.body["endpoints"][0]["addresses"], [TEST_ADVERTISE_ADDRESS])
        self.assertEqual((await self.client.get(NS + "/services/kubernetes")).body["spec"]["clusterIP"], "10.0.0.1")

    @run
    async def test_servers_on_other_ports_get_their_own_subset_and_slice(self) -> None:
        """Another server on this host with another port (docs/etcd.md's two-server example)."""
        port = self.server.api.secure_port
        other = port + 1 if port < 65535 else port - 1
        controllers = self.server.api.controllers
        leases = controllers.kubernetes_service.reconciler.leases
        await leases.renew(TEST_ADVERTISE_ADDRESS, other)
        await controllers.kubernetes_service.sync()
        ep = (await self.client.get(NS + "/endpoints/kubernetes")).body
        self.assertEqual(sorted(s["ports"][0]["port"] for s in ep["subsets"]), sorted([port, other]))
        slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
        names = sorted(i["metadata"]["name"] for i in (await self.client.get(slices)).body["items"])
        first, second = sorted([port, other])
        self.assertEqual(names, ["kubernetes", f"kubernetes-{second}"])
        extra = (await self.client.get(f"{slices}/kubernetes-{second}")).body
        self.assertEqual(([e["addresses"] for e in extra["endpoints"]], extra["ports"][0]["port"]),
                         ([[TEST_ADVERTISE_ADDRESS]], second))
        # that server goes away: its subset and slice go too
        await leases.remove(TEST_ADVERTISE_ADDRESS, other)
        await controllers.kubernetes_service.sync()
        ep = (await self.client.get(NS + "/endpoints/kubernetes")).body
        self.assertEqual([s["ports"][0]["port"] for s in ep["subsets"]], [port])
        names = [i["metadata"]["name"] for i in (await self.client.get(slices)).body["items"]]
        self.assertEqual(names, ["kubernetes"])

    @run
    async def test_a_stopping_server_leaves_the_endpoints(self) -> None:
        await self.server.api.controllers.kubernetes_service.stop()
        ep = (await self.client.get(NS + "/endpoints/kubernetes")).body
        self.assertEqual(ep.get("subsets") or [], [])
        es = (await self.client.get("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")).body
        self.assertEqual(es.get("endpoints") or [], [])




class LoopbackAdvertiseTests(ServerTestCase):
    """The default single-machine setup: Endpoints may not hold loopback addresses (as upstream),
    so the Service exists and its endpoints stay empty, with one warning instead of a failing sync."""

    settings = {"advertise_address": "127.0.0.1"}

    @run
    async def test_service_without_loopback_endpoints(self) -> None:
        await self.server.api.controllers.kubernetes_service.sync()
        self.assertEqual((await self.client.get(NS + "/services/kubernetes")).code, 200)
        self.assertEqual((await self.client.get(NS + "/endpoints/kubernetes")).code, 404)
