"""CertificateSigningRequests in process: upstream's validation and strategy, the approval subresource,
who may approve and sign (asked of the server's authorizer), and the signers."""
from __future__ import annotations

import base64
import datetime
import os
from typing import Optional

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kapiserver.auth.authorizer import AlwaysAllow, Attributes, Decision
from kapiserver.machinery.user import UserInfo
from kapiserver.server.certs import ensure_certificates
from kapiserver.testing.cases import ServerTestCase, run

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CLIENT = "kubernetes.io/kube-apiserver-client"
KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"


def csr_pem(common_name: str, *organizations: str, sans: Optional[list] = None) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    names.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def manifest(name: str, pem: bytes, signer: str = CLIENT, usages=("client auth",), **spec) -> dict:
    body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer, "usages": list(usages)}}
    body["spec"].update(spec)
    return body


def condition(kind: str, reason: str = "Test") -> dict:
    return {"type": kind, "status": "True", "reason": reason, "message": "by the test"}


class CertificateSigningRequestTests(ServerTestCase):
    async def create(self, name: str, **kwargs) -> dict:
        reply = await self.client.post(CSRS, manifest(name, csr_pem(name, "dev"), **kwargs))
        self.assertEqual(reply.code, 201, reply.body)
        return reply.body

    @run
    async def test_the_requester_is_recorded_and_status_starts_empty(self):
        body = manifest("alice", csr_pem("alice", "dev"), username="mallory", groups=["system:masters"])
        body["status"] = {"conditions": [condition("Approved")]}
        reply = await self.client.post(CSRS, body)
        self.assertEqual(reply.code, 201, reply.body)
        spec = reply.body["spec"]
        self.assertEqual(spec["username"], "system:anonymous")
        self.assertEqual(spec["groups"], ["system:unauthenticated"])
        self.assertEqual(reply.body["status"], {})
        table = await self.client.get(f"{CSRS}/alice",
                                      headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual([c["name"] for c in table.body["columnDefinitions"]],
                         ["Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"])
        self.assertEqual(table.body["rows"][0]["cells"][2:], [CLIENT, "system:anonymous", "<none>", "Pending"])

    @run
    async def test_validation_as_upstream(self):
        cases = [
            (manifest("a", b"not a pem"), "spec.request", "PEM block type must be CERTIFICATE REQUEST"),
            (manifest("b", csr_pem("b"), usages=()), "spec.usages", "Required value"),
            (manifest("c", csr_pem("c"), usages=("client auth", "client auth")), "spec.usages[1]",
             'Duplicate value: "client auth"'),
            (manifest("d", csr_pem("d"), usages=("teleport",)), "spec.usages[0]", 'Unsupported value: "teleport"'),
            (manifest("e", csr_pem("e"), signer="example"), "spec.signerName",
             "must be a fully qualified domain and path of the form 'example.com/signer-name'"),
            (manifest("f", csr_pem("f"), signer="kubernetes.io/legacy-unknown"), "spec.signerName",
             "the legacy signerName is not allowed via this API version"),
            (manifest("g", csr_pem("g"), expirationSeconds=599), "spec.expirationSeconds",
             "may not specify a duration less than 600 seconds (10 minutes)"),
        ]
        for body, field, message in cases:
            reply = await self.client.post(CSRS, body)
            self.assertEqual(reply.code, 422, (field, reply.body))
            causes = reply.body["details"]["causes"]
            self.assertIn(field, [c["field"] for c in causes])
            self.assertIn(message, reply.body["message"])
        bad_base64 = manifest("h", csr_pem("h"))
        bad_base64["spec"]["request"] = "%%%"
        self.assertEqual((await self.client.post(CSRS, bad_base64)).code, 400)

    @run
    async def test_spec_is_immutable_and_the_main_resource_never_changes_status(self):
        created = await self.create("bob")
        changed = dict(created, spec=dict(created["spec"], signerName="example.com/other", usages=["server auth"]))
        changed["status"] = {"conditions": [condition("Approved")], "certificate": "Zm9v"}
        reply = await self.client.put(f"{CSRS}/bob", changed)
        self.assertEqual(reply.code, 200, reply.body)
        self.assertEqual(reply.body["spec"], created["spec"])
        self.assertEqual(reply.body["status"], {})

    @run
    async def test_approval_sets_conditions_only(self):
        created = await self.create("carol")
        approved = dict(created, status={"conditions": [condition("Approved")], "certificate": "Zm9v"})
        reply = await self.client.put(f"{CSRS}/carol/approval", approved)
        self.assertEqual(reply.code, 200, reply.body)
        [cond] = reply.body["status"]["conditions"]
        self.assertEqual((cond["type"], cond["status"]), ("Approved", "True"))
        self.assertTrue(cond["lastUpdateTime"] and cond["lastTransitionTime"])
        self.assertNotIn("certificate", reply.body["status"])
        got = await self.client.get(f"{CSRS}/carol/approval")
        self.assertEqual(got.body["status"]["conditions"][0]["type"], "Approved")
        # Denied next to Approved, or an Approved removed: refused
        both = dict(reply.body, status={"conditions": [cond, condition("Denied")]})
        refused = await self.client.put(f"{CSRS}/carol/approval", both)
        self.assertEqual(refused.code, 422)
        self.assertIn("Approved and Denied conditions are mutually exclusive", refused.body["message"])
        removed = await self.client.put(f"{CSRS}/carol/approval", dict(reply.body, status={"conditions": []}))
        self.assertEqual(removed.code, 422)
        self.assertIn('updates may not remove a condition of type "Approved"', removed.body["message"])

    @run
    async def test_status_sets_the_certificate_once_but_not_approval(self):
        created = await self.create("dave")
        sneaky = dict(created, status={"conditions": [condition("Approved")]})
        refused = await self.client.put(f"{CSRS}/dave/status", sneaky)
        self.assertEqual(refused.code, 422)
        self.assertIn('updates may not add a condition of type "Approved"', refused.body["message"])
        garbage = await self.client.put(f"{CSRS}/dave/status", dict(created, status={"certificate": "Zm9v"}))
        self.assertEqual(garbage.code, 422)
        self.assertIn("must contain at least one CERTIFICATE PEM block", garbage.body["message"])
        cert = base64.b64encode(self._some_certificate()).decode()
        stored = await self.client.put(f"{CSRS}/dave/status", dict(created, status={"certificate": cert}))
        self.assertEqual(stored.code, 200, stored.body)
        again = await self.client.put(f"{CSRS}/dave/status",
                                      dict(stored.body, status={"certificate": base64.b64encode(
                                          self._some_certificate()).decode()}))
        self.assertEqual(again.code, 422)
        self.assertIn("updates may not modify existing certificate content", again.body["message"])

    @staticmethod
    def _some_certificate() -> bytes:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
                .sign(key, hashes.SHA256()))
        return cert.public_bytes(serialization.Encoding.PEM)

    @run
    async def test_system_masters_cannot_be_requested_from_the_client_signer(self):
        reply = await self.client.post(CSRS, manifest("root", csr_pem("root", "system:masters")))
        self.assertEqual(reply.code, 403)
        self.assertEqual(reply.body["message"],
                         'certificatesigningrequests.certificates.k8s.io "root" is forbidden: use of '
                         'kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed')
        other = await self.client.post(CSRS, manifest("root2", csr_pem("root", "system:masters"),
                                                      signer="example.com/mine"))
        self.assertEqual(other.code, 201)

    @run
    async def test_discovery_lists_the_approval_subresource(self):
        reply = await self.client.get("/apis/certificates.k8s.io/v1")
        names = [r["name"] for r in reply.body["resources"]]
        self.assertEqual(names, ["certificatesigningrequests", "certificatesigningrequests/approval",
                                 "certificatesigningrequests/status"])
        self.assertEqual(reply.body["resources"][0]["shortNames"], ["csr"])


