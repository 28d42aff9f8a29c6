"""Structured JWT authentication (--authentication-config) against an OIDC issuer served on loopback."""
from __future__ import annotations

import json
import os
import time
import uuid

import yaml
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from OpenSSL import crypto
from twisted.internet import reactor, ssl
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.auth import jose, oidc
from kapiserver.auth.authentication_configuration import (AuthenticationConfigurationError,
                                                         parse_authentication_configuration)
from kapiserver.server.certs import ensure_certificates
from kapiserver.testing.apiserver import start_api_server
from kapiserver.testing.cases import run
from kapiserver.testing.client import JSONClient

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


class Issuer(resource.Resource):
    """An OIDC issuer: the discovery document and a key set that tests may change."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.url = ""
        self.keys: list[tuple[str, object]] = []
        self.requests: list[bytes] = []

    def render_GET(self, request: server.Request) -> bytes:
        self.requests.append(request.path)
        request.setHeader(b"content-type", b"application/json")
        if request.path == b"/.well-known/openid-configuration":
            return json.dumps({"issuer": self.url, "jwks_uri": self.url + "/keys"}).encode()
        if request.path == b"/keys":
            return json.dumps({"keys": [jose.jwk(k.public_key(), kid) for kid, k in self.keys]}).encode()
        request.setResponseCode(404)
        return b"{}"

    def sign(self, claims: dict, index: int = 0) -> str:
        kid, key = self.keys[index]
        return jose.sign(claims, key, kid)


AUTH_CONFIG = """
apiVersion: apiserver.config.k8s.io/v1beta1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: {url}
    certificateAuthority: |
{ca}
    audiences: [kapiserver, other]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: 'claims.exp - claims.iat <= 86400'
    message: tokens may live a day at most
  claimMappings:
    username:
      claim: email
      prefix: "oidc:"
    groups:
      expression: 'claims.roles.map(r, "oidc:" + r)'
    uid:
      claim: sub
    extra:
    - key: example.com/tenant
      valueExpression: 'has(claims.tenant) ? claims.tenant : ""'
  userValidationRules:
  - expression: "!user.username.startsWith('oidc:system:')"
    message: no system users from the outside
