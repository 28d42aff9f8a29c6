"""The CSR approver: kubelet client certificate requests approved after an access review.

kube-controller-manager's ``csrapproving`` controller
(``pkg/controller/certificates/approver/sarapprove.go``), in process and on the
leader only.  A pending request (no certificate, neither Approved nor Denied)
for the ``kubernetes.io/kube-apiserver-client-kubelet`` signer whose CSR is a
kubelet client certificate (``O=system:nodes``, ``CN=system:node:<name>``, no
subject alternative names, usages ``digital signature`` + ``client auth``
(+ ``key encipherment``): the signer's own rule, ``csr_signing.check_kubelet_client``)
is approved when its requester may

* ``create`` ``certificatesigningrequests/selfnodeclient`` and the CN is the
  requester's own name: a node renewing its certificate with the one it has;
* ``create`` ``certificatesigningrequests/nodeclient``: a node joining, with a
  bootstrap token.

The question is asked of the server's authorizer for the requester the request
records (``spec.username``, ``uid``, ``groups``, ``extra``), which is what the
SubjectAccessReview kube-controller-manager creates would be answered.  The
Approved condition has reason ``AutoApproved`` and upstream's message; the
signer (``csr_signing.py``) then issues the certificate.  Nothing grants those
subresources by default: a cluster binds ``system:certificates.k8s.io:
certificatesigningrequests:nodeclient`` to ``system:bootstrappers`` and
``...:selfnodeclient`` to ``system:nodes`` (kubeadm does).  A request that is
recognised but not allowed is looked at again with backoff, as upstream
retries it: a binding may come later.
"""
from __future__ import annotations

from typing import Callable, Hashable, NamedTuple

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.certificates.certificatesigningrequests import (APPROVED, DENIED, KUBE_APISERVER_CLIENT_KUBELET,
                                                                      conditions)
from kapiserver.apis.certificates.pem import decoded, parse_csr
from kapiserver.auth.authorizer import Attributes, Authorizer, decide
from kapiserver.controllers.csr_signing import SignerRefusal, check_kubelet_client
from kapiserver.controllers.informer_controller import InformerController
from kapiserver.machinery import errors
from kapiserver.machinery.user import UserInfo
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.queue import RetryLater
from kapiserver.registry.store import Store

log = Logger()

GROUP = "certificates.k8s.io"
RESOURCE = "certificatesigningrequests"
REASON = "AutoApproved"


def is_node_client(spec: dict, request: x509.CertificateSigningRequest) -> bool:
    """A kubelet client certificate request for the kubelet client signer (upstream's isNodeClientCert)."""
    if spec.get("signerName") != KUBE_APISERVER_CLIENT_KUBELET:
        return False
    try:
        check_kubelet_client(request, [str(u) for u in spec.get("usages") or []])
    except SignerRefusal:
        return False
    return True


def is_self_node_client(spec: dict, request: x509.CertificateSigningRequest) -> bool:
    """One the node asks for itself: the requester is the certificate's CN (isSelfNodeClientCert)."""
    common = request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if spec.get("username") != (str(common[0].value) if common else ""):
        return False
    return is_node_client(spec, request)


class Recognizer(NamedTuple):
    recognize: Callable[[dict, x509.CertificateSigningRequest], bool]
    # the subresource of certificatesigningrequests the requester must be allowed to create
    subresource: str
    message: str

    @property
    def permission(self) -> Attributes:
        return Attributes(verb="create", api_group=GROUP, api_version="*", resource=RESOURCE,
                          subresource=self.subresource)


RECOGNIZERS = (
    Recognizer(is_self_node_client, "selfnodeclient",
               "Auto approving self kubelet client certificate after SubjectAccessReview."),
    Recognizer(is_node_client, "nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview."),
)


def is_pending(obj: dict) -> bool:
    """Neither signed, approved nor denied (what the approver looks at)."""
    if (obj.get("status") or {}).get("certificate"):
        return False
    return not any(c.get("type") in (APPROVED, DENIED) for c in conditions(obj))


def requester(spec: dict) -> UserInfo:
    """The user who created the request, as recorded in its spec."""
    extra = spec.get("extra") or {}
    return UserInfo(name=str(spec.get("username") or ""), groups=tuple(spec.get("groups") or ()),
                    uid=str(spec.get("uid") or ""),
                    extra={str(k): tuple(v or ()) for k, v in extra.items()} if isinstance(extra, dict) else {})


class CSRApprovingController(InformerController):
    queue_name = "csrapproving"

    def __init__(self, csrs: Store, authorizer: Authorizer, reactor: IReactorTime) -> None:
        super().__init__(csrs, reactor)
        self.csrs = csrs
        self.authorizer = authorizer

    def on_event(self, event_type: str, obj: dict) -> None:
        if event_type != "DELETED" and is_pending(obj):
            self.queue.add(obj["metadata"]["name"])

    async def reconcile(self, name: Hashable) -> None:
        try:
            csr_obj = await self.csrs.get("", str(name))
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        if not is_pending(csr_obj):
            return
        spec = csr_obj.get("spec") or {}
        try:
            request = parse_csr(decoded(spec.get("request")))
        except ValueError as e:  # validation keeps these out; the spec cannot change, so no retry
            log.warn('unable to parse csr "{name}": {error}', name=name, error=str(e))
            return
        tried = []
        for recognizer in RECOGNIZERS:
            if not recognizer.recognize(spec, request):
                continue
            tried.append(recognizer.subresource)
            decision = await decide(self.authorizer, requester(spec), recognizer.permission)
            if decision.allowed:
                await self._approve(csr_obj, recognizer.message)
                return
        if tried:
            raise RetryLater(f'recognized csr "{name}" as [{" ".join(tried)}] but subject access review was not '
                             f'approved')

    async def _approve(self, csr_obj: dict, message: str) -> None:
        """Through the approval subresource, compare-and-swap on the version read."""
        name = csr_obj["metadata"]["name"]
        status = dict(csr_obj.get("status") or {})
        status["conditions"] = [*conditions(csr_obj), {"type": APPROVED, "status": "True", "reason": REASON,
                                                       "message": message}]
        try:
            await self.csrs.update("", name, dict(csr_obj, status=status), subresource="approval",
                                   ctx=Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code == 409:  # changed since it was read: look again
                raise RetryLater(f'csr "{name}" changed while it was approved') from None
            raise
        log.info("approved certificate signing request {name} of {user}: {message}", name=name,
                 user=(csr_obj.get("spec") or {}).get("username"), message=message)
