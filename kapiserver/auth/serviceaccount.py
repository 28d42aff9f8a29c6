"""ServiceAccount tokens: signed JWTs naming a ServiceAccount, issued and checked here.

Two kinds, as upstream (pkg/serviceaccount):

* bound tokens (TokenRequest, ``kubectl create token``): issuer
  ``authentication.service_account.issuers[0]``, an audience list, ``exp``,
  ``iat``, ``nbf``, ``jti`` and the private ``kubernetes.io`` claim naming the
  namespace, the ServiceAccount and the object the token is bound to (a Pod,
  Secret or Node, each with its uid).  A bound token is valid while it has not
  expired (one minute of leeway, as go-jose), its audiences meet the ones it is
  presented to, and the ServiceAccount and bound object still exist with the
  same uids;
* legacy tokens (Secrets of type ``kubernetes.io/service-account-token``,
  filled by the tokens controller): issuer ``kubernetes/serviceaccount``, no
  expiry, valid while the Secret holds exactly that token and the
  ServiceAccount exists with the same uid.

The user is ``system:serviceaccount:<ns>:<name>`` in ``system:serviceaccounts``
and ``system:serviceaccounts:<ns>``, with upstream's extras (credential id
``JTI=<jti>``, pod name/uid, node name/uid).  Objects are looked up through the
watch cache, falling back to storage when the cache has not seen them yet (an
informer lister with a live fallback, as upstream's token getter).
"""
from __future__ import annotations

import base64
import datetime
import functools
import hmac
import json
import time
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Protocol, Sequence, overload

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.auth import jose
from kapiserver.auth.authenticator import AuthenticationError, AuthResult, Outcome
from kapiserver.auth.private_key import InvalidKeyError, load_private_key
from kapiserver.machinery.user import CREDENTIAL_ID_KEY, UserInfo
from kapiserver.machinery import errors, validation
from kapiserver.machinery.meta import new_uid

if TYPE_CHECKING:
    from kapiserver.registry.store import Store

log = Logger()

USER_PREFIX = "system:serviceaccount:"
ALL_GROUP = "system:serviceaccounts"
GROUP_PREFIX = "system:serviceaccounts:"
LEGACY_ISSUER = "kubernetes/serviceaccount"
POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
NODE_UID_KEY = "authentication.kubernetes.io/node-uid"
# kubelet's projected-token default: such pod-bound tokens may be extended to a year (warnafter)
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 60 * 60 + 7
EXPIRATION_EXTENSION_SECONDS = 24 * 365 * 60 * 60
# go-jose's DefaultLeeway for exp/nbf/iat, and for "deleted before now"
LEEWAY_SECONDS = 60
LEGACY_INVALID_SINCE_LABEL = "kubernetes.io/legacy-token-invalid-since"
LEGACY_LAST_USED_LABEL = "kubernetes.io/legacy-token-last-used"
_LEGACY = "kubernetes.io/serviceaccount/"


def username(namespace: str, name: str) -> str:
    return f"{USER_PREFIX}{namespace}:{name}"


def split_username(name: str) -> Optional[tuple[str, str]]:
    """(namespace, name) of ``system:serviceaccount:<ns>:<name>`` when both are valid names
    (upstream's serviceaccount.SplitUsername); None for any other user name."""
    if not name.startswith(USER_PREFIX):
        return None
    parts = name[len(USER_PREFIX):].split(":")
    if len(parts) != 2:
        return None
    namespace, account = parts
    if validation.is_dns1123_label(namespace) or validation.is_dns1123_subdomain(account):
        return None
    return namespace, account


def service_account_user(namespace: str, name: str, uid: str, pod_name: str = "", pod_uid: str = "",
                         node_name: str = "", node_uid: str = "", credential_id: str = "") -> UserInfo:
    """The user of a ServiceAccount token (upstream's ServiceAccountInfo.UserInfo)."""
    extra: dict[str, tuple[str, ...]] = {}
    if pod_name and pod_uid:
        extra[POD_NAME_KEY], extra[POD_UID_KEY] = (pod_name,), (pod_uid,)
    if credential_id:
        extra[CREDENTIAL_ID_KEY] = (credential_id,)
    if node_name:
        extra[NODE_NAME_KEY] = (node_name,)
        if node_uid:
            extra[NODE_UID_KEY] = (node_uid,)
    return UserInfo(name=username(namespace, name), groups=(ALL_GROUP, GROUP_PREFIX + namespace), uid=uid,
                    extra=extra)


