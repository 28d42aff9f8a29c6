"""CRD conversion webhooks: the server calls a real HTTPS webhook the test serves.

The webhook converts Widgets between example.com/v1 (``spec.replicas``) and
example.com/v2 (``spec.size``); v1 is the storage version.  Its certificate
comes from a test CA (the one :func:`ensure_certificates` makes), given to the
CRD as ``caBundle``.
"""
from __future__ import annotations

import base64
import copy
import json
import re
import tempfile

import treq
from twisted.internet import reactor, ssl, task
from twisted.web import resource, server

from kapiserver.apiextensions import conversion
from kapiserver.server.certs import ensure_certificates
from tests.apiextensions.test_crd_api import CRDS, CRDTestCase, simple_crd
from kapiserver.testing.cases import run, sleep

V1 = "/apis/example.com/v1/namespaces/default/widgets"
V2 = "/apis/example.com/v2/namespaces/default/widgets"
GVK_V1 = "example.com/v1, Kind=Widget"


def _rename_spec(obj: dict, desired: str) -> dict:
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    if desired.endswith("/v2") and "replicas" in spec:
        spec["size"] = spec.pop("replicas")
    elif desired.endswith("/v1") and "size" in spec:
        spec["replicas"] = spec.pop("size")
    out["apiVersion"] = desired
    # a webhook may change annotations; other metadata changes are not kept
    out["metadata"].setdefault("annotations", {})["converted-to"] = desired
    out["metadata"]["generation"] = 99
    return out


