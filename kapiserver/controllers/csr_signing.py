"""The CSR signers: approved requests for the built-in client signers get a certificate from the cluster CA.

kube-controller-manager's ``csrsigning`` controllers, in process and on the
leader only:

* ``kubernetes.io/kube-apiserver-client``: client certificates the API server
  accepts; the usages must include ``client auth`` and may add only
  ``digital signature`` and ``key encipherment`` (the subject is what the
  request says; ``system:masters`` was refused at admission);
* ``kubernetes.io/kube-apiserver-client-kubelet``: the same for kubelets:
  ``O=system:nodes``, ``CN=system:node:<name>``, no subject alternative names,
  usages ``digital signature`` + ``client auth`` (+ ``key encipherment``).

A request is signed once it is Approved, not Failed and has no certificate
yet.  One that breaks its signer's rules gets a ``Failed`` condition
(reason ``SignerValidationFailure``) instead.  The lifetime is the request's
``spec.expirationSeconds`` (at least 600 s), capped by
``controllers.cluster_signing_duration_seconds`` (a year by default).
Signing runs in a thread: RSA keys of any size take a while.
"""
from __future__ import annotations

import base64
import datetime
from typing import Callable, Hashable, Optional

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.internet import threads
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.certificates.certificatesigningrequests import (APPROVED, FAILED, KUBE_APISERVER_CLIENT,
                                                                      KUBE_APISERVER_CLIENT_KUBELET, has_condition)
from kapiserver.apis.certificates.pem import decoded, parse_csr
from kapiserver.controllers.informer_controller import InformerController
from kapiserver.controllers.certificate_authority import CertificateAuthority
from kapiserver.machinery import errors, meta
from kapiserver.registry.store import Store

log = Logger()

MIN_DURATION = datetime.timedelta(minutes=10)


class SignerRefusal(Exception):
    """The request does not meet its signer's rules (becomes a Failed condition)."""


def _check_api_server_client(csr: x509.CertificateSigningRequest, usages: list[str]) -> None:
    has_client_auth = False
    for usage in usages:
        if usage == "client auth":
            has_client_auth = True
        elif usage not in ("digital signature", "key encipherment"):
            raise SignerRefusal(f"invalid usage for client certificate: {usage}")
    if not has_client_auth:
        raise SignerRefusal("missing required usage for client certificate: client auth")


def check_kubelet_client(csr: x509.CertificateSigningRequest, usages: list[str]) -> None:
    """Upstream's ValidateKubeletClientCSR (the approver recognises kubelet requests by it too)."""
    organizations = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if organizations != ["system:nodes"]:
        raise SignerRefusal("subject organization is not system:nodes")
    try:
        sans = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = None
    if sans is not None:
        for kind, message in ((x509.DNSName, "DNS subjectAltNames are not allowed"),
                              (x509.RFC822Name, "Email subjectAltNames are not allowed"),
                              (x509.IPAddress, "IP subjectAltNames are not allowed"),
                              (x509.UniformResourceIdentifier, "URI subjectAltNames are not allowed")):
            if sans.get_values_for_type(kind):
                raise SignerRefusal(message)
    common = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not common or not str(common[0].value).startswith("system:node:"):
        raise SignerRefusal("subject common name does not begin with system:node:")
    wanted = set(usages)
    if wanted not in ({"digital signature", "key encipherment", "client auth"}, {"digital signature", "client auth"}):
        raise SignerRefusal('usages did not match [client auth digital signature key encipherment]')


SIGNERS: dict[str, Callable[[x509.CertificateSigningRequest, list[str]], None]] = {
    KUBE_APISERVER_CLIENT: _check_api_server_client,
    KUBE_APISERVER_CLIENT_KUBELET: check_kubelet_client,
}


def certificate_lifetime(expiration_seconds: Optional[int], maximum: datetime.timedelta) -> datetime.timedelta:
    """Upstream's signer.duration: the asked lifetime, at least 10 minutes, at most the signing duration."""
    if expiration_seconds is None:
        return maximum
    asked = datetime.timedelta(seconds=expiration_seconds)
    if asked > maximum:
        return maximum
    return max(asked, MIN_DURATION)


class CSRSigningController(InformerController):
    queue_name = "certificate"

    def __init__(self, csrs: Store, authority: CertificateAuthority, max_duration_seconds: int, reactor: IReactorTime) -> None:
        super().__init__(csrs, reactor)
        self.csrs = csrs
        self.authority = authority
        self.max_duration = datetime.timedelta(seconds=max_duration_seconds)

    def on_event(self, event_type: str, obj: dict) -> None:
        if event_type != "DELETED" and self._wants_signing(obj):
            self.queue.add(obj["metadata"]["name"])

    @staticmethod
    def _wants_signing(obj: dict) -> bool:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        return (spec.get("signerName") in SIGNERS and has_condition(obj, APPROVED)
                and not has_condition(obj, FAILED) and not status.get("certificate"))

    async def reconcile(self, name: Hashable) -> None:
        try:
            csr_obj = await self.csrs.get("", str(name))
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        if not self._wants_signing(csr_obj):
            return
        spec = csr_obj["spec"]
        usages = [str(u) for u in spec.get("usages") or []]
        try:
            request = parse_csr(decoded(spec.get("request")))
            SIGNERS[spec["signerName"]](request, usages)
        except (ValueError, SignerRefusal) as e:
            await self._fail(csr_obj, str(e))
            return
        lifetime = certificate_lifetime(spec.get("expirationSeconds"), self.max_duration)
        pem = await threads.deferToThread(self.authority.sign, request, usages, lifetime)
        log.info("signed certificate signing request {name} for {subject} ({signer}, {lifetime})", name=name,
                 subject=request.subject.rfc4514_string(), signer=spec["signerName"], lifetime=lifetime)
        await self._write_status(csr_obj, lambda status: status.__setitem__(
            "certificate", base64.b64encode(pem).decode("ascii")))

    async def _fail(self, csr_obj: dict, message: str) -> None:
        log.info("certificate signing request {name} refused by its signer: {message}",
                 name=csr_obj["metadata"]["name"], message=message)

        def add_failure(status: dict) -> None:
            status.setdefault("conditions", []).append({
                "type": FAILED, "status": "True", "reason": "SignerValidationFailure", "message": message,
                "lastUpdateTime": meta.now_rfc3339()})
        await self._write_status(csr_obj, add_failure)

    async def _write_status(self, csr_obj: dict, change: Callable[[dict], None]) -> None:
        """Through the status subresource, compare-and-swap on the version read (a conflict retries)."""
        new = dict(csr_obj)
        status = dict(csr_obj.get("status") or {})
        status["conditions"] = list(status.get("conditions") or [])
        change(status)
        new["status"] = status
        await self.csrs.update("", csr_obj["metadata"]["name"], new, subresource="status")
