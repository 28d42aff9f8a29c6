"""Authentication against a real kapiserver process over TLS, with kubectl and the ``kubernetes`` client:
ServiceAccount tokens from ``kubectl create token``, legacy token Secrets, static tokens, the front
proxy's request headers, TokenReview and the OIDC discovery documents."""
from __future__ import annotations

import atexit
import base64
import http.client
import json
import os
import ssl
import tempfile
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from twisted.trial import unittest

from kapiserver.server.certs import issue_client_certificate
from kapiserver.testing import TEST_ADVERTISE_ADDRESS
from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import ServerProcess

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
_server: ServerProcess | None = None


def server() -> ServerProcess:
    """One server for the module, with a static token file."""
    global _server
    if _server is None or _server.proc is None or _server.proc.poll() is not None:
        workdir = tempfile.mkdtemp(prefix="kapiserver-authn-")
        tokens = os.path.join(workdir, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('static-token-1,jane,1001,"dev,ops"\n')
        _server = ServerProcess(extra_config={"authentication": {"token_auth_file": tokens}},
                                workdir=workdir).start()
        atexit.register(_server.cleanup)
    return _server


def https(server: ServerProcess, method: str, path: str, cert: tuple[bytes, bytes] | None = None,
          headers: dict | None = None, body: dict | None = None) -> tuple[int, dict]:
    """A raw HTTPS request to ``server``, with a client certificate (PEM cert, key) if given."""
    context = ssl.create_default_context(cafile=os.path.join(server.workdir, "certs", "ca.crt"))
    if cert is not None:
        directory = tempfile.mkdtemp(dir=server.workdir)
        cert_path, key_path = os.path.join(directory, "c.crt"), os.path.join(directory, "c.key")
        with open(cert_path, "wb") as f:
            f.write(cert[0])
        with open(key_path, "wb") as f:
            f.write(cert[1])
        context.load_cert_chain(cert_path, key_path)
    url = urllib.parse.urlsplit(server.server_url)
    connection = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=30)
    try:
        data = json.dumps(body).encode() if body is not None else None
        connection.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def b64decode_url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class AuthenticationTests(unittest.TestCase):
    def setUp(self) -> None:
        from kubernetes import client
        self.client = client
        self.server = server()
        self.certs = os.path.join(self.server.workdir, "certs")
        self.ca = os.path.join(self.certs, "ca.crt")
        url = urllib.parse.urlsplit(self.server.server_url)
        self.host, self.port = url.hostname, url.port
        self.kubectl = self.server.kubectl
        self.ns = "authn-" + self._testMethodName.replace("_", "-")[5:30].strip("-")
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    # ------------------------------------------------------------ clients

    def api_with_token(self, token: str):
        configuration = self.client.Configuration()
        configuration.host = self.server.server_url
        configuration.ssl_ca_cert = self.ca
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return self.client.ApiClient(configuration)

    def whoami(self, token: str) -> dict:
        api = self.client.AuthenticationV1Api(self.api_with_token(token))
        return api.create_self_subject_review(self.client.V1SelfSubjectReview()).status.user_info.to_dict()

    def refused(self, token: str) -> bool:
        from kubernetes.client.rest import ApiException
        try:
            self.whoami(token)
        except ApiException as e:
            return e.status == 401
        return False

    def https(self, method: str, path: str, cert: tuple[bytes, bytes] | None = None,
              headers: dict | None = None, body: dict | None = None) -> tuple[int, dict]:
        return https(self.server, method, path, cert, headers, body)

    def read(self, name: str) -> bytes:
        with open(os.path.join(self.certs, name), "rb") as f:
            return f.read()

    def front_proxy_whoami(self, cert: tuple[bytes, bytes]) -> tuple[int, dict]:
        headers = {"X-Remote-User": "proxied-user", "X-Remote-Group": "team-a",
                   "X-Remote-Extra-Scopes": "read", "X-Remote-Extra-Acme.com%2Fproject": "p1"}
        return self.https("POST", WHOAMI, cert, headers,
                          {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})

    # ------------------------------------------------------------ tests

    def test_kubectl_create_token_authenticates_the_python_client(self):
        wait_for(lambda: self.kubectl("-n", self.ns, "get", "sa", "default", check=False).returncode == 0)
        token = self.kubectl("-n", self.ns, "create", "token", "default").stdout.strip()
        user = self.whoami(token)
        self.assertEqual(user["username"], f"system:serviceaccount:{self.ns}:default")
        self.assertEqual(user["groups"], ["system:serviceaccounts", f"system:serviceaccounts:{self.ns}",
                                          "system:authenticated"])
        # kubectl with nothing but the token and the CA
        out = self.kubectl("--kubeconfig", os.devnull, "--server", self.server.server_url,
                           "--certificate-authority", self.ca, "--token", token, "auth", "whoami",
                           "-o", "jsonpath={.status.userInfo.username}").stdout
        self.assertEqual(out, f"system:serviceaccount:{self.ns}:default")
        # what the token may do is RBAC's: nothing until the account is bound to a role
        core = self.client.CoreV1Api(self.api_with_token(token))
        with self.assertRaises(self.client.exceptions.ApiException) as denied:
            core.list_namespaced_config_map(self.ns)
        self.assertEqual(denied.exception.status, 403)
        self.kubectl("-n", self.ns, "create", "rolebinding", "default-view", "--clusterrole=view",
                     f"--serviceaccount={self.ns}:default")

        def configmaps() -> list:
            try:
                return [c.metadata.name for c in core.list_namespaced_config_map(self.ns).items]
            except self.client.exceptions.ApiException:
                return []  # the binding reaches the authorizer a moment later
        self.assertIn("kube-root-ca.crt", wait_for(configmaps))

    def test_pod_bound_token_stops_working_when_the_pod_is_deleted(self):
        wait_for(lambda: self.kubectl("-n", self.ns, "get", "sa", "default", check=False).returncode == 0)
        self.kubectl("-n", self.ns, "run", "worker", "--image=busybox", "--restart=Never")
        token = self.kubectl("-n", self.ns, "create", "token", "default", "--bound-object-kind", "Pod",
                             "--bound-object-name", "worker", "--duration", "10m").stdout.strip()
        user = self.whoami(token)
        self.assertEqual(user["extra"]["authentication.kubernetes.io/pod-name"], ["worker"])
        self.kubectl("-n", self.ns, "delete", "pod", "worker", "--wait=false")
        wait_for(lambda: self.refused(token))

    def test_too_short_duration_is_refused(self):
        wait_for(lambda: self.kubectl("-n", self.ns, "get", "sa", "default", check=False).returncode == 0)
        result = self.kubectl("-n", self.ns, "create", "token", "default", "--duration", "1m", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("may not specify a duration less than 10 minutes", result.stderr)

    def test_legacy_token_secret_is_filled_and_works(self):
        self.kubectl("-n", self.ns, "create", "sa", "builder")
        self.kubectl("-n", self.ns, "apply", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "builder-token", "annotations": {"kubernetes.io/service-account.name": "builder"}}}))
        encoded = wait_for(lambda: self.kubectl("-n", self.ns, "get", "secret", "builder-token", "-o",
                                                "jsonpath={.data.token}").stdout)
        token = base64.b64decode(encoded).decode()
        self.assertEqual(self.whoami(token)["username"], f"system:serviceaccount:{self.ns}:builder")
        ca = self.kubectl("-n", self.ns, "get", "secret", "builder-token", "-o", "jsonpath={.data.ca\\.crt}").stdout
        self.assertEqual(base64.b64decode(ca), self.read("ca.crt"))

    def test_static_token_file_users(self):
        self.assertEqual(self.whoami("static-token-1"), {"username": "jane", "uid": "1001",
                                                         "groups": ["dev", "ops", "system:authenticated"],
                                                         "extra": None})
        self.assertTrue(self.refused("static-token-2"))

    def test_front_proxy_headers_name_the_user_only_from_the_front_proxy_certificate(self):
        proxy = (self.read("front-proxy-client.crt"), self.read("front-proxy-client.key"))
        code, body = self.front_proxy_whoami(proxy)
        self.assertEqual(code, 201, body)
        self.assertEqual(body["status"]["userInfo"], {
            "username": "proxied-user", "groups": ["team-a", "system:authenticated"],
            "extra": {"scopes": ["read"], "acme.com/project": ["p1"]}})
        # the same headers from the admin's client certificate mean nothing: it is the admin
        admin = (self.read("admin.crt"), self.read("admin.key"))
        code, body = self.front_proxy_whoami(admin)
        self.assertEqual(body["status"]["userInfo"]["username"], "kapiserver-admin")
        # a client certificate named like the proxy, but from the client CA: itself, headers ignored
        impostor = issue_client_certificate(self.certs, "front-proxy-client")
        code, body = self.front_proxy_whoami(impostor)
        self.assertEqual(body["status"]["userInfo"]["username"], "front-proxy-client")
        # from the front-proxy CA but not an allowed name: neither a proxy nor a client
        stranger = issue_client_certificate(self.certs, "someone-else", ca="front-proxy-ca")
        code, body = self.front_proxy_whoami(stranger)
        self.assertEqual((code, body["reason"]), (401, "Unauthorized"))

    def test_a_client_certificate_without_a_common_name_is_401_not_anonymous(self):
        """Upstream's front-proxy authenticator verifies every certificate against its CA first; a
        client certificate naming no one leaves that error standing: 401, as an unknown token."""
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        nameless = issue_client_certificate(self.certs, "", ["team"])
        code, body = self.https("POST", WHOAMI, nameless, body=review)
        self.assertEqual((code, body["reason"], body["message"]), (401, "Unauthorized", "Unauthorized"))
        code, body = self.https("GET", "/version", nameless)
        self.assertEqual(code, 401)
        # a valid bearer token on the same connection still decides who it is, as upstream's union
        code, body = self.https("POST", WHOAMI, nameless, {"Authorization": "Bearer static-token-1"}, review)
        self.assertEqual((code, body["status"]["userInfo"]["username"]), (201, "jane"))

    def test_bearer_token_in_a_websocket_subprotocol(self):
        """What a browser's WebSocket (which cannot set Authorization) sends: upstream's websocket
        protocol authenticator, for WebSocket upgrades only."""
        token = base64.urlsafe_b64encode(b"static-token-1").rstrip(b"=").decode()
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket",
                   "Sec-WebSocket-Protocol": f"base64url.bearer.authorization.k8s.io.{token}, v4.channel.k8s.io"}
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        code, body = self.https("POST", WHOAMI, headers=upgrade, body=review)
        self.assertEqual((code, body["status"]["userInfo"]["username"]), (201, "jane"))
        # what the request is then is jane's, and not an upgrade the subprotocol means nothing (anonymous)
        path = f"/api/v1/namespaces/{self.ns}/configmaps"
        code, body = self.https("GET", path, headers=upgrade)
        self.assertEqual((code, body["message"]), (403, f'configmaps is forbidden: User "jane" cannot list resource '
                                                        f'"configmaps" in API group "" in the namespace "{self.ns}"'))
        code, body = self.https("GET", path, headers={"Sec-WebSocket-Protocol": upgrade["Sec-WebSocket-Protocol"]})
        self.assertEqual((code, body["message"]), (403, f'configmaps is forbidden: User "system:anonymous" cannot '
                                                        f'list resource "configmaps" in API group "" in the namespace '
                                                        f'"{self.ns}"'))
        # the token alone (nothing to echo back) or an unknown one: 401
        for protocols in (f"base64url.bearer.authorization.k8s.io.{token}",
                          "base64url.bearer.authorization.k8s.io.bm9ib2R5, v4.channel.k8s.io"):
            code, body = self.https("POST", WHOAMI, headers={**upgrade, "Sec-WebSocket-Protocol": protocols},
                                    body=review)
            self.assertEqual((code, body["reason"]), (401, "Unauthorized"), protocols)

    def test_token_review(self):
        wait_for(lambda: self.kubectl("-n", self.ns, "get", "sa", "default", check=False).returncode == 0)
        token = self.kubectl("-n", self.ns, "create", "token", "default", "--audience", "vault").stdout.strip()
        api = self.client.AuthenticationV1Api(self.server.python_client())
        review = api.create_token_review(self.client.V1TokenReview(
            spec=self.client.V1TokenReviewSpec(token=token, audiences=["vault"])))
        self.assertTrue(review.status.authenticated)
        self.assertEqual(review.status.user.username, f"system:serviceaccount:{self.ns}:default")
        self.assertEqual(review.status.audiences, ["vault"])
        review = api.create_token_review(self.client.V1TokenReview(
            spec=self.client.V1TokenReviewSpec(token=token)))
        self.assertFalse(review.status.authenticated)
        self.assertIn("is invalid for the target audiences", review.status.error)

    def test_oidc_discovery_documents_verify_a_token(self):
        wait_for(lambda: self.kubectl("-n", self.ns, "get", "sa", "default", check=False).returncode == 0)
        token = self.kubectl("-n", self.ns, "create", "token", "default").stdout.strip()
        api = self.server.python_client()
        # (the generated client reads these documents as str: take the raw JSON)
        config = json.loads(self.client.WellKnownApi(api).get_service_account_issuer_open_id_configuration(
            _preload_content=False).data)
        self.assertEqual(config["issuer"], "https://kubernetes.default.svc.cluster.local")
        # served at the advertised address, as upstream derives it
        self.assertEqual(config["jwks_uri"], f"https://{TEST_ADVERTISE_ADDRESS}:{self.port}/openid/v1/jwks")
        keys = json.loads(self.client.OpenidApi(api).get_service_account_issuer_open_id_keyset(
            _preload_content=False).data)
        header, payload, signature = token.split(".")
        kid = json.loads(b64decode_url(header))["kid"]
        (jwk,) = [k for k in keys["keys"] if k["kid"] == kid]
        public = rsa.RSAPublicNumbers(int.from_bytes(b64decode_url(jwk["e"]), "big"),
                                      int.from_bytes(b64decode_url(jwk["n"]), "big")).public_key()
        public.verify(b64decode_url(signature), f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())
        self.assertEqual(json.loads(b64decode_url(payload))["iss"], config["issuer"])

    def test_published_trust_and_generated_keys(self):
        data = json.loads(self.kubectl("-n", "kube-system", "get", "cm", "extension-apiserver-authentication",
                                       "-o", "json").stdout)["data"]
        self.assertEqual(data["client-ca-file"].encode(), self.read("ca.crt"))
        self.assertEqual(data["requestheader-client-ca-file"].encode(), self.read("front-proxy-ca.crt"))
        self.assertEqual(data["requestheader-allowed-names"], '["front-proxy-client"]')
        for name in ("sa.key", "front-proxy-ca.key", "front-proxy-client.key"):
            self.assertEqual(os.stat(os.path.join(self.certs, name)).st_mode & 0o777, 0o600, name)

    def test_invalid_token_is_401_without_falling_back(self):
        self.assertTrue(self.refused("not-a-token"))
        code, body = self.https("GET", "/api/v1/namespaces", headers={"Authorization": "Bearer nope"})
        self.assertEqual((code, body["reason"]), (401, "Unauthorized"))


