"""JWT authenticators of the structured authentication configuration (OIDC issuers).

For each configured issuer, as upstream's ``plugin/pkg/authenticator/token/oidc``:
the discovery document (``{url}/.well-known/openid-configuration`` or
``discoveryURL``) is fetched over TLS verified with the configured CA, its
``issuer`` must be the configured URL, and its ``jwks_uri`` gives the signing
keys.  Until that succeeded (retried every 10 s) tokens of that issuer are
refused ("oidc: authenticator not initialized").  A token is checked for an
asymmetric signature by one of the issuer's keys (refetched, at most every
10 s, when a token names a key not seen yet), ``exp`` (required; no leeway,
as go-oidc), ``nbf`` (one minute of leeway), an audience among the configured
ones, then mapped to a user by the claim mappings and checked by the
validation rules.  Tokens of other issuers are not recognised, so other
authenticators get them.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Optional

import treq
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from treq.client import HTTPClient
from twisted.internet import defer, ssl
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.client import Agent, BrowserLikePolicyForHTTPS, HTTPConnectionPool
from twisted.web.http_headers import Headers

from kapiserver.auth import jose
from kapiserver.auth.authenticator import AuthenticationError, AuthResult, Outcome
from kapiserver.auth.authentication_configuration import ClaimOrExpression, Expression, JWTAuthenticatorConfig
from kapiserver.machinery.user import CREDENTIAL_ID_KEY, UserInfo

log = Logger()

ALLOWED_ALGORITHMS = ("ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512")
RETRY_SECONDS = 10.0
KEY_REFRESH_INTERVAL_SECONDS = 10.0
FETCH_TIMEOUT_SECONDS = 10.0
MAX_DOCUMENT_BYTES = 1 << 20
NBF_LEEWAY_SECONDS = 60


class DiscoveryError(Exception):
    pass


def _go_strings(values: Any) -> str:
    """Go's %q of a []string."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _go_time(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(seconds))


def _issuer_of(token: str) -> Any:
    parts = token.split(".")
    if len(parts) != 3 or len(token) > jose.MAX_TOKEN_BYTES or token.strip().startswith("{"):
        return None
    try:
        payload = json.loads(jose.b64url_decode(parts[1]))
    except (jose.JOSEError, ValueError):
        return None
    return payload.get("iss") if isinstance(payload, dict) else None


def _evaluate(expression: Expression, variables: dict) -> Any:
    from kapiserver.cel import library  # the Kubernetes CEL library, imported on first use
    try:
        return expression.program.execute(library.new_context(variables))
    except Exception as e:  # the engine raises KeyError, ValueError, RuntimeError... for a failed evaluation
        what = f"no such key: {e.args[0]}" if isinstance(e, KeyError) and e.args else str(e) or type(e).__name__
        raise AuthenticationError(what) from None


