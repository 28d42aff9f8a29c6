"""The proxy subresources through an in-process kapiserver, with upstream's proxy transport: links in
pages and redirects rewritten under the proxy's path, ``X-Forwarded-Uri``, CORS headers dropped,
``.../proxy`` redirected to ``.../proxy/``, an unreachable backend a 503.

The pod (192.0.2.10), its Service's endpoint and the node (192.0.2.20) have global unicast
addresses, as the proxies require; the connector's :class:`Dial` (upstream's egress dialer) leads
those addresses to backends on loopback ports, so nothing leaves the machine and everything else
is the server's own path: routing, admission, the registry's location, the connector."""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.web import resource, server
from twisted.web.client import Agent, HTTPConnectionPool, readBody
from twisted.web.http_headers import Headers

from kapiserver.endpoints.streaming import connector
from kapiserver.testing.cases import ServerTestCase, run
from tests.endpoints.streaming.standin import NS, StandInKubelet

POD_IP = "192.0.2.10"
NODE_IP = "192.0.2.20"
PAGE = (b'<html><body><a href="/rewriteme">test</a> <img SRC=/logo.png>'
        b' <a href="http://192.0.2.10:1080/abs">same host</a> <a href="https://example.com/x">elsewhere</a>'
        b'<script>location = "/not-a-link"</script></body></html>')


def rewritten_page(prefix: str) -> bytes:
    p = prefix.encode()
    return (b'<html><body><a href="' + p + b'/rewriteme">test</a> <img src="' + p + b'/logo.png">'
            b' <a href="' + p + b'/abs">same host</a> <a href="https://example.com/x">elsewhere</a>'
            b'<script>location = "/not-a-link"</script></body></html>')


@dataclass
class Answer:
    code: int = 200
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    # the body stops after this many bytes and the connection closes, short of its declared length
    cut_after: Optional[int] = None


@dataclass
class Seen:
    method: bytes
    uri: bytes
    headers: dict[bytes, list[bytes]]

    def header(self, name: bytes) -> Optional[bytes]:
        values = self.headers.get(name)
        return values[0] if values else None