# ------------------------------------------------------------------ keys and signing

class VerificationKey(NamedTuple):
    key: Any  # a public key (jose.PublicKey)
    kid: str


def verification_keys(public_keys: list[Any]) -> list[VerificationKey]:
    """Each distinct key once, with upstream's key ID."""
    out: list[VerificationKey] = []
    for key in public_keys:
        kid = jose.key_id(key)
        if all(k.kid != kid for k in out):
            out.append(VerificationKey(key, kid))
    return out


class LazyVerificationKeys(Sequence[VerificationKey]):
    """:func:`verification_keys` of ``public_keys()``, worked out when a token is first verified
    or the key set published (a start need not parse the signing key: :class:`SigningKey`)."""

    def __init__(self, public_keys: Callable[[], list[Any]]) -> None:
        self._public_keys = public_keys

    @functools.cached_property
    def _keys(self) -> list[VerificationKey]:
        return verification_keys(self._public_keys())

    @overload
    def __getitem__(self, index: int) -> VerificationKey: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[VerificationKey]: ...

    def __getitem__(self, index: int | slice) -> VerificationKey | Sequence[VerificationKey]:
        return self._keys[index]

    def __len__(self) -> int:
        return len(self._keys)


class SigningKeyError(ValueError):
    """Why PEM bytes are no service-account signing key (one line)."""


def load_signing_key(pem: bytes) -> Any:
    """The service-account signing key in ``pem``: an unencrypted RSA key whose numbers agree,
    or an ECDSA P-256/384/521 key; :class:`SigningKeyError` otherwise."""
    try:
        key = load_private_key(pem)
    except InvalidKeyError as e:
        raise SigningKeyError(str(e)) from None
    except (ValueError, TypeError):
        raise SigningKeyError("not an unencrypted PEM private key") from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise SigningKeyError("the service-account signing key must be RSA or ECDSA")
    try:
        jose.algorithm_for(key.public_key())
    except jose.JOSEError as e:
        raise SigningKeyError(str(e)) from None
    return key


class SigningKey:
    """The service-account signing key, parsed by ``load`` when first used: a restart whose key
    an earlier start checked (cert_dir/.checked.json) pages in none of cryptography's key code
    (0.7 MiB resident: bench/README.md) until a token is signed or verified."""

    def __init__(self, load: Callable[[], Any]) -> None:
        self._load = load

    @functools.cached_property
    def private_key(self) -> Any:
        return self._load()

    @functools.cached_property
    def kid(self) -> str:
        return jose.key_id(self.private_key.public_key())


class TokenSigner:
    """Signs claims as ``issuer`` with the service-account signing key (upstream's TokenGenerator)."""

    def __init__(self, issuer: str, key: SigningKey) -> None:
        self.issuer = issuer
        self.key = key

    def sign(self, claims: dict) -> str:
        return jose.sign({**claims, "iss": self.issuer}, self.key.private_key, self.key.kid)


def _ref(obj: Optional[dict]) -> Optional[dict]:
    if obj is None:
        return None
    md = obj.get("metadata") or {}
    return {k: v for k, v in (("name", md.get("name", "")), ("uid", md.get("uid", ""))) if v}


def bound_claims(sa: dict, audiences: list[str], expiration_seconds: int, now: int, pod: Optional[dict] = None,
                 secret: Optional[dict] = None, node: Optional[dict] = None, warn_after_seconds: int = 0) -> dict:
    """The claims of a bound token (upstream's serviceaccount.Claims); ``iss`` is the signer's."""
    md = sa["metadata"]
    private: dict = {"namespace": md["namespace"], "serviceaccount": _ref(sa)}
    if pod is not None:
        private["pod"] = _ref(pod)
        if node is not None:
            private["node"] = _ref(node)
    elif secret is not None:
        private["secret"] = _ref(secret)
    elif node is not None:
        private["node"] = _ref(node)
    if warn_after_seconds:
        private["warnafter"] = now + warn_after_seconds
    claims = {"sub": username(md["namespace"], md["name"]), "iat": now, "nbf": now,
              "exp": now + expiration_seconds, "jti": new_uid(), "kubernetes.io": private}
    if audiences:
        claims["aud"] = list(audiences)
    return claims


