"""ServiceAccount token validation at the authenticator, with a clock: expiry, audiences, bound objects."""
from __future__ import annotations

import base64
from typing import Optional

from cryptography.hazmat.primitives.asymmetric import rsa
from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.auth.authenticator import AuthenticationError
from kapiserver.auth.serviceaccount import (LEGACY_INVALID_SINCE_LABEL, LEGACY_ISSUER, BoundTokenValidator,
                                            JWTTokenAuthenticator, LegacyTokenValidator, SigningKey, TokenSigner,
                                            bound_claims, legacy_claims, verification_keys)

ISSUER = "https://kubernetes.default.svc.cluster.local"
API = (ISSUER,)
NOW = 1_700_000_000
KEY = rsa.generate_private_key(65537, 2048)


def obj(name: str, uid: str, namespace: str = "team", **extra) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid, **extra.pop("metadata", {})}, **extra}


class FakeGetter:
    """Objects by resource and (namespace, name), as the watch cache would answer."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict] = {}
        self.marked: list[tuple[str, str, str]] = []

    def put(self, resource: str, o: dict) -> None:
        self.objects[(resource, o["metadata"].get("namespace", ""), o["metadata"]["name"])] = o

    async def get(self, resource: str, namespace: str, name: str) -> Optional[dict]:
        return self.objects.get((resource, namespace, name))

    async def mark_legacy_token_used(self, namespace: str, name: str, uid: str, day: str) -> None:
        self.marked.append((namespace, name, day))


class BoundTokenTests(unittest.TestCase):
    def setUp(self) -> None:
        self.now = float(NOW)
        self.getter = FakeGetter()
        self.sa = obj("builder", "sa-uid")
        self.pod = obj("runner", "pod-uid", spec={"serviceAccountName": "builder"})
        self.getter.put("serviceaccounts", self.sa)
        self.getter.put("pods", self.pod)
        self.signer = TokenSigner(ISSUER, SigningKey(lambda: KEY))
        self.auth = JWTTokenAuthenticator([ISSUER], verification_keys([KEY.public_key()]), API,
                                          BoundTokenValidator(self.getter, clock=lambda: self.now))

    def token(self, audiences=API, seconds: int = 600, **bound) -> str:
        return self.signer.sign(bound_claims(self.sa, list(audiences), seconds, NOW, **bound))

    def check(self, token: str, audiences=API):
        outcome = self.auth.authenticate_token(token, tuple(audiences))
        return self.successResultOf(outcome) if isinstance(outcome, defer.Deferred) else outcome

    def refused(self, token: str, audiences=API) -> str:
        try:
            outcome = self.auth.authenticate_token(token, tuple(audiences))
        except AuthenticationError as e:
            return str(e)
        return str(self.failureResultOf(outcome, AuthenticationError).value)

    def test_pod_bound_token_names_the_service_account_and_pod(self) -> None:
        result = self.check(self.token(pod=self.pod))
        self.assertEqual(result.user.name, "system:serviceaccount:team:builder")
        self.assertEqual(result.user.groups, ("system:serviceaccounts", "system:serviceaccounts:team"))
        self.assertEqual(result.user.uid, "sa-uid")
        self.assertEqual(result.user.extra["authentication.kubernetes.io/pod-name"], ("runner",))
        self.assertEqual(result.user.extra["authentication.kubernetes.io/pod-uid"], ("pod-uid",))
        self.assertTrue(result.user.extra["authentication.kubernetes.io/credential-id"][0].startswith("JTI="))
        self.assertEqual(result.audiences, API)

    def test_expiry_with_one_minute_of_leeway(self) -> None:
        token = self.token(seconds=600)
        self.now = NOW + 600 + 59
        self.assertIsNotNone(self.check(token))
        self.now = NOW + 600 + 61
        self.assertEqual(self.refused(token), "service account token has expired")

    def test_not_yet_valid(self) -> None:
        token = self.token()
        self.now = NOW - 120
        self.assertEqual(self.refused(token), "service account token is not valid yet")

    def test_audiences(self) -> None:
        token = self.token(audiences=("vault", "other"))
        self.assertEqual(self.refused(token), 'token audiences ["vault" "other"] is invalid for the target '
                                              'audiences ["https://kubernetes.default.svc.cluster.local"]')
        self.assertEqual(self.check(token, audiences=("vault",)).audiences, ("vault",))

    def test_recreated_service_account_invalidates(self) -> None:
        token = self.token()
        self.getter.put("serviceaccounts", obj("builder", "new-uid"))
        self.assertEqual(self.refused(token), "service account UID (new-uid) does not match claim (sa-uid)")
        del self.getter.objects[("serviceaccounts", "team", "builder")]
        self.assertEqual(self.refused(token), 'serviceaccounts "builder" not found')

    def test_deleted_or_replaced_pod_invalidates(self) -> None:
        token = self.token(pod=self.pod)
        self.getter.put("pods", obj("runner", "other-pod"))
        self.assertEqual(self.refused(token),
                         "pod UID (other-pod) does not match service account pod ref claim (pod-uid)")
        del self.getter.objects[("pods", "team", "runner")]
        self.assertEqual(self.refused(token), "service account token has been invalidated")

    def test_pod_being_deleted_counts_after_the_leeway(self) -> None:
        token = self.token(pod=self.pod)
        self.getter.put("pods", obj("runner", "pod-uid", metadata={"deletionTimestamp": "2023-11-14T22:13:00Z"}))
        self.now = NOW + 30  # deleted 50 s before
        self.assertIsNotNone(self.check(token))
        self.now = NOW + 200
        self.assertEqual(self.refused(token), "service account token has been invalidated")

    def test_secret_and_node_bound_tokens(self) -> None:
        secret = obj("s", "secret-uid")
        node = obj("n1", "node-uid", namespace="")
        self.getter.put("secrets", secret)
        self.getter.put("nodes", node)
        self.assertIsNotNone(self.check(self.token(secret=secret)))
        result = self.check(self.token(node=node))
        self.assertEqual(result.user.extra["authentication.kubernetes.io/node-name"], ("n1",))
        self.assertEqual(result.user.extra["authentication.kubernetes.io/node-uid"], ("node-uid",))
        del self.getter.objects[("nodes", "", "n1")]
        self.assertEqual(self.refused(self.token(node=node)), "service account token has been invalidated")

    def test_foreign_issuer_is_not_recognised_and_foreign_key_is_refused(self) -> None:
        other = TokenSigner("https://elsewhere.example", SigningKey(lambda: KEY))
        self.assertIsNone(self.auth.authenticate_token(other.sign({"sub": "x"}), API))
        forged = TokenSigner(ISSUER, SigningKey(lambda: rsa.generate_private_key(65537, 2048)))
        self.assertEqual(self.refused(forged.sign(bound_claims(self.sa, list(API), 600, NOW))),
                         "invalid signature, no keys found")


class LegacyTokenTests(unittest.TestCase):
    def setUp(self) -> None:
        self.getter = FakeGetter()
        self.sa = obj("builder", "sa-uid")
        self.getter.put("serviceaccounts", self.sa)
        self.secret = obj("builder-token", "secret-uid", type="kubernetes.io/service-account-token")
        self.token = TokenSigner(LEGACY_ISSUER, SigningKey(lambda: KEY)).sign(legacy_claims(self.sa, self.secret))
        self.secret["data"] = {"token": base64.b64encode(self.token.encode()).decode()}
        self.getter.put("secrets", self.secret)
        self.auth = JWTTokenAuthenticator([LEGACY_ISSUER], verification_keys([KEY.public_key()]), API,
                                          LegacyTokenValidator(self.getter, clock=lambda: float(NOW)))

    def result(self):
        return self.auth.authenticate_token(self.token, API)

    def test_valid_while_the_secret_holds_it(self) -> None:
        result = self.successResultOf(self.result())
        self.assertEqual((result.user.name, result.user.uid), ("system:serviceaccount:team:builder", "sa-uid"))
        self.assertEqual(self.getter.marked, [("team", "builder-token", "2023-11-14")])

    def test_changed_or_deleted_secret_invalidates(self) -> None:
        self.secret["data"]["token"] = base64.b64encode(b"other").decode()
        self.assertEqual(str(self.failureResultOf(self.result()).value), "Token does not match server's copy")
        del self.getter.objects[("secrets", "team", "builder-token")]
        self.assertEqual(str(self.failureResultOf(self.result()).value), "Token has been invalidated")

    def test_marked_invalid(self) -> None:
        self.secret["metadata"]["labels"] = {LEGACY_INVALID_SINCE_LABEL: "2023-01-01"}
        self.assertIn("has been marked invalid", str(self.failureResultOf(self.result()).value))
