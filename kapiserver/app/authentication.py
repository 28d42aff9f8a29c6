"""The authenticators the configuration asks for, composed as kube-apiserver composes them.

Upstream's order (pkg/kubeapiserver/authenticator): the front proxy's request
headers, then client certificates, then bearer tokens (static tokens, legacy
and bound ServiceAccount tokens, bootstrap tokens, JWTs of the authentication
configuration's issuers); a recognised user is added to
``system:authenticated``; anonymous last, only for requests without any
credential.  :func:`build_authentication` reads the files the completed
configuration names (blocking: call it at start) and returns everything the
server needs from authentication: the handler chain's authenticator, the token
authenticators TokenReview asks, the CAs the TLS handshake trusts, what the
``extension-apiserver-authentication`` ConfigMap publishes, and the
service-account token signer (:class:`~kapiserver.auth.authentication.Authentication`).
It composes auth/ from the server's whole configuration, as upstream's
``pkg/kubeapiserver/authenticator`` does, so it sits with the server.
"""
from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.auth import jose
from kapiserver.auth.authentication import Authentication, RequestHeaderTrust
from kapiserver.auth.authenticator import Authenticator, ClientCertificateAuthenticator, TokenAuthenticator, \
    UnionAuthenticator
from kapiserver.auth.bearertoken import (AudienceAgnosticToken, BearerTokenAuthenticator, TokenUnion,
                                         WebSocketProtocolAuthenticator)
from kapiserver.auth.bootstrap_token import BootstrapTokenAuthenticator
from kapiserver.auth.requestheader import RequestHeaderAuthenticator
from kapiserver.auth.serviceaccount import (LEGACY_ISSUER, BoundTokenValidator, JWTTokenAuthenticator,
                                            LazyVerificationKeys, LegacyTokenValidator, ServiceAccountTokens,
                                            SigningKey, SigningKeyError, StoreObjectGetter, TokenSigner,
                                            VerificationKey, load_signing_key, verification_keys)
from kapiserver.auth.x509 import CABundle
from kapiserver.server.certs import SIGNING_KEY_CHECK, CredentialFiles, checked_before, credential_files

if TYPE_CHECKING:
    from kapiserver.auth.oidc import JWTAuthenticator
    from kapiserver.registry.store import Store
    from kapiserver.server.config import Config

log = Logger()


class CredentialsError(Exception):
    """A credential file named by the configuration is missing or unreadable; ``str()`` is one line."""


