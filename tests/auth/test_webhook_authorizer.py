"""The Webhook authorization mode against a real HTTPS webhook on loopback, in front of RBAC.

The webhook (a twisted.web resource in this process, TLS with a certificate of a CA the kubeconfig file
names, client certificates required) answers SubjectAccessReviews: it allows everything for user "webby",
denies Secrets to everyone, and has no opinion otherwise.
"""
from __future__ import annotations

import gc
import inspect
import json
import os
import tempfile
import tracemalloc

import yaml
from OpenSSL import SSL
from twisted.internet import reactor, ssl
from twisted.web import resource, server

from kapiserver.auth import webhook_authorizer
from kapiserver.auth.rbac.bootstrap_policy import GROUP
from kapiserver.server.certs import ensure_certificates, issue_client_certificate
from kapiserver.testing.cases import ServerTestCase, run

SAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class ReviewWebhook(resource.Resource):
    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.reviews: list[dict] = []
        self.down = False

    def render_POST(self, request):
        if self.down:
            request.setResponseCode(503)
            return b"unavailable"
        review = json.loads(request.content.read())
        self.reviews.append(review)
        spec = review["spec"]
        attributes = spec.get("resourceAttributes") or {}
        if spec.get("user") == "webby":
            status = {"allowed": True, "reason": "webby may"}
        elif attributes.get("resource") == "secrets":
            status = {"allowed": False, "denied": True, "reason": "no secrets via the webhook"}
        else:
            status = {"allowed": False}
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"apiVersion": review["apiVersion"], "kind": "SubjectAccessReview",
                           "status": status}).encode()


def _webhook_listener(cert_dir: str, site: server.Site):
    bundle = ensure_certificates(cert_dir)
    options = ssl.CertificateOptions(
        privateKey=ssl.PrivateCertificate.loadPEM(bundle.serving_cert_pem + bundle.serving_key_pem).privateKey.original,
        certificate=ssl.Certificate.loadPEM(bundle.serving_cert_pem).original)
    ctx = options.getContext()
    ctx.get_cert_store().add_cert(ssl.Certificate.loadPEM(bundle.ca_cert_pem).original)
    ctx.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, lambda *args: bool(args[-1]))
    return reactor.listenSSL(0, site, options, interface="127.0.0.1")


