"""The byte fields of a CertificateSigningRequest: base64 in JSON, PEM inside (upstream's helpers)."""
from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography import x509

from kapiserver.machinery import errors


def decoded(value: Any) -> bytes:
    """A ``[]byte`` field's base64 (already checked by :func:`check_base64`)."""
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value)
    except (binascii.Error, ValueError):
        return b""


def check_base64(obj: dict) -> None:
    """``spec.request`` and ``status.certificate`` are []byte: base64 in JSON, as upstream's decoder insists."""
    for section, name in (("spec", "request"), ("status", "certificate")):
        holder = obj.get(section)
        value = holder.get(name) if isinstance(holder, dict) else None
        if value is None or value == "":
            continue
        try:
            if not isinstance(value, str):
                raise ValueError("not a string")
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise errors.bad_request(
                f'CertificateSigningRequest in version "v1" cannot be handled as a CertificateSigningRequest: '
                f"illegal base64 data in {section}.{name}") from None


def parse_csr(pem: bytes) -> x509.CertificateSigningRequest:
    """The PEM ``CERTIFICATE REQUEST`` (upstream's ParseCSR); ValueError with upstream's wording."""
    start = pem.find(b"-----BEGIN ")
    if start < 0 or not pem[start:].startswith(b"-----BEGIN CERTIFICATE REQUEST-----"):
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    try:
        return x509.load_pem_x509_csr(pem[start:])
    except ValueError:
        raise ValueError("x509: malformed certificate request") from None


def certificate_problem(pem: bytes) -> str:
    """Why ``status.certificate`` is not a chain of PEM CERTIFICATE blocks ("" when it is)."""
    if not pem:
        return ""
    blocks = 0
    rest = pem
    while True:
        start = rest.find(b"-----BEGIN ")
        if start < 0:
            break
        header_end = rest.find(b"-----", start + 11)
        if header_end < 0:
            break
        block_type = rest[start + 11:header_end].decode("latin-1")
        end_marker = f"-----END {block_type}-----".encode()
        end = rest.find(end_marker, header_end)
        if end < 0:
            break
        if block_type != "CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{block_type}"'
        body = rest[header_end + 5:end]
        if b":" in body:
            return "no PEM block headers are permitted"
        try:
            x509.load_pem_x509_certificate(rest[start:end + len(end_marker)])
        except ValueError:
            return "x509: malformed certificate"
        blocks += 1
        rest = rest[end + len(end_marker):]
    if blocks == 0:
        return "must contain at least one CERTIFICATE PEM block"
    return ""