class SignerPermissions(AlwaysAllow):
    """Allows everything but ``approve``/``sign`` on signers, which only the listed names get."""

    def __init__(self, approvable: tuple[str, ...] = (), signable: tuple[str, ...] = ()) -> None:
        self.approvable = approvable
        self.signable = signable
        self.asked: list[Attributes] = []

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        if attributes.resource == "signers":
            self.asked.append(attributes)
            names = self.approvable if attributes.verb == "approve" else self.signable
            return Decision(attributes.name in names)
        return Decision(True)


class ApprovalPermissionTests(ServerTestCase):
    """A user without ``approve`` on the signer cannot approve, whatever else they may do."""

    settings = {"authorizer": SignerPermissions(approvable=("example.com/*",), signable=())}

    @run
    async def test_approve_needs_the_signer_by_name_or_domain(self):
        authorizer = self.settings["authorizer"]
        for name, signer in (("e", CLIENT), ("f", "example.com/team-a")):
            created = await self.client.post(CSRS, manifest(name, csr_pem(name), signer=signer))
            self.assertEqual(created.code, 201)
        approved = dict(created.body, status={"conditions": [condition("Approved")]})
        ok = await self.client.put(f"{CSRS}/f/approval", approved)
        self.assertEqual(ok.code, 200, ok.body)
        # asked for the exact name first, then the domain wildcard (as upstream)
        self.assertEqual([(a.verb, a.name, a.api_group, a.api_version) for a in authorizer.asked[-2:]],
                         [("approve", "example.com/team-a", "certificates.k8s.io", "*"),
                          ("approve", "example.com/*", "certificates.k8s.io", "*")])
        other = (await self.client.get(f"{CSRS}/e")).body
        denied = await self.client.put(f"{CSRS}/e/approval", dict(other, status={"conditions": [
            condition("Approved")]}))
        self.assertEqual(denied.code, 403)
        self.assertEqual(denied.body["reason"], "Forbidden")
        self.assertEqual(denied.body["message"],
                         'certificatesigningrequests.certificates.k8s.io "e" is forbidden: user not permitted to '
                         'approve requests with signerName "kubernetes.io/kube-apiserver-client"')
        self.assertEqual((await self.client.get(f"{CSRS}/e")).body["status"], {})
        # and a certificate through /status needs "sign"
        signed = await self.client.put(f"{CSRS}/f/status", dict(ok.body, status=dict(
            ok.body["status"], certificate=base64.b64encode(CertificateSigningRequestTests._some_certificate())
            .decode())))
        self.assertEqual(signed.code, 403)
        self.assertIn('user not permitted to sign requests with signerName "example.com/team-a"',
                      signed.body["message"])


