"""ServiceAccount tokens on an in-process server with generated keys: TokenRequest, the tokens
they become, TokenReview, legacy token Secrets, OIDC discovery and the published trust ConfigMap."""
from __future__ import annotations

import base64
import calendar
import json
import os
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from kapiserver.server.certs import ensure_certificates
from kapiserver.testing import TEST_ADVERTISE_ADDRESS
from kapiserver.testing.cases import ServerTestCase, run

ISSUER = "https://kubernetes.default.svc.cluster.local"
SA = "/api/v1/namespaces/default/serviceaccounts"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def token_request(**spec) -> dict:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def b64decode_url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class AuthServerTestCase(ServerTestCase):
    """The in-process server with the certificates and keys of a first start."""

    extra_settings: dict = {}

    async def _start(self) -> None:
        self.cert_dir = os.path.abspath(self.mktemp())
        bundle = ensure_certificates(self.cert_dir)
        self.settings = {"cert_dir": self.cert_dir, "ca_pem": bundle.ca_cert_pem, **self.extra_settings}
        await super()._start()

    async def issue(self, account: str = "default", namespace: str = "default", **spec) -> dict:
        reply = await self.client.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
                                       token_request(**spec))
        self.assertEqual(reply.code, 201, reply.body)
        return reply.body

    async def whoami(self, token: str):
        return await self.client.post(WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                      headers={"Authorization": f"Bearer {token}"})

    async def default_account(self, namespace: str = "default") -> dict:
        async def found():
            reply = await self.client.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default")
            return reply.body if reply.code == 200 else None
        return await self.wait_for(found)


