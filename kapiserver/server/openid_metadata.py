"""Service-account issuer discovery: ``/.well-known/openid-configuration`` and ``/openid/v1/jwks``.

As upstream (pkg/serviceaccount/openidmetadata.go, pkg/routes): an OIDC
discovery document naming the issuer and the JWKS URL, and the public keys
that verify service-account tokens as a JSON Web Key Set, so that relying
parties outside the cluster can verify tokens without asking the server.
Served by the kube link of the delegation chain, only when the issuer is an
``https`` URL (without query or fragment), as upstream.
"""
from __future__ import annotations

import functools
import json
import urllib.parse
from typing import Callable

from twisted.web import resource, server

from kapiserver.auth import jose
from kapiserver.auth.serviceaccount import ServiceAccountTokens
from kapiserver.endpoints import respond
from kapiserver.endpoints.request_context import context_of
from kapiserver.machinery import errors

CONFIG_PATH = ("", ".well-known", "openid-configuration")
JWKS_PATH = ("", "openid", "v1", "jwks")
JWKS_MEDIA_TYPE = b"application/jwk-set+json"
# upstream's static key getter: discovery documents may be cached an hour
MAX_AGE_SECONDS = 3600


def issuer_discoverable(issuer: str) -> bool:
    parts = urllib.parse.urlsplit(issuer)
    return parts.scheme == "https" and bool(parts.netloc) and not parts.query and not parts.fragment


def jwks_document(tokens: ServiceAccountTokens) -> dict:
    return {"keys": [jose.jwk(k.key, k.kid) for k in tokens.keys]}


def configuration_document(tokens: ServiceAccountTokens, jwks_uri: str) -> dict:
    return {
        "issuer": tokens.issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],  # Kubernetes only produces ID tokens
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": sorted({jose.algorithm_for(k.key) for k in tokens.keys}),
    }


class _Document(resource.Resource):
    isLeaf = True

    def __init__(self, parts: tuple[str, ...], media_type: bytes, body: Callable[[], bytes]) -> None:
        super().__init__()
        self.parts = list(parts[1:])
        self.media_type = media_type
        self.body = body

    def render(self, request: server.Request):
        try:
            if context_of(request).require_info().parts != self.parts:
                raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
            if request.method not in (b"GET", b"HEAD"):
                raise errors.StatusError(405, "MethodNotAllowed",
                                         "the server does not allow this method on the requested resource")
            body = self.body()
        except Exception as e:
            respond.write_failure(request, e)
            return server.NOT_DONE_YET
        request.setHeader(b"content-type", self.media_type)
        request.setHeader(b"cache-control", f"public, max-age={MAX_AGE_SECONDS}".encode())
        request.setHeader(b"content-length", str(len(body)).encode())
        return b"" if request.method == b"HEAD" else body


def openid_resources(tokens: ServiceAccountTokens, jwks_uri: Callable[[], str]) -> dict[str, resource.Resource]:
    """The server paths (first segment → resource) serving both documents; ``jwks_uri()``
    gives the configured URL or one derived from the server's address."""
    @functools.cache
    def jwks() -> bytes:  # on the first request: the keys are parsed when first used
        return json.dumps(jwks_document(tokens), separators=(",", ":")).encode()
    return {
        CONFIG_PATH[1]: _Document(CONFIG_PATH, b"application/json", lambda: json.dumps(
            configuration_document(tokens, jwks_uri()), separators=(",", ":")).encode()),
        JWKS_PATH[1]: _Document(JWKS_PATH, JWKS_MEDIA_TYPE, jwks),
    }
