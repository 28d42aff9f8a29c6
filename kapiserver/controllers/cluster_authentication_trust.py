"""The ``extension-apiserver-authentication`` ConfigMap in ``kube-system``, as upstream publishes it.

Extension API servers (and the aggregator's backends) read it to learn whom
to trust: ``client-ca-file`` (the client CA bundle) and, when front-proxy
authentication is on, ``requestheader-client-ca-file``,
``requestheader-allowed-names``, ``requestheader-username-headers``,
``requestheader-group-headers`` and ``requestheader-extra-headers-prefix``
(the lists as JSON arrays).  As upstream's cluster-authentication-trust
controller, what is there is combined with this server's settings (CAs
concatenated without duplicates or expired certificates, lists merged), so
several servers sharing one storage each add theirs; it is rewritten when
someone changes or deletes it.
"""
from __future__ import annotations

import json
import time
from typing import Optional

from OpenSSL import crypto
from twisted.logger import Logger

from kapiserver.auth.authentication import RequestHeaderTrust
from kapiserver.auth.x509 import load_pem_certificates
from kapiserver.controllers.named_object import NamedObjectController
from kapiserver.machinery import errors
from kapiserver.registry.store import Store

log = Logger()
NAMESPACE = "kube-system"
NAME = "extension-apiserver-authentication"
_LISTS = ("requestheader-username-headers", "requestheader-group-headers", "requestheader-extra-headers-prefix",
          "requestheader-allowed-names")


def _certificates(pem: str) -> list[crypto.X509]:
    try:
        return load_pem_certificates(pem.encode()) if pem.strip() else []
    except ValueError:
        return []


def _expired(cert: crypto.X509) -> bool:
    # notAfter as OpenSSL gives it, YYYYMMDDHHMMSSZ, orders as the times do (X509.has_expired would
    # load _strptime, which a start need not: tests/server/test_start_footprint.py)
    return (cert.get_notAfter() or b"") < time.strftime("%Y%m%d%H%M%SZ", time.gmtime()).encode()


def combine_ca_bundles(*bundles: str) -> str:
    """The certificates of every bundle, in order, once each, expired ones dropped."""
    kept: dict[bytes, crypto.X509] = {}  # by DER, in order
    for bundle in bundles:
        for cert in _certificates(bundle):
            der = crypto.dump_certificate(crypto.FILETYPE_ASN1, cert)
            if der not in kept and not _expired(cert):
                kept[der] = cert
    return "".join(crypto.dump_certificate(crypto.FILETYPE_PEM, cert).decode() for cert in kept.values())


def _json_list(value: Optional[str]) -> list[str]:
    if not value:
        return []
    try:
        parsed = json.loads(value)
    except ValueError:
        return []
    return [v for v in parsed if isinstance(v, str)] if isinstance(parsed, list) else []


def _merged(existing: list[str], ours: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for value in [*existing, *ours]:
        if value not in out:
            out.append(value)
    return out


def desired_data(existing: dict, client_ca_pem: bytes, requestheader: Optional[RequestHeaderTrust]) -> dict:
    """The ConfigMap's data: what is there combined with this server's trust."""
    data: dict[str, str] = {}
    client_ca = combine_ca_bundles(existing.get("client-ca-file") or "", client_ca_pem.decode())
    if client_ca:
        data["client-ca-file"] = client_ca
    existing_rh_ca = existing.get("requestheader-client-ca-file") or ""
    rh_ca = combine_ca_bundles(existing_rh_ca, requestheader.ca_pem.decode() if requestheader else "")
    if not rh_ca:
        return data
    ours = {"requestheader-username-headers": requestheader.username_headers if requestheader else (),
            "requestheader-group-headers": requestheader.group_headers if requestheader else (),
            "requestheader-extra-headers-prefix": requestheader.extra_headers_prefix if requestheader else (),
            "requestheader-allowed-names": requestheader.allowed_names if requestheader else ()}
    for key in _LISTS:
        data[key] = json.dumps(_merged(_json_list(existing.get(key)), ours[key]), separators=(",", ":"))
    data["requestheader-client-ca-file"] = rh_ca
    return data


class ClusterAuthenticationTrustController(NamedObjectController):
    namespace, name, queue_name = NAMESPACE, NAME, "cluster-authentication-trust"

    def __init__(self, configmaps: Store, client_ca_pem: bytes, requestheader: Optional[RequestHeaderTrust],
                 reactor) -> None:
        super().__init__(configmaps, reactor)
        self.client_ca_pem = client_ca_pem
        self.requestheader = requestheader

    async def sync(self, current: Optional[dict]) -> None:
        existing = (current or {}).get("data") or {}
        data = desired_data(existing, self.client_ca_pem, self.requestheader)
        if current is not None and existing == data:
            return
        if current is None:
            try:
                await self.store.create(NAMESPACE, {"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": NAME, "namespace": NAMESPACE},
                                                         "data": data})
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
                self.queue.add(NAME)
            return

        def write(obj: Optional[dict]) -> dict:
            assert obj is not None
            obj["data"] = desired_data(obj.get("data") or {}, self.client_ca_pem, self.requestheader)
            obj.pop("binaryData", None)
            return obj
        await self.store.guaranteed_update(NAMESPACE, NAME, write)