def _string_list(value: Any, what: str) -> list[str]:
    """A CEL result that must be a string or a list of strings ("", [] and null are nothing)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v for v in value if v]
    raise AuthenticationError(f"oidc: error evaluating {what}: expression must return a string or a list of strings")


class JWTAuthenticator:
    def __init__(self, config: JWTAuthenticatorConfig, reactor: IReactorTime, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.reactor = reactor
        self.clock = clock
        self.keys: Optional[list[tuple[str, Any]]] = None  # (kid, public key); None until initialized
        self.jwks_uri = ""
        self._timer: Any = None
        self._refreshing: Optional[defer.Deferred] = None
        self._last_refresh = 0.0
        self._client: Optional[HTTPClient] = None
        self._stopped = False
        self._fetching: set[defer.Deferred] = set()
        self.initialized: defer.Deferred = defer.Deferred()

    # ------------------------------------------------------------ discovery

    def start(self) -> None:
        self._timer = self.reactor.callLater(0, self._initialize)

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        for d in list(self._fetching):
            d.cancel()

    def _http(self) -> HTTPClient:
        if self._client is None:
            policy = BrowserLikePolicyForHTTPS()
            if self.config.certificate_authority:
                certs = x509.load_pem_x509_certificates(self.config.certificate_authority.encode())
                policy = BrowserLikePolicyForHTTPS(trustRoot=ssl.trustRootFromCertificates(
                    [ssl.Certificate.loadPEM(c.public_bytes(serialization.Encoding.PEM)) for c in certs]))
            pool = HTTPConnectionPool(self.reactor, persistent=False)
            self._client = HTTPClient(Agent(self.reactor, contextFactory=policy, pool=pool))
        return self._client

    async def _fetch_json(self, url: str) -> dict:
        if self._stopped:
            raise DiscoveryError("stopped")
        d = self._http().get(url, headers=Headers({b"Accept": [b"application/json"]}))
        d.addTimeout(FETCH_TIMEOUT_SECONDS, self.reactor)
        self._fetching.add(d)
        try:
            response = await d
        finally:
            self._fetching.discard(d)
        chunks: list[bytes] = []
        size = [0]

        def collect(data: bytes) -> None:
            size[0] += len(data)
            if size[0] > MAX_DOCUMENT_BYTES:
                raise DiscoveryError(f"{url}: response larger than {MAX_DOCUMENT_BYTES} bytes")
            chunks.append(data)
        await treq.collect(response, collect)
        if response.code != 200:
            raise DiscoveryError(f"{url}: {response.code} {response.phrase.decode('latin-1', 'replace')}")
        try:
            document = json.loads(b"".join(chunks))
        except ValueError:
            raise DiscoveryError(f"{url}: not JSON") from None
        if not isinstance(document, dict):
            raise DiscoveryError(f"{url}: not a JSON object")
        return document

    async def _discover(self) -> None:
        url = self.config.discovery_url or self.config.url.rstrip("/") + "/.well-known/openid-configuration"
        document = await self._fetch_json(url)
        if document.get("issuer") != self.config.url:
            raise DiscoveryError(f"oidc: issuer did not match the issuer returned by provider, expected "
                                 f"{json.dumps(self.config.url)} got {json.dumps(document.get('issuer'))}")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str) or not jwks_uri.startswith("https://"):
            raise DiscoveryError(f"{url}: no https jwks_uri")
        self.jwks_uri = jwks_uri
        await self._load_keys()

    async def _load_keys(self) -> None:
        self._last_refresh = self.clock()
        document = await self._fetch_json(self.jwks_uri)
        keys: list[tuple[str, Any]] = []
        for entry in document.get("keys") or []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            kid = entry.get("kid")
            try:
                keys.append((kid if isinstance(kid, str) else "", jose.public_key_from_jwk(entry)))
            except jose.JOSEError as e:
                log.info("oidc issuer {url}: skipping a key: {err}", url=self.config.url, err=e)
        self.keys = keys

    def _initialize(self) -> None:
        self._timer = None
        d = defer.Deferred.fromCoroutine(self._discover())

        def failed(failure: Any) -> None:
            if self._stopped:
                return
            log.warn("oidc issuer {url}: discovery failed, retrying in {s:.0f}s: {err}", url=self.config.url,
                     s=RETRY_SECONDS, err=failure.getErrorMessage())
            if not self._stopped:
                self._timer = self.reactor.callLater(RETRY_SECONDS, self._initialize)

        def done(_: Any) -> None:
            log.info("oidc issuer {url}: ready with {n} keys", url=self.config.url, n=len(self.keys or ()))
            if not self.initialized.called:
                self.initialized.callback(None)
        d.addCallbacks(done, failed)

    def _refresh_keys(self) -> defer.Deferred:
        """One key refresh at a time; callers share it."""
        if self._refreshing is None:
            self._refreshing = defer.Deferred.fromCoroutine(self._load_keys())

            def finished(result: Any) -> None:
                self._refreshing = None
                if isinstance(result, Failure):
                    log.info("oidc issuer {url}: refreshing keys failed: {err}", url=self.config.url,
                             err=result.getErrorMessage())
            self._refreshing.addBoth(finished)
        waiting: defer.Deferred = defer.Deferred()

        def release(result: Any) -> Any:
            waiting.callback(None)
            return result
        self._refreshing.addBoth(release)
        return waiting

    # ------------------------------------------------------------ tokens

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        if _issuer_of(token) != self.config.url:
            return None
        if self.keys is None:
            raise AuthenticationError("oidc: authenticator not initialized")
        try:
            jws = jose.parse(token)
        except jose.JOSEError as e:
            raise AuthenticationError(f"oidc: verify token: oidc: malformed jwt: {e}") from None
        alg = jws.header.get("alg")
        if alg not in ALLOWED_ALGORITHMS:
            raise AuthenticationError(f"oidc: verify token: oidc: id token signed with unsupported algorithm, "
                                      f"expected {_go_strings(ALLOWED_ALGORITHMS)} got {json.dumps(alg)}")
        if self._verified(jws):
            return self._user(jws.claims())
        if self.clock() - self._last_refresh < KEY_REFRESH_INTERVAL_SECONDS:
            raise self._bad_signature()

        def retry(_: Any) -> AuthResult:
            if not self._verified(jws):
                raise self._bad_signature()
            return self._user(jws.claims())
        return self._refresh_keys().addCallback(retry)

    @staticmethod
    def _bad_signature() -> AuthenticationError:
        return AuthenticationError("oidc: verify token: failed to verify signature: failed to verify id token "
                                   "signature")

    def _verified(self, jws: jose.JWS) -> bool:
        for kid, key in self.keys or ():
            if jws.kid and kid and kid != jws.kid:
                continue
            try:
                jose.verify(jws, key)
                return True
            except jose.JOSEError:
                continue
        return False

    def _user(self, claims: dict) -> AuthResult:
        config = self.config
        now = self.clock()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, (int, float)) or isinstance(exp, bool) or exp < now:
            shown = _go_time(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else \
                "0001-01-01 00:00:00 +0000 UTC"
            raise AuthenticationError(f"oidc: verify token: oidc: token is expired (Token Expiry: {shown})")
        if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and now + NBF_LEEWAY_SECONDS < nbf:
            raise AuthenticationError(f"oidc: verify token: oidc: current time {_go_time(now)} before the nbf "
                                      f"(not before) time: {_go_time(nbf)}")
        aud = claims.get("aud")
        token_audiences = [aud] if isinstance(aud, str) else [a for a in aud if isinstance(a, str)] \
            if isinstance(aud, list) else []
        if not set(token_audiences) & set(config.audiences):
            if len(config.audiences) == 1:
                raise AuthenticationError(f"oidc: verify token: oidc: expected audience "
                                          f"{json.dumps(config.audiences[0])} got {_go_strings(token_audiences)}")
            raise AuthenticationError(f"oidc: verify token: oidc: expected audience in "
                                      f"{_go_strings(sorted(config.audiences))} got {_go_strings(token_audiences)}")
        variables = {"claims": claims}
        name = self._username(claims, variables)
        groups = self._groups(claims, variables)
        uid = self._uid(claims, variables)
        extra: dict[str, tuple[str, ...]] = {}
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra[CREDENTIAL_ID_KEY] = (f"JTI={jti}",)
        for mapping in config.extra:
            try:
                values = _string_list(_evaluate(mapping.value_expression, variables), "extra claim expression")
            except AuthenticationError as e:
                raise AuthenticationError(f"oidc: error evaluating extra claim expression: "
                                          f"{mapping.value_expression.source}: {e}") from None
            if values:
                extra[mapping.key] = tuple(values)
        for rule in config.claim_validation_rules:
            if rule.expression is None:
                if rule.claim not in claims:
                    raise AuthenticationError(f"oidc: required claim {rule.claim} not present in ID token")
                value = claims[rule.claim]
                if not isinstance(value, str):
                    raise AuthenticationError(f"oidc: parse claim {rule.claim}: json: cannot unmarshal "
                                              f"{_json_kind(value)} into Go value of type string")
                if value != rule.required_value:
                    raise AuthenticationError(f"oidc: required claim {rule.claim} value does not match. Got = "
                                              f"{value}, want = {rule.required_value}")
            else:
                self._check(rule.expression, rule.message, variables, "claim validation expression")
        user = UserInfo(name=name, groups=tuple(groups), uid=uid, extra=extra)
        if config.user_validation_rules:
            user_variables = {"user": {"username": name, "uid": uid, "groups": list(groups),
                                       "extra": {k: list(v) for k, v in extra.items()}}}
            for user_rule in config.user_validation_rules:
                self._check(user_rule.expression, user_rule.message, user_variables, "user info validation rule")
        return AuthResult(user)

    @staticmethod
    def _check(expression: Expression, message: str, variables: dict, what: str) -> None:
        try:
            result = _evaluate(expression, variables)
        except AuthenticationError as e:
            raise AuthenticationError(f"oidc: error evaluating {what}: {e}") from None
        if not isinstance(result, bool):
            raise AuthenticationError(f"oidc: error evaluating {what}: validation expression must return a boolean")
        if not result:
            raise AuthenticationError(f"oidc: error evaluating {what}: validation expression "
                                      f"'{expression.source}' failed: {message}")

    def _username(self, claims: dict, variables: dict) -> str:
        mapping = self.config.username
        if mapping.expression is not None:
            try:
                value = _evaluate(mapping.expression, variables)
            except AuthenticationError as e:
                raise AuthenticationError(f"oidc: error evaluating username claim expression: {e}") from None
            if not isinstance(value, str):
                raise AuthenticationError("oidc: error evaluating username claim expression: username claim "
                                          "expression must return a string")
            if not value:
                raise AuthenticationError("oidc: empty username via CEL expression is not allowed")
            return value
        value = _claim_string(claims, mapping.claim, "username claims")
        if mapping.claim == "email" and "email_verified" in claims:
            verified = claims["email_verified"]
            if not isinstance(verified, bool):
                raise AuthenticationError("oidc: parse 'email_verified' claim: json: cannot unmarshal "
                                          f"{_json_kind(verified)} into Go value of type bool")
            if not verified:
                raise AuthenticationError("oidc: email not verified")
        return (mapping.prefix or "") + value

    def _groups(self, claims: dict, variables: dict) -> list[str]:
        mapping: ClaimOrExpression = self.config.groups
        if mapping.claim:
            if mapping.claim not in claims:
                return []
            value = claims[mapping.claim]
            if isinstance(value, str):
                values = [value]
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                values = list(value)
            else:
                raise AuthenticationError(f'oidc: parse groups claim "{mapping.claim}": json: cannot unmarshal '
                                          f"{_json_kind(value)} into Go value of type string")
            return [(mapping.prefix or "") + v for v in values]
        if mapping.expression is None:
            return []
        try:
            return _string_list(_evaluate(mapping.expression, variables), "group claim expression")
        except AuthenticationError as e:
            text = str(e)
            raise AuthenticationError(text if text.startswith("oidc:") else
                                      f"oidc: error evaluating group claim expression: {text}") from None

    def _uid(self, claims: dict, variables: dict) -> str:
        mapping = self.config.uid
        if mapping.claim:
            return _claim_string(claims, mapping.claim, "uid claim")
        if mapping.expression is None:
            return ""
        try:
            value = _evaluate(mapping.expression, variables)
        except AuthenticationError as e:
            raise AuthenticationError(f"oidc: error evaluating uid claim expression: {e}") from None
        if not isinstance(value, str):
            raise AuthenticationError("oidc: error evaluating uid claim expression: uid claim expression must "
                                      "return a string")
        return value


def _json_kind(value: Any) -> str:
    return {bool: "bool", str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "number")


def _claim_string(claims: dict, claim: str, what: str) -> str:
    if claim not in claims:
        raise AuthenticationError(f'oidc: parse {what} "{claim}": claim not present')
    value = claims[claim]
    if not isinstance(value, str):
        raise AuthenticationError(f'oidc: parse {what} "{claim}": json: cannot unmarshal {_json_kind(value)} '
                                  f"into Go value of type string")
    return value