class Backend(resource.Resource):
    """A web server on a loopback port: answers per path, and every request kept."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[bytes, Answer] = {}
        self.seen: list[Seen] = []

    def render(self, request: server.Request) -> Any:
        self.seen.append(Seen(request.method, request.uri, {k.lower(): list(v) for k, v in
                                                            request.requestHeaders.getAllRawHeaders()}))
        answer = self.answers.get(request.path, Answer(404, [(b"Content-Type", b"text/plain")], b"no page\n"))
        request.setResponseCode(answer.code)
        for name, value in answer.headers:
            request.responseHeaders.addRawHeader(name, value)
        if answer.cut_after is not None:
            request.setHeader(b"content-length", str(len(answer.body)).encode())
            request.write(answer.body[:answer.cut_after])
            request.channel.transport.loseConnection()  # type: ignore[union-attr]
            return server.NOT_DONE_YET
        return answer.body


class LoopbackDial:
    """The connector's Dial: the test's addresses are served on loopback ports; any other
    address leads to a loopback port where nothing listens."""

    def __init__(self, routes: dict[tuple[str, int], int], closed_port: int) -> None:
        self.routes = routes
        self.closed_port = closed_port
        self.dialed: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int, timeout: float) -> IStreamClientEndpoint:
        self.dialed.append((host, port))
        return TCP4ClientEndpoint(reactor, "127.0.0.1", self.routes.get((host, port), self.closed_port),
                                  timeout=timeout)


class ProxyTransportTests(ServerTestCase):
    async def _start(self) -> None:
        await super()._start()
        self.backend = Backend()
        site = server.Site(self.backend)
        site.noisy = False
        listening = reactor.listenTCP(0, site, interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        self.kubelet = StandInKubelet()
        kubelet_port = self.kubelet.listen()
        self.addCleanup(self.kubelet.stop)
        closed = reactor.listenTCP(0, server.Site(resource.Resource()), interface="127.0.0.1")
        closed_port = closed.getHost().port
        await closed.stopListening()
        self.dial = LoopbackDial({(POD_IP, 1080): listening.getHost().port, (NODE_IP, 10250): kubelet_port},
                                 closed_port)
        self.server.api.streams.dial = self.dial
        await self.add_pod_service_and_node()

    async def add_pod_service_and_node(self) -> None:
        r = await self.client.post("/api/v1/nodes", {"metadata": {"name": "n1"}, "status": {
            "addresses": [{"type": "InternalIP", "address": NODE_IP}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}})
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.post(NS + "/pods", {"metadata": {"name": "web"}, "spec": {"nodeName": "n1", "containers": [
            {"name": "c", "image": "agnhost", "ports": [{"containerPort": 1080}]}]}})
        self.assertEqual(r.code, 201, r.body)
        pod = r.body
        pod["status"] = {"phase": "Running", "podIP": POD_IP, "podIPs": [{"ip": POD_IP}]}
        r = await self.client.put(NS + "/pods/web/status", pod)
        self.assertEqual(r.code, 200, r.body)
        r = await self.client.post(NS + "/services", {"metadata": {"name": "web"}, "spec": {
            "ports": [{"name": "http", "port": 80, "targetPort": 1080}]}})
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.post(NS + "/endpoints", {"metadata": {"name": "web"}, "subsets": [{
            "addresses": [{"ip": POD_IP, "targetRef": {"kind": "Pod", "name": "web", "namespace": "default"}}],
            "ports": [{"name": "http", "port": 1080}]}]})
        self.assertEqual(r.code, 201, r.body)

    async def fetch(self, method: bytes, path: str, headers: tuple[tuple[bytes, bytes], ...] = ()
                    ) -> tuple[int, Headers, bytes]:
        """One request as a browser would send it: no redirect followed, no body decoded."""
        agent = Agent(reactor, pool=HTTPConnectionPool(reactor, persistent=False))
        response = await agent.request(method, (self.server.url + path).encode(), Headers(
            {name: [value] for name, value in headers}))
        return response.code, response.headers, await readBody(response)

    @run
    async def test_links_in_a_pods_page_go_through_the_proxy_as_the_conformance_spec_checks(self):
        self.backend.answers[b"/"] = Answer(200, [(b"Content-Type", b"text/html; charset=utf-8")], PAGE)
        for name in ("web", "web:1080", "http:web:1080"):
            prefix = f"{NS}/pods/{name}/proxy"
            code, headers, body = await self.fetch(b"GET", prefix + "/")
            self.assertEqual((code, body), (200, rewritten_page(prefix)), name)
            self.assertEqual(headers.getRawHeaders(b"content-type"), [b"text/html; charset=utf-8"])
            seen = self.backend.seen[-1]
            self.assertEqual((seen.method, seen.uri), (b"GET", b"/"))
            self.assertEqual(seen.header(b"x-forwarded-uri"), (prefix + "/").encode())
            self.assertEqual(seen.header(b"x-forwarded-for"), b"127.0.0.1")
            # the request URL names no scheme or host: upstream sets neither header then
            self.assertEqual((seen.header(b"x-forwarded-host"), seen.header(b"x-forwarded-proto")), (None, None))
        self.assertEqual(set(self.dial.dialed), {(POD_IP, 1080)})

    @run
    async def test_a_services_page_and_a_nodes_kubelet_page(self):
        self.backend.answers[b"/status/"] = Answer(200, [(b"Content-Type", b"text/html")], PAGE)
        prefix = f"{NS}/services/web:80/proxy"
        code, _, body = await self.fetch(b"GET", prefix + "/status/")
        self.assertEqual((code, body), (200, rewritten_page(prefix)))
        self.assertEqual(self.backend.seen[-1].header(b"x-forwarded-uri"), (prefix + "/status/").encode())
        # the kubelet's own pages (over TLS, with the kubelet client's credentials)
        self.kubelet.refusal = (200, b"text/html", b'<a href="/logs/">logs</a>')
        code, _, body = await self.fetch(b"GET", "/api/v1/nodes/n1/proxy/logs/")
        self.assertEqual((code, body), (200, b'<a href="/api/v1/nodes/n1/proxy/logs/">logs</a>'))
        self.assertEqual(self.kubelet.seen[-1].header(b"x-forwarded-uri"), b"/api/v1/nodes/n1/proxy/logs/")

    @run
    async def test_other_answers_are_not_rewritten_and_lose_only_their_cors_headers(self):
        cors = [(b"Access-Control-Allow-Origin", b"*"), (b"Access-Control-Allow-Credentials", b"true"),
                (b"Access-Control-Allow-Headers", b"X-Custom"), (b"Access-Control-Allow-Methods", b"GET"),
                (b"Access-Control-Expose-Headers", b"X-Custom"), (b"Access-Control-Max-Age", b"60")]
        self.backend.answers[b"/plain"] = Answer(200, [(b"Content-Type", b"text/plain"), *cors], PAGE)
        self.backend.answers[b"/upper"] = Answer(200, [(b"Content-Type", b"TEXT/HTML")], PAGE)  # Go compares exactly
        code, headers, body = await self.fetch(b"GET", f"{NS}/pods/web/proxy/plain")
        self.assertEqual((code, body), (200, PAGE))
        self.assertEqual([name for name, _ in headers.getAllRawHeaders() if name.lower().startswith(b"access-control")],
                         [b"Access-Control-Expose-Headers", b"Access-Control-Max-Age"])
        code, _, body = await self.fetch(b"GET", f"{NS}/pods/web/proxy/upper")
        self.assertEqual((code, body), (200, PAGE))

    @run
    async def test_a_compressed_page_is_rewritten_in_its_coding_and_an_unknown_coding_is_not(self):
        compressed = gzip.compress(PAGE)
        self.backend.answers[b"/gz"] = Answer(200, [(b"Content-Type", b"text/html"), (b"Content-Encoding", b"gzip")],
                                              compressed)
        self.backend.answers[b"/br"] = Answer(200, [(b"Content-Type", b"text/html"), (b"Content-Encoding", b"br")],
                                              b"\x8b\x02brotli?")
        prefix = f"{NS}/pods/web/proxy"
        code, headers, body = await self.fetch(b"GET", prefix + "/gz", ((b"Accept-Encoding", b"gzip"),))
        self.assertEqual((code, headers.getRawHeaders(b"content-encoding")), (200, [b"gzip"]))
        self.assertEqual(gzip.decompress(body), rewritten_page(prefix))
        self.assertEqual(self.backend.seen[-1].header(b"accept-encoding"), b"gzip")
        code, headers, body = await self.fetch(b"GET", prefix + "/br", ((b"Accept-Encoding", b"br"),))
        self.assertEqual((code, body), (200, b"\x8b\x02brotli?"))

    @run
    async def test_a_large_page_is_rewritten_off_the_reactor_and_a_page_over_the_bound_passes_as_it_is(self):
        links = b"".join(b'<a href="/file-%d">file %d</a>\n' % (i, i) for i in range(4000))
        self.assertGreater(len(links), connector.INLINE_REWRITE_BYTES)
        self.backend.answers[b"/big"] = Answer(200, [(b"Content-Type", b"text/html")], links)
        prefix = f"{NS}/pods/web/proxy"
        code, _, body = await self.fetch(b"GET", prefix + "/big")
        self.assertEqual(code, 200)
        self.assertEqual(body, links.replace(b'href="/', b'href="' + prefix.encode() + b"/"))
        self.patch(connector, "MAX_REWRITTEN_HTML", 10000)
        code, _, body = await self.fetch(b"GET", prefix + "/big")
        self.assertEqual((code, body), (200, links))

    @run
    async def test_redirects_are_rewritten_and_an_unreadable_one_is_a_500(self):
        prefix = f"{NS}/pods/web:1080/proxy"
        self.backend.answers[b"/login"] = Answer(302, [(b"Location", b"http://192.0.2.10:1080/login/form?next=/")],
                                                 PAGE)
        code, headers, body = await self.fetch(b"GET", prefix + "/login")
        self.assertEqual((code, headers.getRawHeaders(b"location")), (302, [(prefix + "/login/form?next=/").encode()]))
        self.assertEqual(body, PAGE)  # an answer with a Location keeps its body as it is
        self.backend.answers[b"/bad"] = Answer(302, [(b"Location", b"http://[::1/x")], b"")
        code, _, body = await self.fetch(b"GET", prefix + "/bad")
        status = json.loads(body)
        self.assertEqual((code, status["reason"], status["message"]),
                         (500, "InternalError", "Internal error occurred: error trying to parse Location header: "
                                                "parse \"http://[::1/x\": missing ']' in host"))

    @run
    async def test_the_proxy_itself_is_redirected_to_its_slash(self):
        for path in (f"{NS}/pods/web:1080/proxy", f"{NS}/services/web:80/proxy", "/api/v1/nodes/n1/proxy"):
            code, headers, body = await self.fetch(b"GET", path + "?a=1&b=%2F")
            self.assertEqual((code, headers.getRawHeaders(b"location"), body), (301, [(path + "/?a=1&b=%2F").encode()],
                                                                              b""), path)
            self.assertEqual(headers.getRawHeaders(b"content-type"), None)
        self.assertEqual((self.backend.seen, self.kubelet.seen), ([], []))
        # other methods go to the backend's root
        self.backend.answers[b"/"] = Answer(201, [(b"Content-Type", b"text/plain")], b"made")
        code, _, body = await self.fetch(b"POST", f"{NS}/pods/web:1080/proxy")
        self.assertEqual((code, body), (201, b"made"))
        seen = self.backend.seen[-1]
        self.assertEqual((seen.method, seen.uri, seen.header(b"x-forwarded-uri")),
                         (b"POST", b"/", f"{NS}/pods/web:1080/proxy/".encode()))

    @run
    async def test_a_backend_that_cannot_be_reached_is_a_503(self):
        self.dial.routes.clear()
        code, _, body = await self.fetch(b"GET", f"{NS}/pods/web:1080/proxy/")
        status = json.loads(body)
        self.assertEqual((code, status["reason"], status["message"]),
                         (503, "ServiceUnavailable",
                          "error trying to reach service: dial tcp 192.0.2.10:1080: connect: connection refused"))
        code, _, body = await self.fetch(b"GET", "/api/v1/nodes/n1/proxy/pods")
        self.assertEqual((code, json.loads(body)["message"]),
                         (503, "error trying to reach service: dial tcp 192.0.2.20:10250: connect: connection refused"))

    @run
    async def test_a_page_cut_short_is_a_500(self):
        self.backend.answers[b"/cut"] = Answer(200, [(b"Content-Type", b"text/html")], PAGE, cut_after=20)
        code, _, body = await self.fetch(b"GET", f"{NS}/pods/web/proxy/cut")
        status = json.loads(body)
        # a Status of no API error: no reason (upstream's ErrorToAPIStatus)
        self.assertEqual((code, status.get("reason"), status["message"]), (500, None, "unexpected EOF"))
