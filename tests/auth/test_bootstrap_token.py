"""Bootstrap token authentication against kube-system Secrets, with a clock; and the detached
signature kubeadm's discovery checks (upstream's test vectors)."""
from __future__ import annotations

import base64
import datetime
from typing import Optional

from twisted.internet import defer
from twisted.trial import unittest
from twisted.web.http_headers import Headers

from kapiserver.auth.authenticator import AuthenticationError
from kapiserver.auth.bearertoken import INVALID_TOKEN, BearerTokenAuthenticator, TokenUnion
from kapiserver.auth.bootstrap_token import BootstrapTokenAuthenticator, detached_signature, parse_token
from kapiserver.auth.tokenfile import StaticTokenAuthenticator
from kapiserver.machinery.user import UserInfo

NOW = 1_700_000_000.0
TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"
TOKEN = f"{TOKEN_ID}.{TOKEN_SECRET}"


def rfc3339(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_secret(token_id: str = TOKEN_ID, name: str = "", namespace: str = "kube-system",
                 type_: str = "bootstrap.kubernetes.io/token", **data: str) -> dict:
    values = {"token-id": token_id, "token-secret": TOKEN_SECRET, "usage-bootstrap-authentication": "true", **data}
    return {"metadata": {"name": name or f"bootstrap-token-{token_id}", "namespace": namespace, "uid": "u1"},
            "type": type_,
            "data": {k.replace("_", "-"): base64.b64encode(v.encode()).decode() for k, v in values.items()}}


class Secrets:
    """Secrets by (namespace, name), as the watch cache answers; counts lookups."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict] = {}
        self.lookups = 0

    def put(self, secret: dict) -> None:
        md = secret["metadata"]
        self.objects[(md["namespace"], md["name"])] = secret

    async def get(self, resource: str, namespace: str, name: str) -> Optional[dict]:
        assert resource == "secrets"
        self.lookups += 1
        return self.objects.get((namespace, name))


class BootstrapTokenTests(unittest.TestCase):
    def setUp(self) -> None:
        self.now = NOW
        self.secrets = Secrets()
        self.auth = BootstrapTokenAuthenticator(self.secrets, clock=lambda: self.now)

    def check(self, token: str = TOKEN):
        outcome = self.auth.authenticate_token(token, ())
        return self.successResultOf(outcome) if isinstance(outcome, defer.Deferred) else outcome

    def test_a_valid_token_is_its_bootstrap_user(self) -> None:
        self.secrets.put(token_secret(expiration=rfc3339(NOW + 3600), description="joining node-1"))
        result = self.check()
        self.assertEqual(result.user, UserInfo(name="system:bootstrap:abcdef", groups=("system:bootstrappers",)))

    def test_extra_groups_are_added_sorted_and_each_must_be_a_bootstrappers_group(self) -> None:
        self.secrets.put(token_secret(auth_extra_groups="system:bootstrappers:worker,system:bootstrappers:kubeadm:"
                                                        "default-node-token,system:bootstrappers:worker"))
        self.assertEqual(self.check().user.groups,
                         ("system:bootstrappers", "system:bootstrappers:kubeadm:default-node-token",
                          "system:bootstrappers:worker"))
        for bad in ("system:masters", "system:bootstrappers:", "system:bootstrappers:Upper",
                    "system:bootstrappers:ok,system:nodes"):
            self.secrets.put(token_secret(auth_extra_groups=bad))
            self.assertIsNone(self.check(), bad)

    def test_a_wrong_secret_is_not_recognised(self) -> None:
        self.secrets.put(token_secret())
        self.assertIsNone(self.check(f"{TOKEN_ID}.0123456789abcdee"))
        # the id inside the Secret must be the token's too
        self.secrets.put(token_secret(name="bootstrap-token-abcdef", token_id="zzzzzz"))
        self.assertIsNone(self.check())

    def test_expired_and_unparsable_expirations_are_refused(self) -> None:
        self.secrets.put(token_secret(expiration=rfc3339(NOW + 10)))
        self.assertIsNotNone(self.check())
        self.now = NOW + 10  # expires at that very second
        self.assertIsNone(self.check())
        self.now = NOW
        self.secrets.put(token_secret(expiration="tomorrow"))
        self.assertIsNone(self.check())

    def test_authentication_usage_must_be_exactly_true(self) -> None:
        for usage in ("false", "True", "1", ""):
            self.secrets.put(token_secret(usage_bootstrap_authentication=usage))
            self.assertIsNone(self.check(), usage)

    def test_only_bootstrap_token_secrets_named_after_the_id_in_kube_system_count(self) -> None:
        self.secrets.put(token_secret(type_="Opaque"))
        self.assertIsNone(self.check())
        self.secrets.objects.clear()
        self.secrets.put(token_secret(namespace="default"))
        self.secrets.put(token_secret(name="bootstrap-token-other1"))
        self.assertIsNone(self.check())
        self.assertEqual(self.secrets.lookups, 2)

    def test_a_secret_being_deleted_no_longer_authenticates(self) -> None:
        secret = token_secret()
        secret["metadata"]["deletionTimestamp"] = rfc3339(NOW)
        self.secrets.put(secret)
        self.assertIsNone(self.check())

    def test_tokens_of_another_form_are_left_to_other_authenticators_without_a_lookup(self) -> None:
        self.secrets.put(token_secret())
        for token in ("abcdef:0123456789abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123456789abcdef0",
                      f"{TOKEN}\n", "eyJhbGciOi.eyJpc3Mi.sig"):
            self.assertIsNone(self.auth.authenticate_token(token, ()), token)
        self.assertEqual(self.secrets.lookups, 0)
        self.assertEqual(parse_token(TOKEN), (TOKEN_ID, TOKEN_SECRET))

    def test_a_refused_bootstrap_token_is_a_401_and_does_not_hide_other_token_kinds(self) -> None:
        self.secrets.put(token_secret(expiration=rfc3339(NOW - 1)))
        union = TokenUnion([self.auth, StaticTokenAuthenticator({
            TOKEN: UserInfo(name="static-user")})])
        request = _Request(TOKEN)
        result = BearerTokenAuthenticator(union, ()).authenticate(request)
        self.assertEqual(self.successResultOf(result).user.name, "static-user")
        request = _Request("zzzzzz.0123456789abcdef")
        failure = self.failureResultOf(BearerTokenAuthenticator(TokenUnion([self.auth]), ()).authenticate(request),
                                       AuthenticationError)
        self.assertEqual(str(failure.value), INVALID_TOKEN)


class _Request:
    """What the bearer-token authenticator reads of a request: its Authorization header."""

    def __init__(self, token: str) -> None:
        self.requestHeaders = Headers({b"authorization": [f"Bearer {token}".encode()]})


class DetachedSignatureTests(unittest.TestCase):
    """cluster-bootstrap/token/jws's vectors: kubeadm compares signatures byte for byte."""

    CONTENT = "Hello from the other side. I must have called a thousand times."
    SECRET = "my voice is my passcode"

    def test_upstream_vectors(self) -> None:
        self.assertEqual(detached_signature(self.CONTENT, "joshua", self.SECRET),
                         "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..VShe2taLd-YTrmWuRkcL_8QTNDHYxQIEBsAYYiIj1_8")
        self.assertEqual(detached_signature("", "joshua", self.SECRET),
                         "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..7Ui1ALizW4jXphVUB7xUqC9vLYLL9RZeOFfVLoB7Tgk")
        self.assertEqual(detached_signature(self.CONTENT, "joshua", ""),
                         "eyJhbGciOiJIUzI1NiIsImtpZCI6Impvc2h1YSJ9..UfkqvDGiIFxrMnFseDj9LYJOLNrvjW8aHhF71mvvAs8")
