"""What the server authenticates with, once built from the configuration
(``app/authentication.py`` builds it): the handler chain's authenticator, the
token authenticators TokenReview asks, the CAs the TLS handshake trusts, what the
``extension-apiserver-authentication`` ConfigMap publishes, and the
service-account token signer.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

from kapiserver.auth.authenticator import TokenAuthenticator, UnionAuthenticator
from kapiserver.auth.serviceaccount import ServiceAccountTokens

if TYPE_CHECKING:  # pragma: no cover (loaded only with an authentication configuration file)
    from kapiserver.auth.oidc import JWTAuthenticator


class RequestHeaderTrust(NamedTuple):
    """What front-proxy authentication trusts, as the ConfigMap publishes it."""

    ca_pem: bytes
    allowed_names: tuple[str, ...]
    username_headers: tuple[str, ...]
    group_headers: tuple[str, ...]
    extra_headers_prefix: tuple[str, ...]


class Authentication(NamedTuple):
    # the handler chain's authenticator
    request: UnionAuthenticator
    # every bearer-token authenticator (TokenReview); None when none is configured
    tokens: Optional[TokenAuthenticator]
    api_audiences: tuple[str, ...]
    # PEM of every CA a client certificate may chain to (the TLS handshake); b"" = none configured
    handshake_client_cas: bytes
    # the client CA bundle (published as client-ca-file)
    client_ca_pem: bytes
    requestheader: Optional[RequestHeaderTrust]
    # signing side of ServiceAccount tokens; None without a signing key
    service_accounts: Optional[ServiceAccountTokens]
    # JWT authenticators of the authentication configuration file (fetch their issuers' keys)
    jwt: tuple[JWTAuthenticator, ...] = ()

    def start(self) -> None:
        """Begin what runs in the background: OIDC discovery."""
        for authenticator in self.jwt:
            authenticator.start()

    def stop(self) -> None:
        for authenticator in self.jwt:
            authenticator.stop()
