"""Bootstrap tokens: short-lived bearer tokens kept in kube-system Secrets, for joining nodes.

Upstream's ``plugin/pkg/auth/authenticator/token/bootstrap`` with the helpers of
``k8s.io/cluster-bootstrap`` (token API constants, ``util/secrets``,
``util/tokens``, ``token/jws``).  A token ``<id>.<secret>`` (``[a-z0-9]{6}``
and ``[a-z0-9]{16}``) is looked up as the Secret ``kube-system/bootstrap-token-<id>``
of type ``bootstrap.kubernetes.io/token``; it authenticates as
``system:bootstrap:<id>`` in ``system:bootstrappers`` (and the Secret's
``auth-extra-groups``, each ``system:bootstrappers:...``) when the Secret
holds that secret (compared in constant time) and that id, is not being
deleted, has not expired (``expiration``, RFC 3339; unparsable = expired) and
says ``usage-bootstrap-authentication: "true"``.  Anything else is "not
recognised", as upstream: another token authenticator may know the token, and
a token none knows is a 401.  Enabled by
``authentication.enable_bootstrap_token_auth`` (``--enable-bootstrap-token-auth``).

The controllers that clean expired token Secrets and sign the ``cluster-info``
ConfigMap with tokens use the same helpers (``controllers/bootstrap_tokens.py``).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import time
from typing import Callable, Optional

from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.auth import jose
from kapiserver.auth.authenticator import AuthResult, Outcome
from kapiserver.auth.serviceaccount import ObjectLookup
from kapiserver.machinery.user import UserInfo
from kapiserver.machinery.schema_decoder import parse_rfc3339

log = Logger()

SECRET_NAMESPACE = "kube-system"
SECRET_PREFIX = "bootstrap-token-"
SECRET_TYPE = "bootstrap.kubernetes.io/token"
ID_KEY = "token-id"
SECRET_KEY = "token-secret"
EXPIRATION_KEY = "expiration"
EXTRA_GROUPS_KEY = "auth-extra-groups"
USAGE_AUTHENTICATION = "usage-bootstrap-authentication"
USAGE_SIGNING = "usage-bootstrap-signing"
USER_PREFIX = "system:bootstrap:"
DEFAULT_GROUP = "system:bootstrappers"
# the cluster-info ConfigMap the bootstrap signer signs (kubeadm's discovery reads it anonymously)
CLUSTER_INFO_NAMESPACE = "kube-public"
CLUSTER_INFO = "cluster-info"
KUBECONFIG_KEY = "kubeconfig"
JWS_SIGNATURE_PREFIX = "jws-kubeconfig-"

_TOKEN = re.compile(r"\A([a-z0-9]{6})\.([a-z0-9]{16})\Z")
_SECRET_NAME = re.compile(r"\A" + re.escape(SECRET_PREFIX) + r"([a-z0-9]{6})\Z")
# upstream's BootstrapGroupPattern, as its messages print it (Go's \z is Python's \Z)
GROUP_PATTERN = r"\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z"
_GROUP = re.compile(GROUP_PATTERN.replace(r"\z", r"\Z"))


def parse_token(token: str) -> Optional[tuple[str, str]]:
    """(id, secret) of a token of the form ``<id>.<secret>``, else None."""
    match = _TOKEN.match(token)
    return (match.group(1), match.group(2)) if match else None


def id_from_secret_name(name: str) -> Optional[str]:
    """The token id of a Secret named ``bootstrap-token-<id>``, else None (upstream's ParseName)."""
    match = _SECRET_NAME.match(name)
    return match.group(1) if match else None


def secret_data(secret: dict, key: str) -> str:
    """The decoded value of ``data[key]``; "" when absent or not valid base64 (upstream's GetData)."""
    data = secret.get("data")
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, str):
        return ""
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", errors="replace")
    except ValueError:
        return ""


def seconds_until_expiry(secret: dict, now: float) -> Optional[float]:
    """How long the token has left: None without an ``expiration``, 0 once expired or when the
    value cannot be parsed (treated as expired), as upstream's GetExpiration."""
    expiration = secret_data(secret, EXPIRATION_KEY)
    if not expiration:
        return None
    when = parse_rfc3339(expiration)
    if when is None:
        log.debug("Unparseable expiration time ({expiration}) in {ns}/{name} Secret. Treating as expired.",
                  expiration=expiration, ns=_namespace(secret), name=_name(secret))
        return 0.0
    remaining = when.timestamp() - now
    if remaining <= 0:
        log.debug("Expired bootstrap token in {ns}/{name} Secret: {expiration}", ns=_namespace(secret),
                  name=_name(secret), expiration=expiration)
        return 0.0
    return remaining


