"""Compact JWS (RFC 7515) signing and verification, and JWKs, with ``cryptography``.

Only what service-account tokens and JWT authenticators need: asymmetric
algorithms (RS256/384/512, PS256/384/512, ES256/384/512), never ``none`` or
HMAC (a public key must never double as a shared secret).  Key IDs are
upstream's: the unpadded base64url SHA-256 of the DER SubjectPublicKeyInfo.
"""
from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Callable, NamedTuple, Union

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from kapiserver.auth.private_key import load_private_key

PublicKey = Union[rsa.RSAPublicKey, ec.EllipticCurvePublicKey]
PrivateKey = Union[rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey]

_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {"256": hashes.SHA256, "384": hashes.SHA384,
                                                          "512": hashes.SHA512}
_CURVES = {"secp256r1": ("ES256", "P-256", 32), "secp384r1": ("ES384", "P-384", 48),
           "secp521r1": ("ES512", "P-521", 66)}
# a token larger than this is not one of ours (bounds the work an attacker can ask for)
MAX_TOKEN_BYTES = 64 * 1024


class JOSEError(Exception):
    """A malformed token or a signature that does not verify."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    if any(c in text for c in "+/=") or not text.isascii():
        raise JOSEError("not base64url")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except ValueError:
        raise JOSEError("not base64url") from None


def key_id(public_key: PublicKey) -> str:
    """Upstream's key ID: base64url(SHA-256(DER SubjectPublicKeyInfo))."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b64url(hashlib.sha256(der).digest())


def algorithm_for(public_key: PublicKey) -> str:
    """The algorithm upstream signs with for this key: RS256, or ES256/384/512 by curve."""
    if isinstance(public_key, rsa.RSAPublicKey):
        return "RS256"
    if isinstance(public_key, ec.EllipticCurvePublicKey) and public_key.curve.name in _CURVES:
        return _CURVES[public_key.curve.name][0]
    raise JOSEError(f"unsupported key type {type(public_key).__name__}: must be RSA or ECDSA P-256/384/521")


def sign(claims: dict, private_key: PrivateKey, kid: str) -> str:
    """A compact JWS of ``claims`` (JSON with sorted keys, as go-jose's claim builder writes them)."""
    alg = algorithm_for(private_key.public_key())
    header = {"alg": alg, "kid": kid}
    signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "." +
                     b64url(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()))
    digest = _HASHES[alg[2:]]()
    if isinstance(private_key, rsa.RSAPrivateKey):
        signature = private_key.sign(signing_input.encode(), padding.PKCS1v15(), digest)
    else:
        der = private_key.sign(signing_input.encode(), ec.ECDSA(digest))
        r, s = decode_dss_signature(der)
        size = _CURVES[private_key.curve.name][2]
        signature = r.to_bytes(size, "big") + s.to_bytes(size, "big")
    return signing_input + "." + b64url(signature)


class JWS(NamedTuple):
    """A parsed (not yet verified) compact JWS."""

    header: dict
    payload: bytes
    signing_input: bytes
    signature: bytes

    @property
    def kid(self) -> str:
        kid = self.header.get("kid")
        return kid if isinstance(kid, str) else ""

    def claims(self) -> dict:
        try:
            claims = json.loads(self.payload)
        except ValueError:
            raise JOSEError("the payload is not JSON") from None
        if not isinstance(claims, dict):
            raise JOSEError("the payload is not a JSON object")
        return claims


def parse(token: str) -> JWS:
    if len(token) > MAX_TOKEN_BYTES:
        raise JOSEError("token too large")
    parts = token.split(".")
    if len(parts) != 3:
        raise JOSEError("not a compact JWS")
    try:
        header = json.loads(b64url_decode(parts[0]))
    except ValueError:
        raise JOSEError("the header is not JSON") from None
    if not isinstance(header, dict) or not isinstance(header.get("alg"), str):
        raise JOSEError("the header has no algorithm")
    if "crit" in header:
        raise JOSEError("critical header parameters are not supported")
    return JWS(header, b64url_decode(parts[1]), (parts[0] + "." + parts[1]).encode("ascii"),
               b64url_decode(parts[2]))