class TokenRequestTests(AuthServerTestCase):
    @run
    async def test_default_token_is_the_service_account(self):
        sa = await self.default_account()
        before = time.time()
        answer = await self.issue()
        self.assertEqual(answer["spec"], {"audiences": [ISSUER], "expirationSeconds": 3600})
        self.assertEqual((answer["metadata"]["name"], answer["metadata"]["namespace"]), ("default", "default"))
        token = answer["status"]["token"]
        c = claims(token)
        self.assertEqual((c["iss"], c["sub"], c["aud"]), (ISSUER, "system:serviceaccount:default:default", [ISSUER]))
        self.assertEqual(c["kubernetes.io"], {"namespace": "default",
                                              "serviceaccount": {"name": "default", "uid": sa["metadata"]["uid"]}})
        self.assertAlmostEqual(c["exp"] - c["iat"], 3600)
        self.assertTrue(int(before) <= c["iat"] <= time.time(), (before, c["iat"]))  # issued now, in whole seconds
        reply = await self.whoami(token)
        self.assertEqual(reply.code, 201, reply.body)
        user = reply.body["status"]["userInfo"]
        self.assertEqual(user["username"], "system:serviceaccount:default:default")
        self.assertEqual(user["groups"], ["system:serviceaccounts", "system:serviceaccounts:default",
                                          "system:authenticated"])
        self.assertEqual(user["uid"], sa["metadata"]["uid"])
        self.assertEqual(user["extra"], {"authentication.kubernetes.io/credential-id": [f"JTI={c['jti']}"]})

    @run
    async def test_bad_requests_answer_as_upstream(self):
        await self.default_account()
        base = f"{SA}/default/token"
        reply = await self.client.post(base, token_request(expirationSeconds=60))
        self.assertEqual((reply.code, reply.body["message"]), (422, 'TokenRequest.authentication.k8s.io "" is invalid: '
                                                                    'spec.expirationSeconds: Invalid value: 60: may not '
                                                                    'specify a duration less than 10 minutes'))
        reply = await self.client.post(f"{SA}/ghost/token", token_request())
        self.assertEqual((reply.code, reply.body["message"]), (404, 'serviceaccounts "ghost" not found'))
        reply = await self.client.post(base, {**token_request(), "metadata": {"name": "other"}})
        self.assertEqual(reply.code, 422)
        self.assertIn("must match the service account name if specified", reply.body["message"])
        reply = await self.client.post(base, token_request(
            boundObjectRef={"kind": "ConfigMap", "apiVersion": "v1", "name": "kube-root-ca.crt"}))
        self.assertEqual((reply.code, reply.body["message"]),
                         (400, "cannot bind token to object of type /v1, Kind=ConfigMap"))
        reply = await self.client.post(base, token_request(
            boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "missing"}))
        self.assertEqual((reply.code, reply.body["message"]), (404, 'pods "missing" not found'))
        listed = await self.client.get(base)
        self.assertEqual(listed.code, 405)

    @run
    async def test_token_bound_to_a_pod_ends_with_the_pod(self):
        await self.default_account()
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "runner"},
               "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "node-1"}}
        created = await self.client.post("/api/v1/namespaces/default/pods", pod)
        self.assertEqual(created.code, 201, created.body)
        uid = created.body["metadata"]["uid"]
        reply = await self.client.post(f"{SA}/default/token", token_request(
            boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "runner", "uid": "not-the-uid"}))
        self.assertEqual(reply.code, 409)
        self.assertEqual(reply.body["message"], 'Operation cannot be fulfilled on Pod "runner": the UID in the bound '
                                                'object reference (not-the-uid) does not match the UID in record. '
                                                'The object might have been deleted and then recreated')
        answer = await self.issue(boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "runner", "uid": uid})
        token = answer["status"]["token"]
        # the pod's node is gone (never created): its name alone is in the token, as upstream
        self.assertEqual(claims(token)["kubernetes.io"]["node"], {"name": "node-1"})
        user = (await self.whoami(token)).body["status"]["userInfo"]
        self.assertEqual(user["extra"]["authentication.kubernetes.io/pod-name"], ["runner"])
        self.assertEqual(user["extra"]["authentication.kubernetes.io/pod-uid"], [uid])
        self.assertEqual(user["extra"]["authentication.kubernetes.io/node-name"], ["node-1"])
        deleted = await self.client.delete("/api/v1/namespaces/default/pods/runner?gracePeriodSeconds=0")  # gone now
        self.assertEqual(deleted.code, 200)

        async def refused():
            return (await self.whoami(token)).code == 401
        await self.wait_for(refused)

    @run
    async def test_kubelet_default_lifetime_is_extended_with_warnafter(self):
        await self.default_account()
        created = await self.client.post("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kubelet-style"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        self.assertEqual(created.code, 201, created.body)
        answer = await self.issue(expirationSeconds=3607,
                                  boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "kubelet-style"})
        c = claims(answer["status"]["token"])
        self.assertEqual(c["exp"] - c["iat"], 365 * 24 * 3600)
        self.assertEqual(c["kubernetes.io"]["warnafter"], c["iat"] + 3607)
        # what the client is told is what it asked for
        self.assertEqual(answer["spec"]["expirationSeconds"], 3607)
        expires = calendar.timegm(time.strptime(answer["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ"))
        self.assertLessEqual(abs(expires - (c["iat"] + 3607)), 2)
        # not for other audiences, nor without a pod
        other = claims((await self.issue(expirationSeconds=3607, audiences=["vault"], boundObjectRef={
            "kind": "Pod", "apiVersion": "v1", "name": "kubelet-style"}))["status"]["token"])
        self.assertEqual(other["exp"] - other["iat"], 3607)
        self.assertNotIn("warnafter", other["kubernetes.io"])

    @run
    async def test_node_bound_token(self):
        await self.default_account()
        node = await self.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                         "metadata": {"name": "worker-1"}})
        self.assertEqual(node.code, 201, node.body)
        token = (await self.issue(boundObjectRef={"kind": "Node", "apiVersion": "v1",
                                                  "name": "worker-1"}))["status"]["token"]
        user = (await self.whoami(token)).body["status"]["userInfo"]
        self.assertEqual(user["extra"]["authentication.kubernetes.io/node-name"], ["worker-1"])
        self.assertEqual(user["extra"]["authentication.kubernetes.io/node-uid"], [node.body["metadata"]["uid"]])
        await self.client.delete("/api/v1/nodes/worker-1")

        async def refused():
            return (await self.whoami(token)).code == 401
        await self.wait_for(refused)

    @run
    async def test_pod_of_another_service_account_cannot_bind(self):
        await self.client.post(SA, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "other"}})
        await self.client.post("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"serviceAccountName": "other", "containers": [{"name": "c", "image": "busybox"}]}})
        await self.default_account()
        reply = await self.client.post(f"{SA}/default/token", token_request(
            boundObjectRef={"kind": "Pod", "apiVersion": "v1", "name": "p"}))
        self.assertEqual((reply.code, reply.body["message"]),
                         (400, 'cannot bind token for serviceaccount "default" to pod running with different '
                               'serviceaccount name.'))

    @run
    async def test_secret_bound_token_and_deleted_service_account(self):
        await self.client.post(SA, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
        await self.client.post("/api/v1/namespaces/default/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "anchor"}, "stringData": {"a": "b"}})
        bound = (await self.issue("robot", boundObjectRef={"kind": "Secret", "apiVersion": "v1",
                                                           "name": "anchor"}))["status"]["token"]
        plain = (await self.issue("robot"))["status"]["token"]
        self.assertEqual((await self.whoami(bound)).code, 201)
        await self.client.delete("/api/v1/namespaces/default/secrets/anchor")

        async def bound_refused():
            return (await self.whoami(bound)).code == 401
        await self.wait_for(bound_refused)
        self.assertEqual((await self.whoami(plain)).code, 201)
        await self.client.delete(f"{SA}/robot")

        async def plain_refused():
            return (await self.whoami(plain)).code == 401
        await self.wait_for(plain_refused)
        # a new account of the same name has another uid: old tokens stay dead
        await self.client.post(SA, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
        self.assertEqual((await self.whoami(plain)).code, 401)

    @run
    async def test_audiences(self):
        await self.default_account()
        token = (await self.issue(audiences=["vault"]))["status"]["token"]
        self.assertEqual(claims(token)["aud"], ["vault"])
        # not for this API, even though anonymous requests are allowed here
        self.assertEqual((await self.whoami(token)).code, 401)
        review = await self.client.post(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1",
                                                        "kind": "TokenReview",
                                                        "spec": {"token": token, "audiences": ["vault"]}})
        self.assertEqual(review.code, 201, review.body)
        self.assertTrue(review.body["status"]["authenticated"])
        self.assertEqual(review.body["status"]["audiences"], ["vault"])


class MaxExpirationTests(AuthServerTestCase):
    extra_settings = {"service_account_max_token_expiration_seconds": 3600}

    @run
    async def test_longer_requests_are_shortened_with_a_warning(self):
        await self.default_account()
        reply = await self.client.post(f"{SA}/default/token", token_request(expirationSeconds=7200))
        self.assertEqual(reply.code, 201)
        self.assertEqual(reply.body["spec"]["expirationSeconds"], 3600)
        c = claims(reply.body["status"]["token"])
        self.assertEqual(c["exp"] - c["iat"], 3600)
        self.assertEqual(reply.header("warning"), '299 - "requested expiration of 7200 seconds shortened to '
                                                  '3600 seconds"')


class TokenReviewTests(AuthServerTestCase):
    async def review(self, spec: dict):
        return await self.client.post(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1",
                                                      "kind": "TokenReview", "spec": spec})

    @run
    async def test_answers_with_the_request_authenticators(self):
        sa = await self.default_account()
        token = (await self.issue())["status"]["token"]
        reply = await self.review({"token": token})
        self.assertEqual(reply.code, 201, reply.body)
        status = reply.body["status"]
        self.assertTrue(status["authenticated"])
        self.assertEqual(status["user"]["username"], "system:serviceaccount:default:default")
        self.assertEqual(status["user"]["uid"], sa["metadata"]["uid"])
        self.assertIn("system:authenticated", status["user"]["groups"])
        self.assertEqual(status["audiences"], [ISSUER])
        other = await self.review({"token": token, "audiences": ["vault"]})
        self.assertEqual(other.body["status"], {
            "user": {}, "error": f'token audiences ["{ISSUER}"] is invalid for the target audiences ["vault"]'})

    @run
    async def test_unknown_and_missing_tokens(self):
        reply = await self.review({"token": "not-a-token"})
        self.assertEqual(reply.body["status"], {"user": {}, "error": "invalid bearer token"})
        reply = await self.review({})
        self.assertEqual((reply.code, reply.body["message"]),
                         (400, "token is required for TokenReview in authentication"))


class OIDCDiscoveryTests(AuthServerTestCase):
    @run
    async def test_documents_verify_a_token_independently(self):
        await self.default_account()
        token = (await self.issue())["status"]["token"]
        config = await self.client.get("/.well-known/openid-configuration")
        self.assertEqual(config.code, 200)
        self.assertEqual(config.header("content-type"), "application/json")
        self.assertEqual(config.header("cache-control"), "public, max-age=3600")
        self.assertEqual(config.body, {
            "issuer": ISSUER, "jwks_uri": config.body["jwks_uri"],
            "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"]})
        # the advertised address, as upstream (this in-process server does not know its port:
        # the end-to-end test checks the whole URL)
        self.assertTrue(config.body["jwks_uri"].startswith(f"https://{TEST_ADVERTISE_ADDRESS}:"))
        self.assertTrue(config.body["jwks_uri"].endswith("/openid/v1/jwks"))
        jwks = await self.client.get("/openid/v1/jwks")
        self.assertEqual(jwks.header("content-type"), "application/jwk-set+json")
        header_b64, payload_b64, signature_b64 = token.split(".")
        kid = json.loads(b64decode_url(header_b64))["kid"]
        (key,) = [k for k in jwks.body["keys"] if k["kid"] == kid]
        self.assertEqual((key["kty"], key["alg"], key["use"]), ("RSA", "RS256", "sig"))
        public = rsa.RSAPublicNumbers(int.from_bytes(b64decode_url(key["e"]), "big"),
                                      int.from_bytes(b64decode_url(key["n"]), "big")).public_key()
        public.verify(b64decode_url(signature_b64), f"{header_b64}.{payload_b64}".encode(), padding.PKCS1v15(),
                      hashes.SHA256())
        self.assertEqual(claims(token)["iss"], config.body["issuer"])
        root = await self.client.get("/")
        self.assertIn("/.well-known/openid-configuration", root.body["paths"])
        self.assertIn("/openid/v1/jwks", root.body["paths"])


class LegacyTokenSecretTests(AuthServerTestCase):
    @run
    async def test_secret_is_filled_and_its_token_works_until_the_account_goes(self):
        await self.client.post(SA, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "legacy"}})
        sa = (await self.client.get(f"{SA}/legacy")).body
        created = await self.client.post("/api/v1/namespaces/default/secrets", {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "legacy-token", "annotations": {"kubernetes.io/service-account.name": "legacy"}}})
        self.assertEqual(created.code, 201, created.body)

        async def filled():
            secret = (await self.client.get("/api/v1/namespaces/default/secrets/legacy-token")).body
            return secret if "token" in (secret.get("data") or {}) else None
        secret = await self.wait_for(filled)
        data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
        with open(os.path.join(self.cert_dir, "ca.crt")) as f:
            self.assertEqual(data["ca.crt"], f.read())
        self.assertEqual(data["namespace"], "default")
        self.assertEqual(secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"],
                         sa["metadata"]["uid"])
        # filled by the tokens controller, which upstream runs in kube-controller-manager
        self.assertIn("kube-controller-manager", [e["manager"] for e in secret["metadata"]["managedFields"]])
        c = claims(data["token"])
        self.assertEqual(c, {"iss": "kubernetes/serviceaccount", "sub": "system:serviceaccount:default:legacy",
                             "kubernetes.io/serviceaccount/namespace": "default",
                             "kubernetes.io/serviceaccount/secret.name": "legacy-token",
                             "kubernetes.io/serviceaccount/service-account.name": "legacy",
                             "kubernetes.io/serviceaccount/service-account.uid": sa["metadata"]["uid"]})
        reply = await self.whoami(data["token"])
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["status"]["userInfo"]["username"], "system:serviceaccount:default:legacy")

        async def labelled():
            got = (await self.client.get("/api/v1/namespaces/default/secrets/legacy-token")).body
            return (got["metadata"].get("labels") or {}).get("kubernetes.io/legacy-token-last-used")
        self.assertEqual(await self.wait_for(labelled), time.strftime("%Y-%m-%d", time.gmtime()))
        await self.client.delete(f"{SA}/legacy")

        async def secret_gone():
            return (await self.client.get("/api/v1/namespaces/default/secrets/legacy-token")).code == 404
        await self.wait_for(secret_gone)
        self.assertEqual((await self.whoami(data["token"])).code, 401)

    @run
    async def test_token_secret_without_its_account_is_deleted(self):
        await self.client.post("/api/v1/namespaces/default/secrets", {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "orphan", "annotations": {"kubernetes.io/service-account.name": "nobody"}}})

        async def gone():
            return (await self.client.get("/api/v1/namespaces/default/secrets/orphan")).code == 404
        await self.wait_for(gone)