"""


class OIDCTests(unittest.TestCase):
    @run
    async def setUp(self):
        certs = os.path.abspath(self.mktemp())
        bundle = ensure_certificates(certs)
        self.issuer = Issuer()
        self.issuer.keys = [("k1", rsa.generate_private_key(65537, 2048))]
        options = ssl.CertificateOptions(
            privateKey=crypto.load_privatekey(crypto.FILETYPE_PEM, bundle.serving_key_pem),
            certificate=crypto.load_certificate(crypto.FILETYPE_PEM, bundle.serving_cert_pem))
        self.port = reactor.listenSSL(0, server.Site(self.issuer), options, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.issuer.url = f"https://127.0.0.1:{self.port.getHost().port}"
        config_path = os.path.abspath(self.mktemp())
        ca = "\n".join("      " + line for line in bundle.ca_cert_pem.decode().splitlines())
        with open(config_path, "w") as f:
            f.write(AUTH_CONFIG.format(url=self.issuer.url, ca=ca))
        self.server = await start_api_server(authentication_config_file=config_path)
        self.addCleanup(self.server.stop)
        self.client = JSONClient(self.server.url)
        await self.server.api.authentication.jwt[0].initialized

    def claims(self, **overrides) -> dict:
        now = int(time.time())
        claims = {"iss": self.issuer.url, "aud": ["kapiserver"], "sub": "u-123", "email": "ann@example.com",
                  "email_verified": True, "hd": "example.com", "roles": ["dev", "ops"], "tenant": "blue",
                  "iat": now, "exp": now + 600, "jti": str(uuid.uuid4())}
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    async def review(self, token: str) -> dict:
        reply = await self.client.post(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1",
                                                       "kind": "TokenReview", "spec": {"token": token}})
        self.assertEqual(reply.code, 201, reply.body)
        return reply.body["status"]

    @run
    async def test_claims_are_mapped_to_the_user(self):
        claims = self.claims()
        reply = await self.client.post(WHOAMI, {"apiVersion": "authentication.k8s.io/v1",
                                                "kind": "SelfSubjectReview"},
                                       headers={"Authorization": "Bearer " + self.issuer.sign(claims)})
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["status"]["userInfo"], {
            "username": "oidc:ann@example.com", "uid": "u-123",
            "groups": ["oidc:dev", "oidc:ops", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={claims['jti']}"],
                      "example.com/tenant": ["blue"]}})

    @run
    async def test_refused_tokens_say_why(self):
        cases = [
            (self.claims(exp=int(time.time()) - 5), "oidc: verify token: oidc: token is expired (Token Expiry: "),
            (self.claims(aud=["elsewhere"]),
             'oidc: verify token: oidc: expected audience in ["kapiserver" "other"] got ["elsewhere"]'),
            (self.claims(hd="evil.com"), "oidc: required claim hd value does not match. Got = evil.com, "
                                         "want = example.com"),
            (self.claims(exp=int(time.time()) + 2 * 86400),
             "oidc: error evaluating claim validation expression: validation expression "
             "'claims.exp - claims.iat <= 86400' failed: tokens may live a day at most"),
            (self.claims(email="system:admin"),
             "oidc: error evaluating user info validation rule: validation expression "
             "'!user.username.startsWith('oidc:system:')' failed: no system users from the outside"),
            (self.claims(email_verified=False), "oidc: email not verified"),
            (self.claims(email=None), 'oidc: parse username claims "email": claim not present'),
        ]
        for claims, message in cases:
            status = await self.review(self.issuer.sign(claims))
            self.assertNotIn("authenticated", status, claims)
            self.assertTrue(status["error"].startswith(message), (status["error"], message))
            reply = await self.client.post(WHOAMI, {"apiVersion": "authentication.k8s.io/v1",
                                                    "kind": "SelfSubjectReview"},
                                           headers={"Authorization": "Bearer " + self.issuer.sign(claims)})
            self.assertEqual(reply.code, 401)

    @run
    async def test_signatures(self):
        forged = jose.sign(self.claims(), rsa.generate_private_key(65537, 2048), "k1")
        self.assertEqual((await self.review(forged))["error"], "oidc: verify token: failed to verify signature: "
                                                               "failed to verify id token signature")
        # a key the issuer publishes later is fetched when a token names it
        self.patch(oidc, "KEY_REFRESH_INTERVAL_SECONDS", 0)
        self.issuer.keys.append(("k2", ec.generate_private_key(ec.SECP256R1())))
        status = await self.review(self.issuer.sign(self.claims(), index=1))
        self.assertTrue(status.get("authenticated"), status)
        # another issuer's tokens are not this authenticator's
        other = jose.sign(self.claims(iss="https://127.0.0.1:1"), self.issuer.keys[0][1], "k1")
        self.assertEqual((await self.review(other))["error"], "invalid bearer token")


class UnreachableIssuerTests(unittest.TestCase):
    @run
    async def test_tokens_wait_for_discovery(self):
        config_path = os.path.abspath(self.mktemp())
        with open(config_path, "w") as f:
            yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1beta1", "kind": "AuthenticationConfiguration",
                            "jwt": [{"issuer": {"url": "https://127.0.0.1:9", "audiences": ["a"]},
                                     "claimMappings": {"username": {"claim": "sub", "prefix": ""}}}]}, f)
        api = await start_api_server(authentication_config_file=config_path)
        self.addCleanup(api.stop)
        token = jose.sign({"iss": "https://127.0.0.1:9", "sub": "x", "aud": "a", "exp": time.time() + 60},
                          rsa.generate_private_key(65537, 2048), "k")
        reply = await JSONClient(api.url).post(TOKEN_REVIEWS, {"apiVersion": "authentication.k8s.io/v1",
                                                               "kind": "TokenReview", "spec": {"token": token}})
        self.assertEqual(reply.body["status"]["error"], "oidc: authenticator not initialized")


class ConfigurationFileTests(unittest.TestCase):
    def problem(self, jwt: dict) -> str:
        text = yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1beta1", "kind": "AuthenticationConfiguration",
                               "jwt": [jwt]})
        with self.assertRaises(AuthenticationConfigurationError) as cm:
            parse_authentication_configuration(text, "authn.yaml", ("https://kubernetes.default.svc.cluster.local",))
        return str(cm.exception)

    def test_checked_as_upstream(self) -> None:
        base = {"issuer": {"url": "https://issuer.example", "audiences": ["a"]},
                "claimMappings": {"username": {"claim": "sub", "prefix": ""}}}
        self.assertEqual(self.problem({**base, "issuer": {"url": "http://issuer.example", "audiences": ["a"]}}),
                         "authn.yaml: jwt[0].issuer.url: Invalid value: 'http://issuer.example': must be an https URL")
        self.assertIn("at least one issuer.audiences is required",
                      self.problem({**base, "issuer": {"url": "https://issuer.example"}}))
        self.assertIn("prefix is required when claim is set",
                      self.problem({**base, "claimMappings": {"username": {"claim": "sub"}}}))
        self.assertIn("jwt[0].claimMappings.username.expression: compilation failed",
                      self.problem({**base, "claimMappings": {"username": {"expression": "claims.sub +"}}}))
        self.assertIn("audienceMatchPolicy must be MatchAny for multiple audiences",
                      self.problem({**base, "issuer": {"url": "https://issuer.example", "audiences": ["a", "b"]}}))
        self.assertIn("claims.email_verified must be used",
                      self.problem({**base, "claimMappings": {"username": {"expression": "claims.email"}}}))
        self.assertIn("must not overlap with disallowed issuers",
                      self.problem({**base, "issuer": {"url": "https://kubernetes.default.svc.cluster.local",
                                                       "audiences": ["a"]}}))
