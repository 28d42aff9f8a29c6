"""What the server's outgoing HTTPS calls share with Go's: trust roots from a
``caBundle`` and transport failures worded as Go's net/http client words them.

Admission webhooks, conversion webhooks and the authorization webhook all
report a failed call as ``Post "<url>": <why>``; clients and tests match on
those words, so they are kept in one place.

Those callers load ``treq`` and ``twisted.web.client`` (about 0.9 MiB of an idle
process and several milliseconds of a start) in the functions that first make
a call, not at module level: a server with no webhook, no structured
authentication and no extension API server makes no outgoing HTTP call, and
tests/server/test_start_footprint.py checks a start has not loaded them.
"""
from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from twisted.internet import defer, error as net_error, ssl

# a call cut by the request's own deadline (admission webhooks) ...
CONTEXT_DEADLINE = "context deadline exceeded"
# ... or by the http.Client's timeout (authorization and conversion webhooks)
CLIENT_TIMEOUT = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"


def trust_root_from_ca_bundle(ca_bundle: str) -> Any:
    """The trust root of a base64 ``caBundle`` of PEM certificates; ValueError when it is not one."""
    pem = base64.b64decode(ca_bundle, validate=True)  # binascii.Error is a ValueError
    certs = x509.load_pem_x509_certificates(pem)
    return ssl.trustRootFromCertificates(
        [ssl.Certificate.loadPEM(c.public_bytes(serialization.Encoding.PEM)) for c in certs])


def describe_post_failure(failure: BaseException, url: str, timeout_words: str = CONTEXT_DEADLINE) -> str:
    """A failed POST to ``url`` as Go's client reports it: ``Post "<url>": <why>``."""
    from twisted.web.client import ResponseNeverReceived  # as the callers: see the docstring
    if isinstance(failure, ResponseNeverReceived) and failure.reasons:
        failure = failure.reasons[0].value
    parts = urlsplit(url)
    where = f"{parts.hostname}:{parts.port or 443}"
    if isinstance(failure, net_error.ConnectionRefusedError):
        why = f"dial tcp {where}: connect: connection refused"
    elif isinstance(failure, (defer.TimeoutError, defer.CancelledError, net_error.TimeoutError)):
        why = timeout_words
    elif isinstance(failure, net_error.DNSLookupError):
        why = f"dial tcp: lookup {parts.hostname}: no such host"
    elif isinstance(failure, net_error.NoRouteError):
        why = f"dial tcp {where}: connect: no route to host"
    else:
        text = str(failure)
        if "certificate verify failed" in text:
            why = "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        elif "VerificationError" in type(failure).__name__ or "VerificationError" in text or "hostname" in text:
            why = f"tls: failed to verify certificate: x509: certificate is not valid for {parts.hostname}"
        else:
            why = text or type(failure).__name__
    return f'Post "{url}": {why}'