class SignerTests(ServerTestCase):
    """The signers, with a real cluster CA in a temporary cert_dir."""

    async def _start(self) -> None:
        self.cert_dir = os.path.abspath(self.mktemp())
        self.bundle = ensure_certificates(self.cert_dir)
        # the signers alone: under AlwaysAllow the approver would approve kubelet requests itself
        self.settings = {"cert_dir": self.cert_dir, "cluster_signing_duration_seconds": 7200,
                         "controllers": ["*", "-csrapproving"]}
        await super()._start()

    async def approve(self, name: str, pem: bytes, **kwargs) -> dict:
        created = await self.client.post(CSRS, manifest(name, pem, **kwargs))
        self.assertEqual(created.code, 201, created.body)
        approved = dict(created.body, status={"conditions": [condition("Approved", "KubectlApprove")]})
        reply = await self.client.put(f"{CSRS}/{name}/approval", approved)
        self.assertEqual(reply.code, 200, reply.body)

        async def settled():
            status = (await self.client.get(f"{CSRS}/{name}")).body["status"]
            done = status.get("certificate") or any(c["type"] == "Failed" for c in status.get("conditions", []))
            return status if done else None
        return await self.wait_for(settled, timeout=10)

    def assert_lifetime(self, cert: x509.Certificate, seconds: int, before: datetime.datetime,
                        after: datetime.datetime) -> None:
        """``cert`` is valid for ``seconds`` from when it was signed, between ``before`` and ``after``,
        and from five minutes before that (upstream's backdating for clock skew)."""
        backdate = datetime.timedelta(minutes=5)
        self.assertEqual(cert.not_valid_after_utc - cert.not_valid_before_utc,
                         datetime.timedelta(seconds=seconds) + backdate)
        signed = cert.not_valid_before_utc + backdate  # certificates count whole seconds
        self.assertTrue(before.replace(microsecond=0) <= signed <= after, (before, signed, after))

    @run
    async def test_an_approved_client_request_is_signed_by_the_cluster_ca(self):
        pem = csr_pem("jane", "dev", "qa")
        before = datetime.datetime.now(datetime.timezone.utc)
        status = await self.approve("jane", pem, expirationSeconds=3600,
                                    usages=("digital signature", "key encipherment", "client auth"))
        after = datetime.datetime.now(datetime.timezone.utc)
        cert = x509.load_pem_x509_certificate(base64.b64decode(status["certificate"]))
        ca = x509.load_pem_x509_certificate(self.bundle.ca_cert_pem)
        cert.verify_directly_issued_by(ca)
        request = x509.load_pem_x509_csr(pem)
        self.assertEqual(cert.subject, request.subject)
        self.assertEqual(cert.public_key().public_numbers(), request.public_key().public_numbers())
        self.assert_lifetime(cert, 3600, before, after)
        self.assertEqual(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca, False)
        self.assertEqual(list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value),
                         [ExtendedKeyUsageOID.CLIENT_AUTH])
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        self.assertTrue(usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign)

    @run
    async def test_lifetime_is_capped_by_the_signing_duration(self):
        before = datetime.datetime.now(datetime.timezone.utc)
        status = await self.approve("long", csr_pem("long"), expirationSeconds=30 * 86400)
        after = datetime.datetime.now(datetime.timezone.utc)
        cert = x509.load_pem_x509_certificate(base64.b64decode(status["certificate"]))
        self.assert_lifetime(cert, 7200, before, after)

    @run
    async def test_requests_breaking_the_signer_rules_fail(self):
        status = await self.approve("srv", csr_pem("srv"), usages=("client auth", "server auth"))
        failed = [c for c in status["conditions"] if c["type"] == "Failed"]
        self.assertEqual(len(failed), 1)
        self.assertEqual(failed[0]["reason"], "SignerValidationFailure")
        self.assertEqual(failed[0]["message"], "invalid usage for client certificate: server auth")
        self.assertNotIn("certificate", status)
        kubelet = await self.approve("node-bad", csr_pem("node-1", "system:nodes"), signer=KUBELET)
        self.assertIn("subject common name does not begin with system:node:",
                      [c.get("message") for c in kubelet["conditions"]])

    @run
    async def test_kubelet_client_requests(self):
        status = await self.approve("node-1", csr_pem("system:node:node-1", "system:nodes"), signer=KUBELET,
                                    usages=("digital signature", "client auth"))
        cert = x509.load_pem_x509_certificate(base64.b64decode(status["certificate"]))
        self.assertEqual(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value, "system:node:node-1")

    @run
    async def test_pending_and_denied_requests_are_not_signed(self):
        pending = await self.client.post(CSRS, manifest("pending", csr_pem("pending")))
        denied = await self.client.post(CSRS, manifest("denied", csr_pem("denied")))
        await self.client.put(f"{CSRS}/denied/approval",
                              dict(denied.body, status={"conditions": [condition("Denied")]}))
        # a request approved later is signed; by then the other two would have been
        await self.approve("later", csr_pem("later"))
        for name in ("pending", "denied"):
            self.assertNotIn("certificate", (await self.client.get(f"{CSRS}/{name}")).body["status"])
        self.assertEqual(pending.code, 201)
