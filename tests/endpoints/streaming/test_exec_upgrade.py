"""``pods/exec`` over SPDY through an in-process kapiserver serving TLS, to a stand-in kubelet on a
loopback TLS port (upstream's ``ExecLocation`` and ``UpgradeAwareHandler``): a raw client with the
admin certificate upgrades; the kubelet gets its path and query by its own names, with this server's
kubelet-client certificate and none of the client's credentials; its ``101`` comes back and bytes
flow both ways; a refusal reaches the client as the kubelet wrote it; a kubelet that is not there
is upstream's ``error dialing backend``."""
from __future__ import annotations

import json

from twisted.internet import endpoints, reactor, ssl

from kapiserver.server.certs import KUBELET_CLIENT_USER, serving_context_factory
from kapiserver.server.tls_transport import ServingTLSFactory
from kapiserver.testing.cases import ServerTestCase, run
from kapiserver.testing.client import JSONClient
from tests.endpoints.streaming.standin import NS, Reader, StandInKubelet, add_node_and_pod, certificates

ADMIN_TOKEN = "admin-token-for-setup"
EXEC = NS + "/pods/p/exec?command=x&stdout=true"


class TokenClient(JSONClient):
    """The JSON client with a bearer token (this server takes no anonymous requests)."""

    async def request(self, method, path, body=None, content_type="application/json", headers=None, raw=None):
        return await super().request(method, path, body, content_type,
                                     {"Authorization": f"Bearer {ADMIN_TOKEN}", **(headers or {})}, raw)


def upgrade_request(path: str, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: kapiserver\r\nAuthorization: Bearer not-for-the-kubelet\r\n"
            f"Impersonate-User: kapiserver-admin\r\nImpersonate-Group: system:masters\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
            f"X-Stream-Protocol-Version: v4.channel.k8s.io\r\nX-Stream-Protocol-Version: channel.k8s.io\r\n"
            f"Content-Length: 0\r\n{extra}\r\n").encode()


class ExecUpgradeTests(ServerTestCase):
    async def _start(self) -> None:
        bundle = certificates()
        tokens = self.mktemp()  # under the test's own _trial_temp directory
        with open(tokens, "w") as f:
            f.write(f'{ADMIN_TOKEN},setup-admin,1,"system:masters"\n')
        # RBAC, no anonymous requests: what the client may do comes from its certificate
        self.settings = {"cert_dir": bundle.cert_dir, "token_auth_file": tokens, "authorization_modes": ["RBAC"],
                         "anonymous": False}
        await super()._start()
        self.client = TokenClient(self.server.url)
        api = self.server.api
        tls = ServingTLSFactory(serving_context_factory(bundle, api.authentication.handshake_client_cas or None),
                                False, api.site)
        self.tls_port = reactor.listenTCP(0, tls, interface="127.0.0.1")
        self.addCleanup(self.tls_port.stopListening)
        self.kubelet = StandInKubelet()
        self.addCleanup(self.kubelet.stop)
        await add_node_and_pod(self.client, self.kubelet.listen())

    async def connect(self) -> Reader:
        """A raw TLS connection to the server with the admin certificate."""
        bundle = certificates()
        options = ssl.optionsForClientTLS(
            "localhost", trustRoot=ssl.Certificate.loadPEM(bundle.ca_cert_pem),
            clientCertificate=ssl.PrivateCertificate.loadPEM(bundle.admin_cert_pem + bundle.admin_key_pem))
        endpoint = endpoints.wrapClientTLS(options, endpoints.TCP4ClientEndpoint(
            reactor, "127.0.0.1", self.tls_port.getHost().port))
        reader = Reader()
        await endpoints.connectProtocol(endpoint, reader)
        self.addCleanup(lambda: reader.transport.abortConnection() if reader.transport.connected else None)
        return reader

    @run
    async def test_an_exec_upgrade_reaches_the_kubelet_and_bytes_flow_both_ways(self):
        arrival = self.kubelet.next_request()
        client = await self.connect()
        client.transport.write(upgrade_request(EXEC))
        seen = await arrival
        self.assertEqual((seen.method, seen.uri), (b"POST", b"/exec/default/p/c?command=x&output=1"))
        self.assertEqual(seen.client_certificate_cn, KUBELET_CLIENT_USER)  # this server's kubelet credentials
        self.assertIsNone(seen.header(b"authorization"))  # never the client's
        self.assertEqual([name for name in seen.headers if name.startswith(b"impersonate-")], [])
        self.assertEqual((seen.header(b"connection"), seen.header(b"upgrade")), (b"Upgrade", b"SPDY/3.1"))
        self.assertEqual(seen.headers[b"x-stream-protocol-version"], [b"v4.channel.k8s.io", b"channel.k8s.io"])
        self.assertEqual(seen.header(b"x-forwarded-for"), b"127.0.0.1")  # upstream's AppendForwardedForHeader
        head = await client.wait_for(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"), head)
        self.assertIn(b"\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n", head)
        head = head[:head.index(b"\r\n\r\n") + 4]
        client.transport.write(b"frames from the client")
        self.assertEqual(await client.wait_for(b"FRAMES FROM THE CLIENT"), head + b"FRAMES FROM THE CLIENT")
        [echo] = self.kubelet.streams
        self.assertEqual(echo.received, b"frames from the client")
        client.transport.write(b" and more")
        await client.wait_for(b" AND MORE")
        client.transport.loseConnection()  # the client's end closes the kubelet's
        await echo.lost

    @run
    async def test_a_kubelet_refusal_reaches_the_client_as_written(self):
        self.kubelet.refusal = (400, b"text/plain; charset=utf-8", b"container c is not running")
        client = await self.connect()
        client.transport.write(upgrade_request(EXEC))
        answer = await client.wait_for(b"container c is not running")
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer)
        self.assertTrue(answer.endswith(b"\r\n\r\ncontainer c is not running"), answer)
        self.assertIn(b"\r\nContent-Type: text/plain; charset=utf-8\r\n", answer)

    @run
    async def test_a_kubelet_that_is_not_there_is_upstreams_dial_error(self):
        await self.kubelet.stop()
        client = await self.connect()
        client.transport.write(upgrade_request(EXEC))
        answer = await client.wait_for(b"}")
        self.assertTrue(answer.startswith(b"HTTP/1.1 500 Internal Server Error\r\n"), answer)
        status = json.loads(answer[answer.index(b"\r\n\r\n") + 4:])
        port = self.kubelet.port_number
        self.assertEqual(status, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                  "message": f"error dialing backend: dial tcp 127.0.0.1:{port}: connect: "
                                             f"connection refused", "code": 500})

    @run
    async def test_an_exec_without_an_upgrade_and_an_unauthenticated_one_never_reach_the_kubelet(self):
        client = await self.connect()
        client.transport.write(f"POST {EXEC} HTTP/1.1\r\nHost: kapiserver\r\nContent-Length: 0\r\n\r\n".encode())
        answer = await client.wait_for(b"}")
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer)
        self.assertIn(b'"message":"Upgrade request required"', answer)
        anonymous = Reader()
        await endpoints.connectProtocol(endpoints.TCP4ClientEndpoint(
            reactor, "127.0.0.1", int(self.server.url.rsplit(":", 1)[1])), anonymous)
        anonymous.transport.write(upgrade_request(EXEC).replace(b"not-for-the-kubelet", b"unknown"))
        answer = await anonymous.wait_for(b"}")
        self.assertTrue(answer.startswith(b"HTTP/1.1 401 Unauthorized\r\n"), answer)
        anonymous.transport.abortConnection()
        self.assertEqual(self.kubelet.seen, [])
