"""Signing a certificate request with the cluster CA (upstream's ``controller/certificates/authority``).

The issued certificate is the request's subject and subject alternative
names with the request's public key; the extensions the request asked for
are ignored, the key usages are the CSR's ``spec.usages``, it is never a CA,
and its lifetime follows upstream's permissive policy: valid from five
minutes ago (clock skew), until ``ttl`` from now (minus the five minutes for
lifetimes of eight hours or more), never past the CA's own expiry.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable, Optional, Protocol

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, ObjectIdentifier

BACKDATE = datetime.timedelta(minutes=5)
SHORT = datetime.timedelta(hours=8)

# certificates/v1 key usages -> x509 KeyUsage flags (cryptography's argument names)
KEY_USAGES = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment", "cert sign": "key_cert_sign",
    "crl sign": "crl_sign", "encipher only": "encipher_only", "decipher only": "decipher_only",
}
# ... and extended key usages, in Go's ExtKeyUsage order (the order they are written in)
EXT_KEY_USAGES = {
    "any": (0, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE),
    "server auth": (1, ExtendedKeyUsageOID.SERVER_AUTH),
    "client auth": (2, ExtendedKeyUsageOID.CLIENT_AUTH),
    "code signing": (3, ExtendedKeyUsageOID.CODE_SIGNING),
    "email protection": (4, ExtendedKeyUsageOID.EMAIL_PROTECTION),
    "s/mime": (4, ExtendedKeyUsageOID.EMAIL_PROTECTION),
    "ipsec end system": (5, ObjectIdentifier("1.3.6.1.5.5.7.3.5")),
    "ipsec tunnel": (6, ObjectIdentifier("1.3.6.1.5.5.7.3.6")),
    "ipsec user": (7, ObjectIdentifier("1.3.6.1.5.5.7.3.7")),
    "timestamping": (8, ExtendedKeyUsageOID.TIME_STAMPING),
    "ocsp signing": (9, ExtendedKeyUsageOID.OCSP_SIGNING),
    "microsoft sgc": (10, ObjectIdentifier("1.3.6.1.4.1.311.10.3.3")),
    "netscape sgc": (11, ObjectIdentifier("2.16.840.1.113730.4.1")),
}


class SigningError(Exception):
    """The request cannot be signed (the controller retries later)."""


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _key_usage(usages: list[str]) -> tuple[Optional[x509.KeyUsage], Optional[x509.ExtendedKeyUsage]]:
    flags = {name: False for name in set(KEY_USAGES.values())}
    extended: dict[int, ObjectIdentifier] = {}
    unknown = []
    for usage in usages:
        if usage in KEY_USAGES:
            flags[KEY_USAGES[usage]] = True
        elif usage in EXT_KEY_USAGES:
            order, oid = EXT_KEY_USAGES[usage]
            extended[order] = oid
        else:
            unknown.append(usage)
    if unknown:
        raise SigningError("unrecognized usage values: [" + " ".join(f'"{u}"' for u in unknown) + "]")
    key_usage = None
    if any(flags.values()):
        try:
            key_usage = x509.KeyUsage(**flags)
        except ValueError as e:  # encipher/decipher only without key agreement
            raise SigningError(str(e)) from None
    ext = x509.ExtendedKeyUsage([extended[k] for k in sorted(extended)]) if extended else None
    return key_usage, ext


class SigningPair(Protocol):
    """The CA's certificate and private key (read when first asked for: a server that signs
    nothing never parses them)."""

    @property
    def certificate(self) -> x509.Certificate: ...

    @property
    def key(self) -> Any: ...


class CertificateAuthority:
    def __init__(self, ca: SigningPair, now: Callable[[], datetime.datetime] = _utcnow) -> None:
        self.ca = ca
        self.now = now

    def sign(self, csr: x509.CertificateSigningRequest, usages: list[str], ttl: datetime.timedelta) -> bytes:
        """The PEM certificate for ``csr``."""
        if not csr.is_signature_valid:
            raise SigningError("unable to verify certificate request signature")
        now = self.now()
        not_before = now - BACKDATE
        not_after = now + ttl if ttl < SHORT else now + ttl - BACKDATE
        ca_expiry = self.ca.certificate.not_valid_after_utc
        if not_after >= ca_expiry:
            not_after = ca_expiry
        if not_before >= ca_expiry or now >= ca_expiry:
            raise SigningError(f"the signer has expired: NotAfter={ca_expiry}")
        key_usage, ext_key_usage = _key_usage(usages)
        builder = (x509.CertificateBuilder()
                   .subject_name(csr.subject)
                   .issuer_name(self.ca.certificate.subject)
                   .public_key(csr.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(not_before)
                   .not_valid_after(not_after))
        if key_usage is not None:
            builder = builder.add_extension(key_usage, critical=True)
        if ext_key_usage is not None:
            builder = builder.add_extension(ext_key_usage, critical=False)
        builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        try:
            ski = self.ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                                            critical=False)
        except x509.ExtensionNotFound:
            pass
        try:
            sans = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            builder = builder.add_extension(x509.SubjectAlternativeName(list(sans)),
                                            critical=len(csr.subject) == 0)
        except x509.ExtensionNotFound:
            pass
        algorithm = hashes.SHA256() if isinstance(self.ca.key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)) \
            else None
        certificate = builder.sign(self.ca.key, algorithm)
        return certificate.public_bytes(serialization.Encoding.PEM)
