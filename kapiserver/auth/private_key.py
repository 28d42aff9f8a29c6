"""Reading a PEM private key, with the checks Go's crypto makes rather than OpenSSL's.

By default cryptography has OpenSSL check an RSA key (``RSA_check_key``),
which tests both primes for primality: about 40 ms for a 2,048-bit key, a
tenth of the server's start for the service-account signing key alone.
kube-apiserver reads its keys with Go's crypto, whose ``rsa.PrivateKey``
``Validate`` checks only that the key is consistent: its primes multiply to
the modulus and its exponents invert each other modulo each prime less one.
Those checks are what keep a damaged key from signing with a fault that
gives the key away, and they cost microseconds. They are made here, with the
same checks of the CRT values that OpenSSL signs with.
"""
from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes


class InvalidKeyError(ValueError):
    """A private key that reads, but whose numbers do not agree with one another."""


def load_private_key(pem: bytes) -> PrivateKeyTypes:
    """The unencrypted PEM private key in ``pem``: ValueError or TypeError when it is not one
    (InvalidKeyError, saying why, when it is a damaged RSA key)."""
    key = serialization.load_pem_private_key(pem, password=None, unsafe_skip_rsa_key_validation=True)
    if isinstance(key, rsa.RSAPrivateKey):
        _check_rsa_key(key.private_numbers())
    return key


def _check_rsa_key(numbers: rsa.RSAPrivateNumbers) -> None:
    """InvalidKeyError unless the key's numbers are consistent with one another."""
    p, q, d = numbers.p, numbers.q, numbers.d
    n, e = numbers.public_numbers.n, numbers.public_numbers.e
    if p <= 1 or q <= 1 or p * q != n:
        raise InvalidKeyError("invalid RSA key: its primes do not multiply to its modulus")
    if (d * e) % (p - 1) != 1 or (d * e) % (q - 1) != 1:
        raise InvalidKeyError("invalid RSA key: its private exponent does not invert its public one")
    if numbers.dmp1 != d % (p - 1) or numbers.dmq1 != d % (q - 1) or (numbers.iqmp * q) % p != 1:
        raise InvalidKeyError("invalid RSA key: its CRT values do not match its primes and exponent")