def legacy_claims(sa: dict, secret: dict) -> dict:
    """The claims of a Secret-based token (upstream's LegacyClaims); ``iss`` is ``kubernetes/serviceaccount``."""
    md = sa["metadata"]
    return {"sub": username(md["namespace"], md["name"]),
            _LEGACY + "namespace": md["namespace"],
            _LEGACY + "secret.name": secret["metadata"]["name"],
            _LEGACY + "service-account.name": md["name"],
            _LEGACY + "service-account.uid": md.get("uid", "")}


# ------------------------------------------------------------------ looking objects up

class ObjectLookup(Protocol):
    async def get(self, resource: str, namespace: str, name: str) -> Optional[dict]:
        """The core/v1 object (``serviceaccounts``, ``pods``, ``secrets``, ``nodes``), or None if absent."""


class ObjectGetter(ObjectLookup, Protocol):
    """Lookups, and the one write legacy tokens need."""

    async def mark_legacy_token_used(self, namespace: str, name: str, uid: str, day: str) -> None: ...


class StoreObjectGetter:
    """Looks objects up through the watch cache, then (cache miss) storage itself."""

    def __init__(self, store: Callable[[str, str, str], "Store"]) -> None:
        self.store = store

    async def get(self, resource: str, namespace: str, name: str) -> Optional[dict]:
        store = self.store("", "v1", resource)
        for resource_version in ("0", ""):
            try:
                return await store.get(namespace, name, resource_version)
            except errors.StatusError as e:
                if e.code != 404:
                    raise AuthenticationError(f"looking up {resource} {namespace}/{name} failed: {e}") from None
        return None

    async def mark_legacy_token_used(self, namespace: str, name: str, uid: str, day: str) -> None:
        store = self.store("", "v1", "secrets")

        def label(current: Optional[dict]) -> dict:
            if current is None or current["metadata"].get("uid") != uid:
                raise errors.StatusError(409, "Conflict", "the secret changed")
            current["metadata"].setdefault("labels", {})[LEGACY_LAST_USED_LABEL] = day
            return current
        await store.guaranteed_update(namespace, name, label)


def _is_deleted_before(obj: dict, instant: float) -> bool:
    stamp = (obj.get("metadata") or {}).get("deletionTimestamp")
    if not isinstance(stamp, str):
        return False
    try:
        when = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return False
    return when < instant


