"""The proxy subresources refuse loopback and other non-global-unicast backends as upstream does,
before anything is dialed: ``nodes/proxy`` (``isProxyableHostname``: every address the node's host
resolves to), ``pods/proxy`` (the pod IP's ``IsGlobalUnicast``), ``services/proxy`` (whose Endpoints
cannot hold such an address).  Logs and exec do not check the kubelet's address (upstream does not),
so the stand-in kubelet on 127.0.0.1 is reached by them and never by a proxy."""
from __future__ import annotations

from kapiserver.testing.cases import ServerTestCase, run
from tests.endpoints.streaming.standin import NS, StandInKubelet, add_node_and_pod


class ProxyRefusalTests(ServerTestCase):
    async def _start(self) -> None:
        await super()._start()
        self.kubelet = StandInKubelet()
        self.port = self.kubelet.listen()
        self.addCleanup(self.kubelet.stop)
        await add_node_and_pod(self.client, self.port)

    async def add_node(self, name: str, address_type: str, address: str) -> None:
        r = await self.client.post("/api/v1/nodes", {"metadata": {"name": name}, "status": {
            "addresses": [{"type": address_type, "address": address}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.port}}}})
        self.assertEqual(r.code, 201, r.body)
        # a Node is created with its status, as a kubelet registers
        self.assertEqual(r.body["status"]["addresses"], [{"type": address_type, "address": address}])

    @run
    async def test_nodes_proxy_refuses_a_node_whose_address_is_not_global_unicast(self):
        for path in ("/api/v1/nodes/n1/proxy/pods", f"/api/v1/nodes/https:n1:{self.port}/proxy/metrics",
                     "/api/v1/nodes/n1:10255/proxy/stats/summary"):
            r = await self.client.get(path)
            self.assertEqual((r.code, r.body["reason"], r.body["message"]), (400, "BadRequest", "address not allowed"))
        await self.add_node("n-any", "InternalIP", "0.0.0.0")  # dialing it would reach this host
        await self.add_node("n-local", "Hostname", "localhost")  # a name: what it resolves to decides
        await self.add_node("n-linklocal", "InternalIP", "169.254.169.254")  # a cloud's metadata service
        for node in ("n-any", "n-local", "n-linklocal"):
            r = await self.client.get(f"/api/v1/nodes/{node}/proxy/configz")
            self.assertEqual((r.code, r.body["message"]), (400, "address not allowed"), node)
        self.assertEqual(self.kubelet.seen, [])
        # the same node's kubelet serves logs: upstream checks the address only for nodes/proxy
        arrival = self.kubelet.next_request()
        answer = self.client.get(NS + "/pods/p/log")
        seen = await arrival
        seen.request.write(b"hello\n")
        seen.request.finish()
        self.assertEqual(((await answer).code, seen.uri), (200, b"/containerLogs/default/p/c"))

    @run
    async def test_pods_proxy_refuses_a_loopback_pod_ip(self):
        pod = (await self.client.get(NS + "/pods/p")).body
        pod["status"] = {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}
        updated = await self.client.put(NS + "/pods/p/status", pod)
        self.assertEqual(updated.code, 200, updated.body)
        for path in ("/pods/p/proxy/", "/pods/p:8080/proxy/healthz", "/pods/http:p:8080/proxy/",
                     "/pods/https:p:443/proxy/"):
            r = await self.client.get(NS + path)
            self.assertEqual((r.code, r.body["reason"], r.body["message"]), (400, "BadRequest", "address not allowed"),
                             path)
        r = await self.client.request("POST", NS + "/pods/p/proxy/submit", raw=b"{}")
        self.assertEqual((r.code, r.body["message"]), (400, "address not allowed"))
        r = await self.client.get(NS + "/pods/ftp:p:21/proxy/")
        self.assertEqual((r.code, r.body["message"]), (400, 'invalid pod request "ftp:p:21"'))
        self.assertEqual(self.kubelet.seen, [])

    @run
    async def test_services_proxy_cannot_be_pointed_at_loopback(self):
        r = await self.client.post(NS + "/services", {"metadata": {"name": "web"}, "spec": {
            "ports": [{"name": "http", "port": 80, "targetPort": self.port}]}})
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.post(NS + "/endpoints", {"metadata": {"name": "web"}, "subsets": [{
            "addresses": [{"ip": "127.0.0.1", "targetRef": {"kind": "Pod", "name": "p", "namespace": "default"}}],
            "ports": [{"name": "http", "port": self.port}]}]})
        self.assertEqual((r.code, r.body["reason"]), (422, "Invalid"))
        self.assertEqual(r.body["message"], 'Endpoints "web" is invalid: subsets[0].addresses[0].ip: Invalid value: '
                                            '"127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)')
        r = await self.client.get(NS + "/services/web/proxy/")
        self.assertEqual((r.code, r.body["message"]), (404, 'endpoints "web" not found'))
        r = await self.client.get(NS + "/services/web:80/proxy/")
        self.assertEqual((r.code, r.body["message"]), (404, 'endpoints "web" not found'))
        r = await self.client.get(NS + "/services/web:81/proxy/")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                         (503, "ServiceUnavailable", 'no service port 81 found for service "web"'))
        self.assertEqual(self.kubelet.seen, [])
