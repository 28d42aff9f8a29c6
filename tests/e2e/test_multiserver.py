"""Two kapiserver processes on one real etcd, as one cluster with one controller manager.

The servers listen on 127.0.0.1 and 127.0.0.2 (one port, as upstream's API
servers share one), share one certificate directory and run leader election
with kube-controller-manager's durations (lease 15 s, renew 10 s, retry 2 s).
What a user must see: Services created at the same time through both get
distinct cluster IPs and node ports (one RangeAllocation record in etcd,
updated by compare-and-swap) that deletes give back; exactly one server runs
the controllers; the ``kubernetes`` Service's endpoints list both servers (by the
documentation addresses they advertise: Endpoints refuse loopback ones); a
CRD created through the follower is served by both; and when the leader is
killed (``kill -9``), the other server takes the Lease over within the lease
duration and garbage collection and namespace deletion go on through it.
"""
from __future__ import annotations

import atexit
import base64
import concurrent.futures
import ipaddress
import json
import re
import shutil
import signal
import tempfile
import urllib.request
import uuid
from datetime import timedelta
from typing import Any, Optional

from twisted.trial import unittest

from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.apis.core.service_ranges import IPRange, PortRange
from kapiserver.machinery import meta
from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.etcd import EtcdServer, free_port, skip_reason
from kapiserver.testing.process import ServerProcess
from tests.e2e.test_etcd_ha import _HTTPS

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kapiserver-controllers"
LEASE_DURATION = 15
SERVICES = 200
IPS, PORTS = IPRange("10.0.0.0/24"), PortRange()


class _Cluster:
    """One etcd and two servers (127.0.0.1 and 127.0.0.2, same port) sharing it and one CA."""

    ADDRESSES = ("127.0.0.1", "127.0.0.2")
    # what each advertises in the kubernetes Endpoints: documentation addresses (RFC 5737), since
    # Endpoints refuse loopback ones as upstream's do
    ADVERTISED = ("192.0.2.1", "192.0.2.2")

    def __init__(self) -> None:
        self.etcd = EtcdServer(["--experimental-watch-progress-notify-interval", "500ms"])
        self.cert_dir = tempfile.mkdtemp(prefix="kapiserver-multi-certs-")
        self.port = free_port()
        self.servers: list[ServerProcess] = []
        atexit.register(self.cleanup)
        self.etcd.start()
        for address, advertised in zip(self.ADDRESSES, self.ADVERTISED):  # one after the other: the first makes the CA
            self.servers.append(ServerProcess({
                "cert_dir": self.cert_dir, "secure_port": self.port, "bind_address": address,
                "advertise_address": advertised,
                "tls": {"extra_sans": list(self.ADDRESSES)},
                "storage": {"backend": "etcd3", "etcd": {"servers": [self.etcd.endpoint]}}}).start())
        self.clients = [_HTTPS(s, self.cert_dir) for s in self.servers]

    def alive(self) -> bool:
        return all(s.proc is not None and s.proc.poll() is None for s in self.servers)

    def cleanup(self) -> None:
        for server in self.servers:
            server.cleanup()
        self.etcd.cleanup()
        shutil.rmtree(self.cert_dir, ignore_errors=True)

    # ------------------------------------------------------------ what a user can look at

    def etcd_value(self, key: str) -> Optional[bytes]:
        body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
        req = urllib.request.Request(f"{self.etcd.endpoint}/v3/kv/range", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            kvs = json.load(resp).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]) if kvs else None

    def taken(self, key: str, size: int, reserved: int) -> list[int]:
        """The offsets marked in a RangeAllocation record, read straight from etcd."""
        value = self.etcd_value(key)
        assert value is not None, f"no {key} in etcd"
        record = json.loads(value)
        return list(AllocationBitmap.from_snapshot(size, reserved, base64.b64decode(record["data"])).offsets())

    @staticmethod
    def metric(client: _HTTPS, name: str, labels: str) -> float:
        status, body = client.request("GET", "/metrics")
        assert status == 200, body
        found = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", body.decode(), re.M)
        return float(found.group(1)) if found else 0.0

    def leading(self) -> list[bool]:
        return [self.metric(c, "leader_election_master_status", 'name="kapiserver-controllers"') == 1.0
                if s.proc is not None and s.proc.poll() is None else False
                for s, c in zip(self.servers, self.clients)]

    def leader(self) -> int:
        """The index of the one server that leads (waits for the election to settle)."""
        states = wait_for(lambda: (lambda s: s if sum(s) == 1 else None)(self.leading()), timeout=30)
        return states.index(True)


_shared: Optional[_Cluster] = None


def shared_cluster() -> _Cluster:
    global _shared
    if _shared is None or not _shared.alive():
        if _shared is not None:
            _shared.cleanup()
        _shared = None
        _shared = _Cluster()
    return _shared