def _uid(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("uid", "")


def _not_found(resource: str, name: str) -> AuthenticationError:
    return AuthenticationError(f'{resource} "{name}" not found')


# ------------------------------------------------------------------ validators

class BoundTokenValidator:
    """Checks the time claims and that what the token names still exists (upstream's validator)."""

    def __init__(self, getter: ObjectGetter, clock: Callable[[], float] = time.time) -> None:
        self.getter = getter
        self.clock = clock

    async def validate(self, token: str, claims: dict) -> UserInfo:
        now = self.clock()
        exp, nbf, iat = (_numeric(claims, k) for k in ("exp", "nbf", "iat"))
        if nbf is not None and now + LEEWAY_SECONDS < nbf:
            raise AuthenticationError("service account token is not valid yet")
        if exp is not None and now - LEEWAY_SECONDS > exp:
            raise AuthenticationError("service account token has expired")
        if iat is not None and now + LEEWAY_SECONDS < iat:
            raise AuthenticationError("service account token is issued in the future")
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            raise AuthenticationError("service account token claims could not be validated")
        namespace = _string(private, "namespace")
        sa_ref, pod_ref, secret_ref, node_ref = (_object_ref(private, k)
                                                 for k in ("serviceaccount", "pod", "secret", "node"))
        if sa_ref is None:
            raise AuthenticationError("service account token claims could not be validated")
        deleted_before = now - LEEWAY_SECONDS
        sa = await self.getter.get("serviceaccounts", namespace, sa_ref[0])
        if sa is None:
            raise _not_found("serviceaccounts", sa_ref[0])
        if _uid(sa) != sa_ref[1]:
            raise AuthenticationError(f"service account UID ({_uid(sa)}) does not match claim ({sa_ref[1]})")
        if _is_deleted_before(sa, deleted_before):
            raise AuthenticationError(f"service account {namespace}/{sa_ref[0]} has been deleted")
        if secret_ref is not None:
            await self._check_bound("secrets", "secret", namespace, secret_ref, deleted_before)
        pod_name = pod_uid = node_name = node_uid = ""
        if pod_ref is not None:
            await self._check_bound("pods", "pod", namespace, pod_ref, deleted_before)
            pod_name, pod_uid = pod_ref
            if node_ref is not None:  # the node the pod ran on: informational
                node_name, node_uid = node_ref
        elif node_ref is not None:
            await self._check_bound("nodes", "node", "", node_ref, deleted_before)
            node_name, node_uid = node_ref
        jti = claims.get("jti")
        return service_account_user(namespace, sa_ref[0], sa_ref[1], pod_name, pod_uid, node_name, node_uid,
                                    f"JTI={jti}" if isinstance(jti, str) and jti else "")

    async def _check_bound(self, resource: str, kind: str, namespace: str, ref: tuple[str, str],
                           deleted_before: float) -> None:
        obj = await self.getter.get(resource, namespace, ref[0])
        if obj is None:
            raise AuthenticationError("service account token has been invalidated")
        if _uid(obj) != ref[1]:
            raise AuthenticationError(f"{kind} UID ({_uid(obj)}) does not match service account {kind} ref "
                                      f"claim ({ref[1]})")
        if _is_deleted_before(obj, deleted_before):
            raise AuthenticationError("service account token has been invalidated")


class LegacyTokenValidator:
    """Checks a Secret-based token against its Secret and ServiceAccount (upstream's legacy validator)."""

    def __init__(self, getter: ObjectGetter, lookup: bool = True, clock: Callable[[], float] = time.time) -> None:
        self.getter = getter
        self.lookup = lookup
        self.clock = clock

    async def validate(self, token: str, claims: dict) -> UserInfo:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError("sub claim is missing")
        values = {}
        for claim, what in (("namespace", "namespace"), ("secret.name", "secretName"),
                            ("service-account.name", "serviceAccountName"),
                            ("service-account.uid", "serviceAccountUID")):
            value = claims.get(_LEGACY + claim)
            if not isinstance(value, str) or not value:
                raise AuthenticationError(f"{what} claim is missing")
            values[claim] = value
        namespace, secret_name = values["namespace"], values["secret.name"]
        name, uid = values["service-account.name"], values["service-account.uid"]
        if subject != username(namespace, name) or ":" in name or ":" in namespace:
            raise AuthenticationError("sub claim is invalid")
        if self.lookup:
            secret = await self.getter.get("secrets", namespace, secret_name)
            if secret is None or (secret.get("metadata") or {}).get("deletionTimestamp"):
                raise AuthenticationError("Token has been invalidated")
            stored = _decoded((secret.get("data") or {}).get("token"))
            if not hmac.compare_digest(stored, token.encode("utf-8")):
                raise AuthenticationError("Token does not match server's copy")
            sa = await self.getter.get("serviceaccounts", namespace, name)
            if sa is None:
                raise _not_found("serviceaccounts", name)
            if sa["metadata"].get("deletionTimestamp"):
                raise AuthenticationError(f"ServiceAccount {namespace}/{name} has been deleted")
            if _uid(sa) != uid:
                raise AuthenticationError(f"ServiceAccount UID ({_uid(sa)}) does not match claim ({uid})")
            labels = secret["metadata"].get("labels") or {}
            if labels.get(LEGACY_INVALID_SINCE_LABEL):
                self._mark_used(secret)
                raise AuthenticationError(
                    f"the token in secret {namespace}/{secret_name} for service account {namespace}/{name} has "
                    f"been marked invalid. Use tokens from the TokenRequest API or manually created secret-based "
                    f"tokens, or remove the '{LEGACY_INVALID_SINCE_LABEL}' label from the secret to temporarily "
                    f"allow use of this token")
            self._mark_used(secret)
        return service_account_user(namespace, name, uid)

    def _mark_used(self, secret: dict) -> None:
        """Label the Secret with today's date (UTC) once a day, as upstream tracks legacy token use."""
        today = datetime.datetime.fromtimestamp(self.clock(), datetime.timezone.utc).date()
        labels = secret["metadata"].get("labels") or {}
        if labels.get(LEGACY_LAST_USED_LABEL) in (today.isoformat(),
                                                   (today + datetime.timedelta(days=1)).isoformat()):
            return
        md = secret["metadata"]
        d = defer.Deferred.fromCoroutine(self.getter.mark_legacy_token_used(
            md.get("namespace", ""), md.get("name", ""), md.get("uid", ""), today.isoformat()))
        d.addErrback(lambda f: log.info("labelling legacy token secret {name} as used failed: {err}",
                                        name=md.get("name"), err=f.getErrorMessage()))


def _decoded(value: Any) -> bytes:
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value)
    except ValueError:
        return b""