class ConversionWebhook(resource.Resource):
    """The test webhook: ``mode`` chooses how it answers; ``calls`` records
    (desiredAPIVersion, object names) per request."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.mode = "ok"
        self.delays: list[float] = []
        self.calls: list[tuple[str, list[str]]] = []
        self.pending: list = []

    def render_POST(self, request):
        review = json.loads(request.content.read())
        req = review["request"]
        self.calls.append((req["desiredAPIVersion"], [o["metadata"]["name"] for o in req["objects"]]))
        if self.mode == "hang":
            self.pending.append(request)
            return server.NOT_DONE_YET
        if self.mode == "http500":
            request.setResponseCode(500)
            return b"webhook exploded"
        response = {"uid": req["uid"], "result": {"status": "Success"},
                    "convertedObjects": [_rename_spec(o, req["desiredAPIVersion"]) for o in req["objects"]]}
        if self.mode == "failure":
            response = {"uid": req["uid"], "result": {"status": "Failure", "message": "cannot convert widgets today"}}
        elif self.mode == "wronguid":
            response["uid"] = "not-" + req["uid"]
        elif self.mode == "rename":
            for obj in response["convertedObjects"]:
                obj["metadata"]["name"] = "other"
        body = json.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                           "response": response}).encode()
        request.setHeader(b"content-type", b"application/json")
        delay = self.delays.pop(0) if self.delays else 0
        if not delay:
            return body

        def later():
            if not request._disconnected:
                request.write(body)
                request.finish()
        task.deferLater(reactor, delay, later)
        return server.NOT_DONE_YET


def _no_uids(message: str) -> str:
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uid>", message)


def webhook_crd(url: str, ca_bundle: str = "", service: dict | None = None) -> dict:
    crd = simple_crd(schema={"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}})
    v2 = {"name": "v2", "served": True, "storage": False, "schema": {"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}
    crd["spec"]["versions"].append(v2)
    config: dict = {"service": service} if service else {"url": url}
    if ca_bundle:
        config["caBundle"] = ca_bundle
    crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"], "clientConfig": config}}
    return crd


def widget(name: str, replicas: int) -> dict:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"replicas": replicas}}


def widget_v2(name: str, size: int) -> dict:
    return {"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}}


def _ca_bundle(cert_dir: str):
    bundle = ensure_certificates(cert_dir)
    return bundle, base64.b64encode(bundle.ca_cert_pem).decode()


class WebhookTestCase(CRDTestCase):
    async def _start(self) -> None:
        bundle, self.ca_bundle = _ca_bundle(tempfile.mkdtemp(prefix="kapiserver-webhook-"))
        options = ssl.PrivateCertificate.loadPEM(bundle.serving_cert_pem + bundle.serving_key_pem).options()
        self.webhook = ConversionWebhook()
        self.webhook_port = reactor.listenSSL(0, server.Site(self.webhook), options, interface="127.0.0.1")
        self.url = f"https://127.0.0.1:{self.webhook_port.getHost().port}/convert"
        await super()._start()

    async def _stop(self) -> None:
        for request in self.webhook.pending:
            if not request._disconnected and not request.finished:
                request.loseConnection()
        await self.webhook_port.stopListening()  # the server itself is stopped by a cleanup

    def tearDown(self):
        from twisted.internet import defer
        return defer.Deferred.fromCoroutine(self._stop())

    async def setup_crd(self, **kw) -> dict:
        kw.setdefault("ca_bundle", self.ca_bundle)
        return await self.create_crd(webhook_crd(kw.pop("url", self.url), **kw))

    async def watch_lines(self, path: str, rv: str, seconds: float, during) -> list[dict]:
        """The events of a ``timeoutSeconds`` watch while ``during()`` runs."""
        d = treq.get(self.server.url + path + f"?watch=true&resourceVersion={rv}&timeoutSeconds={seconds}",
                     unbuffered=True, persistent=False)
        await sleep(0.1)
        await during()
        response = await d
        return [json.loads(line) for line in (await treq.content(response)).splitlines() if line]


class WebhookConversionTests(WebhookTestCase):
    @run
    async def test_create_v1_read_list_and_update_through_v2(self):
        await self.setup_crd()
        r = await self.client.post(V1, widget("w1", 3))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(self.webhook.calls, [])  # written in the storage version: no call
        created_rv = r.body["metadata"]["resourceVersion"]

        got = await self.client.get(V2 + "/w1")
        self.assertEqual(got.code, 200, got.body)
        self.assertEqual(got.body["apiVersion"], "example.com/v2")
        self.assertEqual(got.body["spec"], {"size": 3})
        self.assertEqual(got.body["metadata"]["resourceVersion"], created_rv)
        self.assertEqual(got.body["metadata"]["annotations"], {"converted-to": "example.com/v2"})
        self.assertEqual(got.body["metadata"]["generation"], 1)  # the webhook's change is not kept

        for name, n in (("w2", 4), ("w3", 5)):
            self.assertEqual((await self.client.post(V1, widget(name, n))).code, 201)
        self.webhook.calls.clear()
        listed = await self.client.get(V2)
        self.assertEqual(listed.code, 200, listed.body)
        self.assertEqual([(i["apiVersion"], i["metadata"]["name"], i["spec"]) for i in listed.body["items"]],
                         [("example.com/v2", "w1", {"size": 3}), ("example.com/v2", "w2", {"size": 4}),
                          ("example.com/v2", "w3", {"size": 5})])
        self.assertEqual(self.webhook.calls, [("example.com/v2", ["w1", "w2", "w3"])])  # one call per page

        self.webhook.calls.clear()
        page = await self.client.get(V2 + "?limit=2")
        self.assertEqual([i["spec"]["size"] for i in page.body["items"]], [3, 4])
        self.assertEqual(self.webhook.calls, [("example.com/v2", ["w1", "w2"])])

        obj = got.body
        obj["spec"]["size"] = 7
        r = await self.client.put(V2 + "/w1", obj)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((r.body["apiVersion"], r.body["spec"]), ("example.com/v2", {"size": 7}))
        stored = json.loads((await self.server.storage.get("/example.com/widgets/default/w1")).value)
        self.assertEqual((stored["apiVersion"], stored["spec"]), ("example.com/v1", {"replicas": 7}))
        v1 = (await self.client.get(V1 + "/w1")).body
        self.assertEqual(v1["spec"], {"replicas": 7})

        r = await self.client.post(V2, widget_v2("w4", 9))
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["apiVersion"], r.body["spec"]), ("example.com/v2", {"size": 9}))
        self.assertEqual((await self.client.get(V1 + "/w4")).body["spec"], {"replicas": 9})

        r = await self.client.patch(V2 + "/w4", {"spec": {"size": 10}})
        self.assertEqual((r.code, r.body["spec"]), (200, {"size": 10}))
        r = await self.client.delete(V2 + "/w4")
        self.assertEqual((r.code, r.body["apiVersion"], r.body["spec"]), (200, "example.com/v2", {"size": 10}))

    @run
    async def test_watch_in_v2_sees_converted_events_in_order_behind_a_slow_webhook(self):
        await self.setup_crd()
        rv = (await self.client.get(V1)).body["metadata"]["resourceVersion"]
        self.webhook.delays = [0.3, 0.0, 0.2, 0.0, 0.1]

        async def writes():
            for i in range(6):
                self.assertEqual((await self.client.post(V1, widget(f"w{i}", i))).code, 201)
            self.assertEqual((await self.client.patch(V1 + "/w0", {"spec": {"replicas": 100}})).code, 200)
            self.assertEqual((await self.client.delete(V1 + "/w1")).code, 200)
        events = await self.watch_lines(V2, rv, 2, writes)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"], e["object"]["spec"]) for e in events],
                         [("ADDED", f"w{i}", {"size": i}) for i in range(6)]
                         + [("MODIFIED", "w0", {"size": 100}), ("DELETED", "w1", {"size": 1})])
        self.assertEqual({e["object"]["apiVersion"] for e in events}, {"example.com/v2"})
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        self.assertEqual(rvs, sorted(rvs))

    @run
    async def test_watch_from_now_starts_with_converted_objects_and_ends_with_500_when_webhook_fails(self):
        await self.setup_crd()
        self.assertEqual((await self.client.post(V1, widget("a", 1))).code, 201)

        async def break_webhook():
            await sleep(0.2)
            self.webhook.mode = "failure"
            self.assertEqual((await self.client.post(V1, widget("b", 2))).code, 201)
        events = await self.watch_lines(V2, "", 5, break_webhook)
        self.assertEqual([e["type"] for e in events], ["ADDED", "ERROR"])
        self.assertEqual(events[0]["object"]["spec"], {"size": 1})
        status = events[1]["object"]
        self.assertEqual((status["kind"], status["code"]), ("Status", 500))
        self.assertEqual(status["message"],
                         f"conversion webhook for {GVK_V1} failed: cannot convert widgets today")


class WebhookFailureTests(WebhookTestCase):
    async def assert_reads_fail(self, *fragments: str) -> None:
        got = await self.client.get(V2 + "/w")
        self.assertEqual(got.code, 500, got.body)
        self.assertEqual(got.body["kind"], "Status")
        self.assertTrue(got.body["message"].startswith(f"conversion webhook for {GVK_V1} failed: "),
                        got.body["message"])
        for fragment in fragments:
            self.assertIn(fragment, got.body["message"])
        listed = await self.client.get(V2)
        self.assertEqual((listed.code, _no_uids(listed.body["message"])), (500, _no_uids(got.body["message"])))
        # the storage version is still served, unchanged; a v2 write stores nothing
        v1 = await self.client.get(V1 + "/w")
        self.assertEqual((v1.code, v1.body["spec"]), (200, {"replicas": 1}))
        r = await self.client.post(V2, widget_v2("new", 2))
        self.assertEqual((r.code, r.body["reason"]), (500, "InternalError"), r.body)
        self.assertEqual(_no_uids(r.body["message"]), "Internal error occurred: " + _no_uids(
            got.body["message"]).replace(GVK_V1, "example.com/v2, Kind=Widget"))
        self.assertEqual((await self.client.get(V1 + "/new")).code, 404)

    async def setup_widget(self, **kw) -> None:
        await self.setup_crd(**kw)
        self.assertEqual((await self.client.post(V1, widget("w", 1))).code, 201)

    @run
    async def test_webhook_down(self):
        await self.setup_widget(url="https://127.0.0.1:1/convert")
        await self.assert_reads_fail('Post "https://127.0.0.1:1/convert?timeout=30s": dial tcp 127.0.0.1:1: '
                                     "connect: connection refused")

    @run
    async def test_webhook_reports_failure(self):
        await self.setup_widget()
        self.webhook.mode = "failure"
        await self.assert_reads_fail("cannot convert widgets today")

    @run
    async def test_webhook_http_error(self):
        await self.setup_widget()
        self.webhook.mode = "http500"
        await self.assert_reads_fail('an error on the server ("webhook exploded")')

    @run
    async def test_wrong_uid(self):
        await self.setup_widget()
        self.webhook.mode = "wronguid"
        await self.assert_reads_fail('expected response.uid="', 'got "not-')

    @run
    async def test_renamed_object_is_rejected(self):
        await self.setup_widget()
        self.webhook.mode = "rename"
        got = await self.client.get(V2 + "/w")
        self.assertEqual(got.code, 500)
        self.assertEqual(got.body["message"], f"conversion webhook for {GVK_V1} returned invalid converted "
                                              "object at index 0: must have the same name: w != other")

    @run
    async def test_timeout(self):
        self.patch(conversion, "TIMEOUT_SECONDS", 0.3)
        await self.setup_widget()
        self.webhook.mode = "hang"
        await self.assert_reads_fail("?timeout=300ms", "context deadline exceeded")

    @run
    async def test_untrusted_ca_bundle(self):
        _, other_ca = _ca_bundle(tempfile.mkdtemp(prefix="kapiserver-other-ca-"))
        await self.setup_widget(ca_bundle=other_ca)
        await self.assert_reads_fail("x509: certificate signed by unknown authority")
        self.assertEqual(self.webhook.calls, [])

    @run
    async def test_service_reference_needs_a_url(self):
        await self.setup_widget(service={"namespace": "default", "name": "converter", "port": 443})
        await self.assert_reads_fail("service reference default/converter cannot be resolved",
                                     "spec.conversion.webhook.clientConfig.url")

    @run
    async def test_fixing_the_crd_url_heals_reads(self):
        await self.setup_widget(url="https://127.0.0.1:1/convert")
        self.assertEqual((await self.client.get(V2 + "/w")).code, 500)
        crd = (await self.client.get(CRDS + "/widgets.example.com")).body
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = self.url
        self.assertEqual((await self.client.put(CRDS + "/widgets.example.com", crd)).code, 200)

        async def healed():
            return (await self.client.get(V2 + "/w")).code == 200
        await self.wait_for(healed)