def _owner_and_dependent(client: _HTTPS, ns: str, tag: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    owner = client.json("POST", path, {"metadata": {"name": f"owner-{tag}"}}, expect=201)
    client.json("POST", path, {"metadata": {"name": f"dependent-{tag}", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"]}]}}, expect=201)


class _ClusterTestCase(unittest.TestCase):
    def setUp(self) -> None:
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)

    def namespace(self, client: _HTTPS) -> str:
        ns = "multi-" + uuid.uuid4().hex[:8]
        client.json("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}, expect=201)
        return ns


class MultiServerTests(_ClusterTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.cluster = shared_cluster()
        self.a, self.b = self.cluster.clients

    def test_concurrent_creates_through_both_servers_get_distinct_ips_and_node_ports(self):
        ns = self.namespace(self.a)
        path = f"/api/v1/namespaces/{ns}/services"

        def create(i: int) -> dict:
            client = (self.a, self.b)[i % 2]
            return client.json("POST", path, {"metadata": {"name": f"svc-{i}"}, "spec": {
                "type": "NodePort", "selector": {"app": f"a{i}"}, "ports": [{"port": 80}]}}, expect=201)
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            created = list(pool.map(create, range(SERVICES)))
        ips = [s["spec"]["clusterIP"] for s in created]
        ports = [s["spec"]["ports"][0]["nodePort"] for s in created]
        self.assertEqual((len(set(ips)), len(set(ports))), (SERVICES, SERVICES))
        for ip in ips:
            self.assertIn(ipaddress.ip_address(ip), ipaddress.ip_network("10.0.0.0/24"))
        self.assertNotIn("10.0.0.1", ips)  # the kubernetes Service's
        self.assertTrue(all(30000 <= p <= 32767 for p in ports), ports)
        # the stored bitmaps hold every one of them
        taken_ips = self.cluster.taken("/registry/ranges/serviceips", IPS.size, IPS.reserved)
        taken_ports = self.cluster.taken("/registry/ranges/servicenodeports", PORTS.size, PORTS.reserved)
        self.assertTrue({IPS.offset_of(ip) for ip in ips} <= set(taken_ips))
        self.assertTrue({PORTS.offset_of(p) for p in ports} <= set(taken_ports))
        self.assertIn(IPS.offset_of("10.0.0.1"), taken_ips)

        def delete(i: int) -> None:
            (self.b, self.a)[i % 2].json("DELETE", f"{path}/svc-{i}")
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(delete, range(SERVICES)))
        taken_ips = self.cluster.taken("/registry/ranges/serviceips", IPS.size, IPS.reserved)
        taken_ports = self.cluster.taken("/registry/ranges/servicenodeports", PORTS.size, PORTS.reserved)
        self.assertFalse({IPS.offset_of(ip) for ip in ips} & set(taken_ips))
        self.assertFalse({PORTS.offset_of(p) for p in ports} & set(taken_ports))
        # released values can be asked for again, through either server
        again = self.b.json("POST", path, {"metadata": {"name": "again"}, "spec": {
            "type": "NodePort", "clusterIP": ips[0], "ports": [{"port": 80, "nodePort": ports[1]}]}}, expect=201)
        self.assertEqual((again["spec"]["clusterIP"], again["spec"]["ports"][0]["nodePort"]), (ips[0], ports[1]))
        status, body = self.a.request("POST", path, {"metadata": {"name": "clash"}, "spec": {
            "clusterIP": ips[0], "ports": [{"port": 80}]}})
        self.assertEqual(status, 422, body)
        self.assertIn(f"failed to allocate IP {ips[0]}: provided IP is already allocated", body.decode())

    def test_one_server_runs_the_controllers(self):
        leader = self.cluster.leader()
        follower = 1 - leader
        lead, follow = self.cluster.clients[leader], self.cluster.clients[follower]
        spec = follow.json("GET", LEASE_PATH)["spec"]
        self.assertEqual(spec["leaseDurationSeconds"], LEASE_DURATION)
        with open(self.cluster.servers[leader].log_path, errors="replace") as f:
            self.assertIn(f"as {spec['holderIdentity']}", f.read())
        self.assertRegex(spec["holderIdentity"], r"^.+_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
        queues = ("garbage-collector", "namespace-controller", "namespace-defaults")

        def adds() -> list[dict[str, float]]:
            return [{q: self.cluster.metric(c, "workqueue_adds_total", f'name="{q}"') for q in queues}
                    for c in self.cluster.clients]
        before = adds()
        # work asked for through the follower is done by the leader's controllers
        ns = self.namespace(follow)
        _owner_and_dependent(follow, ns, "x")
        follow.json("DELETE", f"/api/v1/namespaces/{ns}/configmaps/owner-x")
        wait_for(lambda: follow.request("GET", f"/api/v1/namespaces/{ns}/configmaps/dependent-x")[0] == 404,
                 timeout=20)
        wait_for(lambda: follow.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts/default")[0] == 200)
        follow.json("DELETE", f"/api/v1/namespaces/{ns}")
        wait_for(lambda: follow.request("GET", f"/api/v1/namespaces/{ns}")[0] == 404, timeout=20)
        after = adds()
        for queue in queues:
            self.assertGreater(after[leader][queue], before[leader][queue], queue)
            self.assertEqual(after[follower][queue], before[follower][queue], queue)
        self.assertEqual(self.cluster.leading(), [i == leader for i in range(2)])

    def test_kubernetes_endpoints_list_both_servers(self):
        port = self.cluster.port
        expected = [{"addresses": [{"ip": ip} for ip in self.cluster.ADVERTISED],
                     "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]
        for client in (self.a, self.b):
            ep = client.json("GET", "/api/v1/namespaces/default/endpoints/kubernetes")
            self.assertEqual(ep["subsets"], expected)
            es = client.json("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
            self.assertEqual([e["addresses"] for e in es["endpoints"]], [[ip] for ip in self.cluster.ADVERTISED])
            svc = client.json("GET", "/api/v1/namespaces/default/services/kubernetes")
            self.assertEqual((svc["spec"]["clusterIP"], svc["spec"]["ports"][0]["targetPort"]), ("10.0.0.1", port))

    def test_a_crd_created_through_the_follower_is_served_by_both(self):
        follower = 1 - self.cluster.leader()
        follow, lead = self.cluster.clients[follower], self.cluster.clients[1 - follower]
        group = f"g{uuid.uuid4().hex[:6]}.example.com"
        follow.json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}},
            expect=201)
        crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{group}"

        def established() -> Optional[dict]:
            conditions = follow.json("GET", crd_path).get("status", {}).get("conditions") or []
            by_type = {c["type"]: c for c in conditions}
            return by_type if by_type.get("Established", {}).get("status") == "True" else None
        conditions = wait_for(established, timeout=20, interval=0.05)
        # with two servers alive, Established waits five seconds after the names were accepted
        # (upstream's HA hold), and by then both servers serve the new kind
        held = (meta.parse_rfc3339(conditions["Established"]["lastTransitionTime"])
                - meta.parse_rfc3339(conditions["NamesAccepted"]["lastTransitionTime"]))
        self.assertGreaterEqual(held.total_seconds(), 4)
        path = f"/apis/{group}/v1/namespaces/default/widgets"
        for client in (follow, lead):
            self.assertEqual(client.request("GET", path)[0], 200)
        follow.json("POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}},
                    expect=201)
        self.assertEqual(lead.json("GET", f"{path}/w")["metadata"]["name"], "w")


class LeaderFailoverTests(_ClusterTestCase):
    """A cluster of its own: this test kills its leader."""

    def test_after_kill_9_of_the_leader_the_other_server_takes_over(self):
        cluster = _Cluster()
        self.addCleanup(cluster.cleanup)
        leader = cluster.leader()
        survivor = cluster.clients[1 - leader]
        held = survivor.json("GET", LEASE_PATH)["spec"]  # renewed by the leader, at the latest, later
        transitions = held.get("leaseTransitions", 0)
        ns = self.namespace(survivor)
        doomed = self.namespace(survivor)
        survivor.json("POST", f"/api/v1/namespaces/{doomed}/configmaps", {"metadata": {"name": "inside"}},
                      expect=201)
        cluster.servers[leader].stop(sig=signal.SIGKILL)
        # work left for the controllers, asked for through the survivor after the kill
        _owner_and_dependent(survivor, ns, "y")
        survivor.json("DELETE", f"/api/v1/namespaces/{ns}/configmaps/owner-y")
        survivor.json("DELETE", f"/api/v1/namespaces/{doomed}")
        # the Lease passes to the survivor (how soon after the lease duration, the leader election
        # tests step on a fake clock), not before the dead leader's last renewal is a lease
        # duration old, on the servers' own clock
        wait_for(lambda: cluster.leading()[1 - leader], timeout=HANG_GUARD)
        spec = survivor.json("GET", LEASE_PATH)["spec"]
        self.assertEqual(spec["leaseTransitions"], transitions + 1)
        self.assertGreaterEqual(meta.parse_rfc3339(spec["acquireTime"]) - meta.parse_rfc3339(held["renewTime"]),
                                timedelta(seconds=LEASE_DURATION))
        wait_for(lambda: survivor.request("GET", f"/api/v1/namespaces/{ns}/configmaps/dependent-y")[0] == 404,
                 timeout=15)
        wait_for(lambda: survivor.request("GET", f"/api/v1/namespaces/{doomed}")[0] == 404, timeout=15)
        # the dead server's lease record expires: the endpoints name the survivor alone
        alive = cluster.ADVERTISED[1 - leader]
        wait_for(lambda: [a["ip"] for a in survivor.json(
            "GET", "/api/v1/namespaces/default/endpoints/kubernetes")["subsets"][0]["addresses"]] == [alive],
            timeout=30)
        created: Any = survivor.json("POST", f"/api/v1/namespaces/{ns}/services", {
            "metadata": {"name": "after"}, "spec": {"ports": [{"port": 80}]}}, expect=201)
        self.assertIn(ipaddress.ip_address(created["spec"]["clusterIP"]), ipaddress.ip_network("10.0.0.0/24"))