class ClientCABundleTests(unittest.TestCase):
    """``authentication.client_ca_file``: the TLS handshake and the x509 authenticator trust that bundle."""

    def setUp(self) -> None:
        from kapiserver.server.certs import ensure_certificates
        workdir = tempfile.mkdtemp(prefix="kapiserver-clientca-")
        own = ensure_certificates(os.path.join(workdir, "certs"))
        self.team_dir = os.path.join(workdir, "team")
        self.stranger_dir = os.path.join(workdir, "stranger")
        team = ensure_certificates(self.team_dir)
        ensure_certificates(self.stranger_dir)
        bundle = os.path.join(workdir, "client-ca.pem")
        with open(bundle, "wb") as f:
            f.write(own.ca_cert_pem + team.ca_cert_pem)
        self.server = ServerProcess(extra_config={"authentication": {"client_ca_file": bundle}},
                                    workdir=workdir).start()
        self.addCleanup(self.server.cleanup)

    def whoami(self, cert: tuple[bytes, bytes]) -> str:
        code, body = https(self.server, "POST", WHOAMI, cert, body={"apiVersion": "authentication.k8s.io/v1",
                                                                    "kind": "SelfSubjectReview"})
        self.assertEqual(code, 201, body)
        return body["status"]["userInfo"]["username"]

    def test_certificates_of_every_bundled_ca_and_no_other(self):
        self.assertEqual(self.server.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout,
                         "kapiserver-admin")
        self.assertEqual(self.whoami(issue_client_certificate(self.team_dir, "team-user", ["team"])), "team-user")
        with self.assertRaises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            self.whoami(issue_client_certificate(self.stranger_dir, "stranger"))
