"""Who may approve and sign CertificateSigningRequests, and what kube-apiserver-client may not sign.

Upstream's ``plugin/pkg/admission/certificates``:

* CertificateApproval: an update of ``certificatesigningrequests/approval``
  needs ``approve`` on the ``signers`` resource of ``certificates.k8s.io``
  named by the request's signer (``example.com/my-signer``) or its domain
  (``example.com/*``), besides the ``update`` on the subresource that the
  authorization filter already checked;
* CertificateSigning: an update of ``/status`` that changes the certificate
  or the conditions needs ``sign`` on the signer, likewise;
* CertificateSubjectRestriction: a request for the
  ``kubernetes.io/kube-apiserver-client`` signer may not ask for the
  ``system:masters`` group (that would be a cluster-admin certificate).

All three ask the server's one authorizer, as every request does.  They are
registered in ``admission/plugins.py`` and run in the server's one chain, in
upstream's order.
"""
from __future__ import annotations

from typing import Any, Optional

from cryptography.x509.oid import NameOID

from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.apis.certificates.pem import decoded, parse_csr
from kapiserver.auth import authorizer as authz
from kapiserver.machinery.user import MASTERS_GROUP, UserInfo
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes

GROUP = "certificates.k8s.io"
RESOURCE = "certificatesigningrequests"
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"


def _is_csr(attrs: Attributes) -> bool:
    return attrs.rtype.group == GROUP and attrs.rtype.plural == RESOURCE


def _forbidden(attrs: Attributes, why: str) -> errors.StatusError:
    """admission.NewForbidden: ``<resource>.<group> "<name>" is forbidden: <why>``."""
    return errors.forbidden(RESOURCE, GROUP, attrs.name, why)


def _signer(obj: Optional[dict]) -> str:
    return str(((obj or {}).get("spec") or {}).get("signerName") or "")


async def authorized_for_signer(authorizer: authz.Authorizer, user: Optional[UserInfo], verb: str, signer: str) -> bool:
    """Upstream's IsAuthorizedForSignerName: the signer by name, then ``<domain>/*``.

    A write without a user is the server's own (the in-process signers, which
    kube-controller-manager would run with the right to sign): allowed.
    """
    if user is None:
        return True
    domain = signer.split("/", 1)[0]
    for name in (signer, f"{domain}/*"):
        attributes = authz.Attributes(verb=verb, resource_request=True, api_group=GROUP, api_version="*",
                                      resource="signers", name=name)
        try:
            decision = await authz.decide(authorizer, user, attributes)
        except Exception:  # an authorizer that failed does not allow (upstream logs and goes on)
            continue
        if decision.allowed:
            return True
    return False


class CertificateApproval(AdmissionPlugin):
    name = "CertificateApproval"
    validating = True
    operations = (UPDATE,)
    resources = frozenset({(GROUP, RESOURCE)})

    def __init__(self, authorizer: authz.Authorizer) -> None:
        self.authorizer = authorizer

    async def validate(self, attrs: Attributes) -> None:
        if attrs.operation != UPDATE or attrs.subresource != "approval" or not _is_csr(attrs):
            return
        signer = _signer(attrs.old_obj)
        if not await authorized_for_signer(self.authorizer, attrs.user, "approve", signer):
            raise _forbidden(attrs, f'user not permitted to approve requests with signerName "{signer}"')


class CertificateSigning(AdmissionPlugin):
    name = "CertificateSigning"
    validating = True
    operations = (UPDATE,)
    resources = frozenset({(GROUP, RESOURCE)})

    def __init__(self, authorizer: authz.Authorizer) -> None:
        self.authorizer = authorizer

    async def validate(self, attrs: Attributes) -> None:
        if attrs.operation != UPDATE or attrs.subresource != "status" or not _is_csr(attrs):
            return
        old = (attrs.old_obj or {}).get("status") or {}
        new = (attrs.obj or {}).get("status") or {}
        if (old.get("certificate") or "") == (new.get("certificate") or "") and \
                (old.get("conditions") or []) == (new.get("conditions") or []):
            return
        signer = _signer(attrs.old_obj)
        if not await authorized_for_signer(self.authorizer, attrs.user, "sign", signer):
            raise _forbidden(attrs, f'user not permitted to sign requests with signerName "{signer}"')


class CertificateSubjectRestriction(AdmissionPlugin):
    name = "CertificateSubjectRestriction"
    validating = True
    operations = (CREATE,)
    resources = frozenset({(GROUP, RESOURCE)})

    async def validate(self, attrs: Attributes) -> None:
        if attrs.operation != CREATE or attrs.subresource or not _is_csr(attrs):
            return
        if _signer(attrs.obj) != KUBE_APISERVER_CLIENT:
            return
        try:
            csr = parse_csr(decoded(((attrs.obj or {}).get("spec") or {}).get("request")))
        except ValueError as e:
            raise _forbidden(attrs, f"failed to parse CSR: {e}") from None
        groups = [str(a.value) for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
        if MASTERS_GROUP in groups:
            raise _forbidden(attrs, f"use of {KUBE_APISERVER_CLIENT} signer with {MASTERS_GROUP} group is not "
                                    f"allowed")


def certificate_approval(config: Optional[bytes], deps: AdmissionDeps) -> CertificateApproval:
    return CertificateApproval(deps.authorizer)


def certificate_signing(config: Optional[bytes], deps: AdmissionDeps) -> CertificateSigning:
    return CertificateSigning(deps.authorizer)


def certificate_subject_restriction(config: Optional[bytes], deps: AdmissionDeps) -> CertificateSubjectRestriction:
    return CertificateSubjectRestriction()
