"""Reading PEM private keys (kapiserver.auth.private_key): RSA keys are checked for consistency."""
from __future__ import annotations

import dataclasses

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from twisted.trial import unittest

from kapiserver.auth.private_key import InvalidKeyError, load_private_key


def pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclasses.dataclass
class Numbers:
    """An RSA key's numbers, to damage one."""
    p: int
    q: int
    d: int
    dmp1: int
    dmq1: int
    iqmp: int
    e: int
    n: int

    @classmethod
    def of(cls, key: rsa.RSAPrivateKey) -> "Numbers":
        v = key.private_numbers()
        return cls(v.p, v.q, v.d, v.dmp1, v.dmq1, v.iqmp, v.public_numbers.e, v.public_numbers.n)

    def pem(self) -> bytes:
        numbers = rsa.RSAPrivateNumbers(self.p, self.q, self.d, self.dmp1, self.dmq1, self.iqmp,
                                        rsa.RSAPublicNumbers(self.e, self.n))
        return pem(numbers.private_key(unsafe_skip_rsa_key_validation=True))


class LoadPrivateKeyTests(unittest.TestCase):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def test_a_good_key_loads_and_signs(self) -> None:
        key = load_private_key(pem(self.key))
        assert isinstance(key, rsa.RSAPrivateKey)
        signature = key.sign(b"token", padding.PKCS1v15(), hashes.SHA256())
        self.key.public_key().verify(signature, b"token", padding.PKCS1v15(), hashes.SHA256())
        ec_key = ec.generate_private_key(ec.SECP256R1())
        self.assertEqual(load_private_key(pem(ec_key)).public_key().public_numbers(),
                         ec_key.public_key().public_numbers())

    def test_damaged_keys_are_refused_as_openssl_refuses_them(self) -> None:
        good = Numbers.of(self.key)
        damaged = {
            "CRT values": dataclasses.replace(good, iqmp=good.iqmp + 1),
            "private exponent": dataclasses.replace(good, d=good.d + 2),
            "exponent modulo p": dataclasses.replace(good, dmp1=good.dmp1 + 2),
        }
        for what, numbers in damaged.items():
            data = numbers.pem()
            with self.assertRaises(InvalidKeyError, msg=what) as caught:
                load_private_key(data)
            self.assertTrue(str(caught.exception).startswith("invalid RSA key: "), str(caught.exception))
            with self.assertRaises(ValueError, msg=what):  # what OpenSSL's full check says
                serialization.load_pem_private_key(data, None)

    def test_not_a_key(self) -> None:
        for data in (b"garbage", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"):
            self.assertRaises(ValueError, load_private_key, data)
