"""Compact JWS signing and verification: what other JWT libraries produce and accept."""
from __future__ import annotations

import base64
import hashlib
import json

from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from twisted.trial import unittest

from kapiserver.auth import jose


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _part(token: str, index: int) -> dict:
    segment = token.split(".")[index]
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


class JOSETests(unittest.TestCase):
    rsa_key = rsa.generate_private_key(65537, 2048)
    ec_key = ec.generate_private_key(ec.SECP384R1())

    def test_key_id_is_base64url_sha256_of_the_der_public_key(self) -> None:
        der = self.rsa_key.public_key().public_bytes(serialization.Encoding.DER,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo)
        self.assertEqual(jose.key_id(self.rsa_key.public_key()), _b64(hashlib.sha256(der).digest()))

    def test_rs256_token_verifies_with_plain_cryptography(self) -> None:
        token = jose.sign({"sub": "x", "aud": ["a"], "exp": 5}, self.rsa_key, "kid-1")
        header, payload, signature = token.split(".")
        self.assertEqual(_part(token, 0), {"alg": "RS256", "kid": "kid-1"})
        # claims in sorted order, as go-jose's claim builder writes them
        self.assertEqual(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)),
                         b'{"aud":["a"],"exp":5,"sub":"x"}')
        self.rsa_key.public_key().verify(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
                                         f"{header}.{payload}".encode(), padding.PKCS1v15(), hashes.SHA256())

    def test_es384_round_trip_and_jwk(self) -> None:
        token = jose.sign({"sub": "y"}, self.ec_key, "k")
        self.assertEqual(_part(token, 0)["alg"], "ES384")
        jws = jose.parse(token)
        jose.verify(jws, self.ec_key.public_key())
        jwk = jose.jwk(self.ec_key.public_key(), "k")
        self.assertEqual((jwk["kty"], jwk["crv"], jwk["alg"]), ("EC", "P-384", "ES384"))
        jose.verify(jws, jose.public_key_from_jwk(jwk))

    def test_tampered_payload_fails(self) -> None:
        header, _, signature = jose.sign({"sub": "x"}, self.rsa_key, "k").split(".")
        forged = header + "." + _b64(b'{"sub":"admin"}') + "." + signature
        with self.assertRaises(jose.JOSEError):
            jose.verify(jose.parse(forged), self.rsa_key.public_key())

    def test_none_and_hmac_algorithms_are_refused(self) -> None:
        payload = _b64(b'{"sub":"x"}')
        unsigned = _b64(b'{"alg":"none"}') + "." + payload + "."
        with self.assertRaises(jose.JOSEError):
            jose.verify(jose.parse(unsigned), self.rsa_key.public_key())
        # HS256 keyed with the public key's PEM: the classic algorithm-confusion forgery
        pem = self.rsa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo)
        signing_input = _b64(b'{"alg":"HS256"}') + "." + payload
        mac = hmac.HMAC(pem, hashes.SHA256())
        mac.update(signing_input.encode())
        with self.assertRaises(jose.JOSEError):
            jose.verify(jose.parse(f"{signing_input}.{_b64(mac.finalize())}"), self.rsa_key.public_key())

    def test_wrong_key_fails(self) -> None:
        token = jose.sign({"sub": "x"}, self.rsa_key, "k")
        other = rsa.generate_private_key(65537, 2048)
        with self.assertRaises(jose.JOSEError):
            jose.verify(jose.parse(token), other.public_key())
        with self.assertRaises(jose.JOSEError):
            jose.verify(jose.parse(token), self.ec_key.public_key())

    def test_malformed_tokens(self) -> None:
        for token in ("", "a.b", "a.b.c.d", "!!.e30.", _b64(b"[]") + ".e30.", "x" * (jose.MAX_TOKEN_BYTES + 1)):
            with self.assertRaises(jose.JOSEError, msg=token[:20]):
                jose.parse(token)

    def test_load_keys_reads_public_private_and_certificates(self) -> None:
        private = self.rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption())
        public = self.ec_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo)
        keys = jose.load_keys(private + public, "keys.pem")
        self.assertEqual([jose.key_id(k) for k in keys],
                         [jose.key_id(self.rsa_key.public_key()), jose.key_id(self.ec_key.public_key())])
        with self.assertRaises(jose.JOSEError):
            jose.load_keys(b"nothing here", "empty.pem")