class TrustConfigMapTests(AuthServerTestCase):
    PATH = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"

    @run
    async def test_published_as_upstream_and_restored(self):
        async def published():
            reply = await self.client.get(self.PATH)
            return reply.body if reply.code == 200 else None
        data = (await self.wait_for(published))["data"]
        with open(os.path.join(self.cert_dir, "ca.crt")) as f:
            client_ca = f.read()
        with open(os.path.join(self.cert_dir, "front-proxy-ca.crt")) as f:
            front_proxy_ca = f.read()
        self.assertEqual(data, {
            "client-ca-file": client_ca,
            "requestheader-client-ca-file": front_proxy_ca,
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
            "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        })
        x509.load_pem_x509_certificate(data["client-ca-file"].encode())
        await self.client.delete(self.PATH)

        async def restored():
            reply = await self.client.get(self.PATH)
            return reply.code == 200 and reply.body["data"] == data
        await self.wait_for(restored)


class StaticTokenTests(AuthServerTestCase):
    async def _start(self) -> None:
        path = os.path.abspath(self.mktemp())
        with open(path, "w") as f:
            f.write('s3cret,jane,42,"dev,ops"\n')
        self.extra_settings = {"token_auth_file": path}
        await super()._start()

    @run
    async def test_token_file_users(self):
        reply = await self.whoami("s3cret")
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["status"]["userInfo"], {"username": "jane", "uid": "42",
                                                            "groups": ["dev", "ops", "system:authenticated"]})
        # anonymous requests are allowed on this server; a wrong token is still a 401
        self.assertEqual((await self.whoami("wrong")).code, 401)
        anonymous = await self.client.post(WHOAMI, {"apiVersion": "authentication.k8s.io/v1",
                                                    "kind": "SelfSubjectReview"})
        self.assertEqual(anonymous.body["status"]["userInfo"], {"username": "system:anonymous",
                                                                "groups": ["system:unauthenticated"]})