class WebhookTests(ServerTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kap-webhook-")
        self.webhook = ReviewWebhook()
        self.port = _webhook_listener(os.path.join(self.dir, "certs"), server.Site(self.webhook))
        self.addCleanup(self.port.stopListening)
        cert, key = issue_client_certificate(os.path.join(self.dir, "certs"), "kapiserver-authorizer")
        for name, data in (("client.crt", cert), ("client.key", key)):
            with open(os.path.join(self.dir, name), "wb") as f:
                f.write(data)
        config = os.path.join(self.dir, "webhook.kubeconfig")
        with open(config, "w") as f:
            yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config", "current-context": "webhook",
                "clusters": [{"name": "authz", "cluster": {
                    "server": f"https://127.0.0.1:{self.port.getHost().port}/authorize",
                    "certificate-authority": "certs/ca.crt"}}],
                "users": [{"name": "apiserver", "user": {"client-certificate": "client.crt",
                                                         "client-key": "client.key"}}],
                "contexts": [{"name": "webhook", "context": {"cluster": "authz", "user": "apiserver"}}]}, f)
        self.settings = {"authorization_modes": ["Webhook", "RBAC"], "authorization_webhook_config_file": config}
        self.patch(webhook_authorizer, "RETRY_FIRST_DELAY", 0.01)
        return super().setUp()

    async def make_anonymous_admin(self) -> None:
        store = self.server.api.served.store(GROUP, "v1", "clusterrolebindings")
        await store.create("", {"metadata": {"name": "anonymous-admin"},
                                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "cluster-admin"},
                                "subjects": [{"apiGroup": GROUP, "kind": "User", "name": "system:anonymous"}]})

        async def indexed():
            return "anonymous-admin" in self.server.api.rbac.cluster_role_bindings
        await self.wait_for(indexed)

    @run
    async def test_webhook_allows_denies_or_passes_to_rbac(self):
        await self.make_anonymous_admin()
        # no opinion from the webhook: RBAC (anonymous is cluster-admin here) decides
        self.assertEqual((await self.client.get("/api/v1/namespaces/default/configmaps")).code, 200)
        review = self.webhook.reviews[-1]
        self.assertEqual(review["apiVersion"], "authorization.k8s.io/v1")
        self.assertEqual(review["spec"], {"resourceAttributes": {"namespace": "default", "verb": "list",
                                                                 "version": "v1", "resource": "configmaps"},
                                          "user": "system:anonymous", "groups": ["system:unauthenticated"]})
        # a deny ends the chain, whatever RBAC says
        denied = await self.client.get("/api/v1/namespaces/default/secrets")
        self.assertEqual((denied.code, denied.body["message"]), (
            403, 'secrets is forbidden: User "system:anonymous" cannot list resource "secrets" in API group "" in '
                 'the namespace "default": no secrets via the webhook'))
        # the webhook alone can allow (impersonation, then the request, both asked of it)
        webby = await self.client.get("/api/v1/nodes", headers={"Impersonate-User": "webby"})
        self.assertEqual(webby.code, 200, webby.body)
        reply = await self.client.post(SAR, {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                             "spec": {"resourceAttributes": {"verb": "get", "resource": "secrets"}}})
        self.assertEqual(reply.body["status"], {"allowed": False, "denied": True,
                                                "reason": "no secrets via the webhook"})

    @run
    async def test_answers_are_cached(self):
        await self.make_anonymous_admin()
        for _ in range(3):
            self.assertEqual((await self.client.get("/api/v1/namespaces/default/pods")).code, 200)
        asked = [r for r in self.webhook.reviews if (r["spec"].get("resourceAttributes") or {}).get("resource") == "pods"]
        self.assertEqual(len(asked), 1)

    @run
    async def test_cached_answers_keep_their_keys_at_their_own_size(self):
        # the cache's key is the review's JSON, which orjson hands back in a 4 KB buffer (codec.exact_size):
        # 8,192 cached answers must not keep 8,192 of those
        await self.make_anonymous_admin()
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            self.addCleanup(tracemalloc.stop)
        source, first = inspect.getsourcelines(webhook_authorizer.WebhookAuthorizer.authorize)
        encoder = [tracemalloc.Filter(True, webhook_authorizer.__file__, lineno=first + i)
                   for i, line in enumerate(source) if "orjson.dumps" in line]
        paths = [f"/api/v1/namespaces/ns-{i}/configmaps" for i in range(10)]
        for _ in range(2):
            for path in paths:
                self.assertEqual((await self.client.get(path)).code, 200)
        asked = [r for r in self.webhook.reviews if (r["spec"].get("resourceAttributes") or {}).get("resource") == "configmaps"]
        self.assertEqual(len(asked), 10)  # the second round was answered from the cache
        gc.collect()
        held = tracemalloc.take_snapshot().filter_traces(encoder)
        self.assertEqual(sum(stat.size for stat in held.statistics("lineno")), 0, "the cache holds the encoder's buffers")

    @run
    async def test_unreachable_webhook_has_no_opinion_and_reports_the_error(self):
        await self.make_anonymous_admin()
        self.webhook.down = True
        # RBAC still allows what it allows
        self.assertEqual((await self.client.get("/api/v1/namespaces/default/services")).code, 200)
        # nothing allows "nobody": the webhook's failure is a 500, as upstream
        reply = await self.client.get("/api/v1/namespaces/default/services", headers={"Impersonate-User": "nobody"})
        self.assertEqual(reply.code, 500, reply.body)
        self.assertIn("an error on the server (\"unavailable\") has prevented the request from succeeding",
                      reply.body["message"])
        rules = await self.client.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}})
        self.assertTrue(rules.body["status"]["incomplete"])
        self.assertEqual(rules.body["status"]["evaluationError"], webhook_authorizer.RULES_UNSUPPORTED)