def _read(path: str, default: bool, what: str) -> Optional[bytes]:
    """The file's bytes; None if a default-located file is absent (that feature is off)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        if default:
            log.info("No {what} at {path}: that kind of authentication is off", what=what, path=path)
            return None
        raise CredentialsError(f"{path}: {what} not found") from None
    except OSError as e:
        raise CredentialsError(f"{path}: cannot read {what}: {e.strerror}") from None


def _ca_bundle(pem: bytes, path: str) -> CABundle:
    try:
        bundle = CABundle(pem, path)
    except ValueError as e:
        raise CredentialsError(f"{path}: not a PEM certificate bundle: {e}") from None
    return bundle


def _signing_key(pem: bytes, path: str) -> Any:
    try:
        return load_signing_key(pem)
    except SigningKeyError as e:
        raise CredentialsError(f"{path}: {e}") from None


def _service_accounts(config: "Config", files: CredentialFiles, api_audiences: tuple[str, ...],
                      clock: Callable[[], float]) -> tuple[Optional[ServiceAccountTokens], Sequence[VerificationKey]]:
    """The signer (if there is a signing key) and every public key that verifies tokens.

    The signing key is parsed when a token is first signed or verified, if an earlier start
    checked these bytes (:func:`~kapiserver.server.certs.checked_before`); else now, and a
    key that is none stops the start, saying why."""
    sa = config.authentication.service_account
    path = files.service_account_signing_key
    pem = _read(path, "service_account_signing_key" in files.defaults, "service-account signing key")
    signing = None
    if pem is not None:
        signing = SigningKey(functools.partial(_signing_key, pem, path))
        if not checked_before(config.cert_dir, SIGNING_KEY_CHECK, pem):
            signing.private_key  # parsed and checked now: a key that is none stops the start
    more_keys: list[Any] = []
    for key_file in sa.key_files:
        data = _read(key_file, False, "service-account key file")
        assert data is not None
        try:
            more_keys.extend(jose.load_keys(data, key_file))
        except jose.JOSEError as e:
            raise CredentialsError(str(e) if str(e).startswith(key_file) else f"{key_file}: {e}") from None
    if signing is None:
        return None, verification_keys(more_keys)
    keys = LazyVerificationKeys(lambda: [signing.private_key.public_key(), *more_keys])
    tokens = ServiceAccountTokens(
        signer=TokenSigner(sa.issuers[0], signing), legacy_signer=TokenSigner(LEGACY_ISSUER, signing),
        keys=keys, api_audiences=api_audiences, max_expiration_seconds=sa.max_token_expiration_seconds,
        extend_expiration=sa.extend_token_expiration, jwks_uri=sa.jwks_uri, clock=clock)
    return tokens, keys


def build_authentication(config: "Config", store: Callable[[str, str, str], "Store"],
                         clock: Callable[[], float] = time.time, reactor: Optional[IReactorTime] = None) -> Authentication:
    """The authenticators of the completed ``config``; ``store(group, version, plural)``
    looks objects up (ServiceAccount tokens).  Raises :class:`CredentialsError`."""
    authn = config.authentication
    files = credential_files(config)
    sa_config = authn.service_account
    api_audiences = tuple(authn.api_audiences or sa_config.issuers)
    request_authenticators: list[Authenticator] = []

    requestheader = None
    rh = authn.requestheader
    if rh.username_headers:
        path = files.requestheader_client_ca
        pem = _read(path, "requestheader_client_ca" in files.defaults, "front-proxy (request-header) CA")
        if pem is not None:
            request_authenticators.append(RequestHeaderAuthenticator(
                _ca_bundle(pem, path), rh.allowed_names, rh.username_headers, rh.group_headers,
                rh.extra_headers_prefix))
            requestheader = RequestHeaderTrust(pem, tuple(rh.allowed_names), tuple(rh.username_headers),
                                               tuple(rh.group_headers), tuple(rh.extra_headers_prefix))

    client_ca_pem = _read(files.client_ca, "client_ca" in files.defaults, "client CA") or b""
    if client_ca_pem:
        request_authenticators.append(ClientCertificateAuthenticator(_ca_bundle(client_ca_pem, files.client_ca)))

    token_authenticators: list[TokenAuthenticator] = []
    if authn.token_auth_file:
        from kapiserver.auth.tokenfile import TokenFileError, load_token_file  # (and csv) only with a token file
        try:
            static = load_token_file(authn.token_auth_file)
        except TokenFileError as e:
            raise CredentialsError(str(e)) from None
        token_authenticators.append(AudienceAgnosticToken(api_audiences, static))
    service_accounts, keys = _service_accounts(config, files, api_audiences, clock)
    getter = StoreObjectGetter(store)
    if service_accounts is not None or keys:
        token_authenticators.append(JWTTokenAuthenticator(
            [LEGACY_ISSUER], keys, api_audiences, LegacyTokenValidator(getter, sa_config.lookup, clock)))
        token_authenticators.append(JWTTokenAuthenticator(
            list(sa_config.issuers), keys, api_audiences, BoundTokenValidator(getter, clock)))
    if authn.enable_bootstrap_token_auth:  # after the ServiceAccount tokens, as upstream
        token_authenticators.append(AudienceAgnosticToken(api_audiences, BootstrapTokenAuthenticator(getter, clock)))
    jwt: tuple[JWTAuthenticator, ...] = ()
    if authn.config_file:
        # structured authentication (its parser, the JWT authenticators, their HTTP client and
        # CEL claim mappings) loads only when configured: most servers have no such file, and
        # a start need not pay its imports (tests/server/test_start_footprint.py)
        from kapiserver.auth.authentication_configuration import (AuthenticationConfigurationError,
                                                                 load_authentication_configuration)
        from kapiserver.auth.oidc import JWTAuthenticator  # noqa: F811 (the run-time import of the annotation's)
        try:
            structured = load_authentication_configuration(authn.config_file, tuple(sa_config.issuers))
        except AuthenticationConfigurationError as e:
            raise CredentialsError(str(e)) from None
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        jwt = tuple(JWTAuthenticator(c, reactor, clock) for c in structured.jwt)
        if jwt:  # after the ServiceAccount and bootstrap tokens, as upstream
            token_authenticators.append(AudienceAgnosticToken(api_audiences, TokenUnion(jwt)))
    tokens = TokenUnion(token_authenticators) if token_authenticators else None
    if tokens is not None:
        request_authenticators.append(BearerTokenAuthenticator(tokens, api_audiences))
        request_authenticators.append(WebSocketProtocolAuthenticator(tokens, api_audiences))

    handshake = b"".join(_with_newline(p) for p in (client_ca_pem, requestheader.ca_pem if requestheader else b""))
    return Authentication(
        request=UnionAuthenticator(request_authenticators, anonymous=authn.anonymous), tokens=tokens,
        api_audiences=api_audiences, handshake_client_cas=handshake, client_ca_pem=client_ca_pem,
        requestheader=requestheader, service_accounts=service_accounts, jwt=jwt)


def _with_newline(pem: bytes) -> bytes:
    return pem if not pem or pem.endswith(b"\n") else pem + b"\n"