def verify(jws: JWS, public_key: PublicKey) -> None:
    """Raise :class:`JOSEError` unless ``jws`` is signed by ``public_key`` with an algorithm fit for it."""
    alg = jws.header["alg"]
    family, bits = alg[:2], alg[2:]
    if bits not in _HASHES:
        raise JOSEError(f"unsupported signature algorithm {alg!r}")
    digest = _HASHES[bits]()
    try:
        if isinstance(public_key, rsa.RSAPublicKey) and family == "RS":
            public_key.verify(jws.signature, jws.signing_input, padding.PKCS1v15(), digest)
        elif isinstance(public_key, rsa.RSAPublicKey) and family == "PS":
            public_key.verify(jws.signature, jws.signing_input,
                              padding.PSS(padding.MGF1(digest), padding.PSS.DIGEST_LENGTH), digest)
        elif isinstance(public_key, ec.EllipticCurvePublicKey) and family == "ES":
            expected_alg, _, size = _CURVES.get(public_key.curve.name, ("", "", 0))
            if alg != expected_alg or len(jws.signature) != 2 * size:
                raise JOSEError(f"algorithm {alg!r} does not fit the key")
            r = int.from_bytes(jws.signature[:size], "big")
            s = int.from_bytes(jws.signature[size:], "big")
            public_key.verify(encode_dss_signature(r, s), jws.signing_input, ec.ECDSA(digest))
        else:
            raise JOSEError(f"algorithm {alg!r} does not fit the key")
    except InvalidSignature:
        raise JOSEError("error in cryptographic primitive") from None


def jwk(public_key: PublicKey, kid: str) -> dict:
    """The public JWK of ``public_key`` (fields in go-jose's order)."""
    alg = algorithm_for(public_key)
    if isinstance(public_key, rsa.RSAPublicKey):
        numbers = public_key.public_numbers()
        return {"use": "sig", "kty": "RSA", "kid": kid, "alg": alg, "n": b64url(_int_bytes(numbers.n)),
                "e": b64url(_int_bytes(numbers.e))}
    ec_numbers = public_key.public_numbers()
    _, crv, size = _CURVES[public_key.curve.name]
    return {"use": "sig", "kty": "EC", "kid": kid, "crv": crv, "alg": alg,
            "x": b64url(ec_numbers.x.to_bytes(size, "big")), "y": b64url(ec_numbers.y.to_bytes(size, "big"))}


def public_key_from_jwk(key: dict) -> PublicKey:
    """The public key a JWK describes (RSA or EC); for verifying tokens of external issuers."""
    kty = key.get("kty")
    try:
        if kty == "RSA":
            n = int.from_bytes(b64url_decode(key["n"]), "big")
            e = int.from_bytes(b64url_decode(key["e"]), "big")
            return rsa.RSAPublicNumbers(e, n).public_key()
        if kty == "EC":
            curve = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}[key["crv"]]
            x = int.from_bytes(b64url_decode(key["x"]), "big")
            y = int.from_bytes(b64url_decode(key["y"]), "big")
            return ec.EllipticCurvePublicNumbers(x, y, curve).public_key()
    except (KeyError, TypeError, ValueError) as e:
        raise JOSEError(f"invalid JWK: {e}") from None
    raise JOSEError(f"unsupported JWK key type {kty!r}")


def _int_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")


def load_keys(pem: bytes, where: str) -> list[Any]:
    """Every public or private key (and certificate's public key) in a PEM file, as public keys."""
    from cryptography import x509

    keys: list[Any] = []
    blocks = pem.split(b"-----BEGIN ")
    for block in blocks[1:]:
        text = b"-----BEGIN " + block
        label = block.split(b"-----", 1)[0]
        try:
            if label == b"CERTIFICATE":
                keys.append(x509.load_pem_x509_certificate(text).public_key())
            elif label.endswith(b"PRIVATE KEY"):
                keys.append(load_private_key(text).public_key())
            elif label.endswith(b"PUBLIC KEY"):
                keys.append(serialization.load_pem_public_key(text))
        except (ValueError, TypeError) as e:
            raise JOSEError(f"{where}: cannot read {label.decode(errors='replace')}: {e}") from None
    for key in keys:
        algorithm_for(key)
    if not keys:
        raise JOSEError(f"{where}: no PEM public or private key found")
    return keys