def has_expired(secret: dict, now: float) -> bool:
    return seconds_until_expiry(secret, now) == 0.0


def groups(secret: dict) -> tuple[str, ...]:
    """``system:bootstrappers`` and the valid ``auth-extra-groups``, sorted and deduplicated;
    ValueError naming the first invalid group (upstream's GetGroups)."""
    found = {DEFAULT_GROUP}
    extra = secret_data(secret, EXTRA_GROUPS_KEY)
    if extra:
        for group in extra.split(","):
            if not _GROUP.match(group):
                raise ValueError(f"bootstrap group {json.dumps(group)} is invalid (must match {GROUP_PATTERN})")
            found.add(group)
    return tuple(sorted(found))


def detached_signature(content: str, token_id: str, token_secret: str) -> str:
    """The detached JWS (HS256, ``kid`` = the token id, keyed by the token's secret) the bootstrap
    signer writes into ``cluster-info`` and kubeadm's discovery recomputes (upstream's
    ComputeDetachedSignature): ``<header>..<signature>``."""
    header = jose.b64url(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode())
    signing_input = f"{header}.{jose.b64url(content.encode())}".encode("ascii")
    signature = hmac.new(token_secret.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}..{jose.b64url(signature)}"


def _namespace(secret: dict) -> str:
    return str((secret.get("metadata") or {}).get("namespace") or "")


def _name(secret: dict) -> str:
    return str((secret.get("metadata") or {}).get("name") or "")


def _refused(secret: dict, why: str) -> None:
    """Upstream's tokenErrorf: a Secret matched the token but does not make it valid (V(3) there)."""
    log.debug("Bootstrap secret {ns}/{name} matching bearer token {why}", ns=_namespace(secret), name=_name(secret),
              why=why)


class BootstrapTokenAuthenticator:
    """Bearer tokens checked against the bootstrap token Secrets of ``kube-system``.

    ``lookup`` reads Secrets through the watch cache (as upstream's informer
    lister; a cache miss asks storage); ``clock`` gives the time expirations
    are compared with.
    """

    def __init__(self, lookup: ObjectLookup, clock: Callable[[], float] = time.time) -> None:
        self.lookup = lookup
        self.clock = clock

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> Outcome:
        parsed = parse_token(token)
        if parsed is None:
            return None  # not a bootstrap token: another authenticator may know it
        return defer.Deferred.fromCoroutine(self._check(*parsed))

    async def _check(self, token_id: str, token_secret: str) -> Optional[AuthResult]:
        name = SECRET_PREFIX + token_id
        secret = await self.lookup.get("secrets", SECRET_NAMESPACE, name)
        if secret is None:
            log.debug("No secret of name {name} to match bootstrap bearer token", name=name)
            return None
        if (secret.get("metadata") or {}).get("deletionTimestamp"):
            _refused(secret, "is deleted and awaiting removal")
            return None
        if secret.get("type") != SECRET_TYPE or not isinstance(secret.get("data"), dict):
            _refused(secret, f"has invalid type, expected {SECRET_TYPE}.")
            return None
        stored = secret_data(secret, SECRET_KEY)
        if not hmac.compare_digest(stored.encode(), token_secret.encode()):
            _refused(secret, f"has invalid value for key {SECRET_KEY}.")
            return None
        if secret_data(secret, ID_KEY) != token_id:
            _refused(secret, f"has invalid value for key {ID_KEY}.")
            return None
        if has_expired(secret, self.clock()):
            return None
        if secret_data(secret, USAGE_AUTHENTICATION) != "true":
            _refused(secret, f"not marked {USAGE_AUTHENTICATION}=true.")
            return None
        try:
            member_of = groups(secret)
        except ValueError as e:
            _refused(secret, f"has invalid value for key {EXTRA_GROUPS_KEY}: {e}.")
            return None
        return AuthResult(UserInfo(name=USER_PREFIX + token_id, groups=member_of))