def _numeric(claims: dict, name: str) -> Optional[float]:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AuthenticationError(f"service account token claim {name!r} is not a number")
    return float(value)


def _string(obj: dict, key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _object_ref(private: dict, key: str) -> Optional[tuple[str, str]]:
    ref = private.get(key)
    if not isinstance(ref, dict):
        return None
    return _string(ref, "name"), _string(ref, "uid")


# ------------------------------------------------------------------ the authenticator

class Validator(Protocol):
    async def validate(self, token: str, claims: dict) -> UserInfo: ...


def _quoted(values: tuple[str, ...] | list[str]) -> str:
    """Go's %q of a []string."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


class JWTTokenAuthenticator:
    """Tokens of ``issuers`` signed by one of ``keys`` (upstream's JWTTokenAuthenticator).

    A token of another issuer is not recognised (``None``): another token
    authenticator may know it.  ``implicit_audiences`` are the API's: a token
    without audiences (legacy) is valid for them, and a token must share an
    audience with what it is presented to.
    """

    def __init__(self, issuers: list[str], keys: Sequence[VerificationKey], implicit_audiences: tuple[str, ...],
                 validator: Validator) -> None:
        self.issuers = frozenset(issuers)
        self.keys = keys
        self.implicit_audiences = implicit_audiences
        self.validator = validator

    def _has_issuer(self, token: str) -> bool:
        if token.strip().startswith("{"):
            return False
        parts = token.split(".")
        if len(parts) != 3 or len(token) > jose.MAX_TOKEN_BYTES:
            return False
        try:
            payload = json.loads(jose.b64url_decode(parts[1]))
        except (jose.JOSEError, ValueError):
            return False
        return isinstance(payload, dict) and payload.get("iss") in self.issuers

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        if not self._has_issuer(token):
            return None
        try:
            jws = jose.parse(token)
        except jose.JOSEError:
            return None
        keys = [k for k in self.keys if k.kid == jws.kid] if jws.kid else list(self.keys)
        if not keys:
            raise AuthenticationError("invalid signature, no keys found")
        problems = []
        for key in keys:
            try:
                jose.verify(jws, key.key)
                break
            except jose.JOSEError as e:
                problems.append(str(e))
        else:
            raise AuthenticationError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
        try:
            claims = jws.claims()
        except jose.JOSEError as e:
            raise AuthenticationError(str(e)) from None
        if claims.get("iss") not in self.issuers:
            raise AuthenticationError(f"token issuer {json.dumps(claims.get('iss'))} is invalid")
        token_audiences = _audiences(claims.get("aud")) or self.implicit_audiences
        requested = audiences or self.implicit_audiences
        shared = tuple(a for a in token_audiences if a in requested)
        if not shared and self.implicit_audiences:
            raise AuthenticationError(f"token audiences {_quoted(token_audiences)} is invalid for the target "
                                      f"audiences {_quoted(requested)}")
        return defer.Deferred.fromCoroutine(self._validated(token, claims, shared))

    async def _validated(self, token: str, claims: dict, audiences: tuple[str, ...]) -> AuthResult:
        return AuthResult(await self.validator.validate(token, claims), audiences)


def _audiences(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise AuthenticationError("invalid audience claim")
        return tuple(value)
    if value is None:
        return ()
    raise AuthenticationError("invalid audience claim")


# ------------------------------------------------------------------ what the server holds

class ServiceAccountTokens(NamedTuple):
    """The signing side of service-account tokens, for TokenRequest, the tokens
    controller and the OIDC discovery documents."""

    # bound tokens: iss = the first configured issuer
    signer: TokenSigner
    # Secret-based tokens: iss = kubernetes/serviceaccount, same key
    legacy_signer: TokenSigner
    # every key that verifies tokens (published as the JWKS)
    keys: Sequence[VerificationKey]
    api_audiences: tuple[str, ...]
    # longest lifetime a TokenRequest gets; 0 = no limit
    max_expiration_seconds: int
    extend_expiration: bool
    # jwks_uri of the discovery document; "" = derived from the server's address
    jwks_uri: str
    clock: Callable[[], float] = time.time

    @property
    def issuer(self) -> str:
        return self.signer.issuer
