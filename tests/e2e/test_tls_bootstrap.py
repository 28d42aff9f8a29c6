"""Kubelet TLS bootstrapping against a real kapiserver process, as kubeadm sets it up.

The server runs with ``--enable-bootstrap-token-auth`` and kubeadm's controller
selection (``*,bootstrapsigner,tokencleaner``).  As the admin, the test creates a
bootstrap token Secret and the ClusterRoleBindings kubeadm makes; then, as a
kubelet would (the ``kubernetes`` client and kubectl standing in for it): the
bootstrap token authenticates, a CSR for ``system:node:test-node`` is approved
by the server's approver and signed by its signer, the certificate authenticates
the node, and a renewal CSR made with it is approved as ``selfnodeclient``.
The bootstrap user may do no more than its roles allow; an expired token is
refused and then deleted; ``cluster-info`` is signed as kubeadm's discovery
checks it.
"""
from __future__ import annotations

import base64
import datetime
import http.client
import json
import os
import secrets
import ssl
import string
import tempfile
import urllib.parse

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.trial import unittest

from kapiserver.auth.bootstrap_token import detached_signature
from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server

CONFIG = dict(E2E_CONFIG, authentication={"enable_bootstrap_token_auth": True},
              controllers={"names": ["*", "bootstrapsigner", "tokencleaner"]})
KUBELET_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
NODE = "test-node"
# the group kubeadm gives its node join tokens, and the bindings it makes for it
TOKEN_GROUP = "system:bootstrappers:kubeadm:default-node-token"
KUBEADM_BINDINGS = (
    ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", TOKEN_GROUP),
    ("kubeadm:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
     TOKEN_GROUP),
    ("kubeadm:node-autoapprove-certificate-rotation",
     "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
    # what upstream's Node authorizer (not in kapiserver) grants nodes, creating CSRs among it
    ("nodes", "system:node", "system:nodes"),
)


def random_string(length: int) -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(length))


def rfc3339(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_secret_manifest(token_id: str, token_secret: str, expiration: datetime.datetime, **data: str) -> str:
    """A bootstrap token Secret as ``kubeadm token create`` writes it."""
    values = {"token-id": token_id, "token-secret": token_secret, "expiration": rfc3339(expiration),
              "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
              "auth-extra-groups": TOKEN_GROUP, "description": "a test node's join token", **data}
    return json.dumps({"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
                       "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
                       "stringData": values})


def node_csr(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The request a kubelet makes for its client certificate (O=system:nodes, CN=system:node:<name>)."""
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{NODE}")])
    return (x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
            .public_bytes(serialization.Encoding.PEM))


class TLSBootstrapTests(unittest.TestCase):
    def setUp(self) -> None:
        from kubernetes import client
        self.client = client
        self.server: ServerProcess = shared_server("tls-bootstrap", extra_config=CONFIG)
        self.kubectl = self.server.kubectl
        self.ca = os.path.join(self.server.workdir, "certs", "ca.crt")
        self.dir = tempfile.mkdtemp(dir=self.server.workdir)
        for name, role, group in KUBEADM_BINDINGS:
            self.apply("create", "clusterrolebinding", name, f"--clusterrole={role}", f"--group={group}")

    def apply(self, *create: str) -> None:
        """``kubectl create ...`` made idempotent (the server is shared by the module's tests)."""
        manifest = self.kubectl(*create, "--dry-run=client", "-o", "yaml").stdout
        self.kubectl("apply", "-f", "-", input=manifest)

    # ------------------------------------------------------------ credentials

    def new_token(self, expires_in: datetime.timedelta = datetime.timedelta(hours=1)) -> str:
        token_id, token_secret = random_string(6), random_string(16)
        self.kubectl("create", "-f", "-", input=token_secret_manifest(
            token_id, token_secret, datetime.datetime.now(datetime.timezone.utc) + expires_in))
        return f"{token_id}.{token_secret}"

    def kubeconfig(self, name: str, user: dict) -> str:
        """A kubeconfig for ``user`` (a token, or a client certificate and key), as the kubelet's."""
        path = os.path.join(self.dir, f"{name}.kubeconfig")
        with open(path, "w") as f:
            yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "default",
                            "clusters": [{"name": "default", "cluster": {"server": self.server.server_url,
                                                                         "certificate-authority": self.ca}}],
                            "users": [{"name": name, "user": user}],
                            "contexts": [{"name": "default", "context": {"cluster": "default", "user": name}}]}, f)
        return path

    def api(self, token: str = "", cert: tuple[bytes, ec.EllipticCurvePrivateKey] | None = None):
        configuration = self.client.Configuration()
        configuration.host = self.server.server_url
        configuration.ssl_ca_cert = self.ca
        if token:
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        if cert is not None:
            configuration.cert_file, configuration.key_file = self.write_credentials("node", *cert)
        return self.client.ApiClient(configuration)

    def write_credentials(self, name: str, certificate: bytes, key: ec.EllipticCurvePrivateKey) -> tuple[str, str]:
        cert_path, key_path = os.path.join(self.dir, f"{name}.crt"), os.path.join(self.dir, f"{name}.key")
        with open(cert_path, "wb") as f:
            f.write(certificate)
        with open(key_path, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        return cert_path, key_path

    def whoami(self, kubeconfig: str) -> dict:
        out = self.kubectl("--kubeconfig", kubeconfig, "auth", "whoami", "-o", "json").stdout
        return json.loads(out)["status"]["userInfo"]

    # ------------------------------------------------------------ the CSR dance

    def request_certificate(self, api_client, key: ec.EllipticCurvePrivateKey) -> str:
        """Create a kubelet client CSR as ``api_client``'s user; its name."""
        certificates = self.client.CertificatesV1Api(api_client)
        created = certificates.create_certificate_signing_request(self.client.V1CertificateSigningRequest(
            metadata=self.client.V1ObjectMeta(generate_name="node-csr-"),
            spec=self.client.V1CertificateSigningRequestSpec(
                request=base64.b64encode(node_csr(key)).decode(), signer_name=KUBELET_SIGNER,
                usages=["digital signature", "client auth"], expiration_seconds=24 * 3600)))
        return created.metadata.name

    def issued(self, api_client, name: str):
        """The CSR once it has a certificate, read as ``api_client``'s user (who may get its CSRs)."""
        certificates = self.client.CertificatesV1Api(api_client)

        def signed():
            csr = certificates.read_certificate_signing_request(name)
            return csr if csr.status and csr.status.certificate else None
        return wait_for(signed, timeout=30)

    def check_certificate(self, pem: bytes, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
        certificate = x509.load_pem_x509_certificate(pem)
        with open(self.ca, "rb") as f:
            certificate.verify_directly_issued_by(x509.load_pem_x509_certificate(f.read()))
        self.assertEqual(certificate.subject.rfc4514_string(), f"CN=system:node:{NODE},O=system:nodes")
        self.assertEqual(certificate.public_key().public_numbers(), key.public_key().public_numbers())
        self.assertEqual(list(certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value),
                         [ExtendedKeyUsageOID.CLIENT_AUTH])
        lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
        self.assertEqual(lifetime, datetime.timedelta(hours=24))  # as asked (valid from 5 minutes ago)
        return certificate

    # ------------------------------------------------------------ tests

    def test_a_node_joins_with_a_bootstrap_token_and_rotates_its_certificate(self):
        token = self.new_token()
        token_id = token.split(".")[0]
        bootstrap_conf = self.kubeconfig("bootstrap", {"token": token})
        user = self.whoami(bootstrap_conf)
        self.assertEqual(user["username"], f"system:bootstrap:{token_id}")
        self.assertEqual(user["groups"], ["system:bootstrappers", TOKEN_GROUP, "system:authenticated"])

        # the kubelet's first certificate, asked for with the token
        bootstrap = self.api(token=token)
        key = ec.generate_private_key(ec.SECP256R1())
        name = self.request_certificate(bootstrap, key)
        csr = self.issued(bootstrap, name)
        self.assertEqual(csr.spec.username, f"system:bootstrap:{token_id}")
        approved = [c for c in csr.status.conditions if c.type == "Approved"]
        self.assertEqual([(c.status, c.reason, c.message) for c in approved],
                         [("True", "AutoApproved", "Auto approving kubelet client certificate after "
                                                   "SubjectAccessReview.")])
        pem = base64.b64decode(csr.status.certificate)
        self.check_certificate(pem, key)

        # the certificate is the node's identity
        cert_path, key_path = self.write_credentials("node", pem, key)
        node_conf = self.kubeconfig("node", {"client-certificate": cert_path, "client-key": key_path})
        fingerprint = x509.load_pem_x509_certificate(pem).fingerprint(hashes.SHA256()).hex()
        self.assertEqual(self.whoami(node_conf), {
            "username": f"system:node:{NODE}", "groups": ["system:nodes", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/credential-id": [f"X509SHA256={fingerprint}"]}})

        # rotation: a new key, asked for with the current certificate
        node = self.api(cert=(pem, key))
        new_key = ec.generate_private_key(ec.SECP256R1())
        renewal = self.issued(node, self.request_certificate(node, new_key))
        self.assertEqual(renewal.spec.username, f"system:node:{NODE}")
        self.assertEqual([c.message for c in renewal.status.conditions if c.type == "Approved"],
                         ["Auto approving self kubelet client certificate after SubjectAccessReview."])
        new_pem = base64.b64decode(renewal.status.certificate)
        self.check_certificate(new_pem, new_key)
        cert_path, key_path = self.write_credentials("rotated", new_pem, new_key)
        rotated_conf = self.kubeconfig("rotated", {"client-certificate": cert_path, "client-key": key_path})
        self.assertEqual(self.whoami(rotated_conf)["username"], f"system:node:{NODE}")

    def test_a_bootstrap_token_may_do_only_what_its_roles_allow(self):
        token = self.new_token()
        token_id = token.split(".")[0]
        bootstrap_conf = self.kubeconfig("limited", {"token": token})
        denied = self.kubectl("--kubeconfig", bootstrap_conf, "get", "secrets", "-n", "kube-system", check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn(f'secrets is forbidden: User "system:bootstrap:{token_id}" cannot list resource "secrets" in '
                      f'API group "" in the namespace "kube-system"', denied.stderr)
        # it may create and read CSRs, not delete them
        api = self.api(token=token)
        certificates = self.client.CertificatesV1Api(api)
        name = self.request_certificate(api, ec.generate_private_key(ec.SECP256R1()))
        self.issued(api, name)
        with self.assertRaises(self.client.exceptions.ApiException) as refused:
            certificates.delete_certificate_signing_request(name)
        self.assertEqual(refused.exception.status, 403)
        self.assertEqual(json.loads(refused.exception.body)["reason"], "Forbidden")
        # nor approve one the approver leaves alone (not a kubelet's): it stays pending
        key = ec.generate_private_key(ec.SECP256R1())
        other = certificates.create_certificate_signing_request(self.client.V1CertificateSigningRequest(
            metadata=self.client.V1ObjectMeta(generate_name="client-csr-"),
            spec=self.client.V1CertificateSigningRequestSpec(
                request=base64.b64encode(x509.CertificateSigningRequestBuilder().subject_name(x509.Name(
                    [x509.NameAttribute(NameOID.COMMON_NAME, "someone")])).sign(key, hashes.SHA256()).public_bytes(
                    serialization.Encoding.PEM)).decode(),
                signer_name="kubernetes.io/kube-apiserver-client", usages=["client auth"]))).metadata.name
        approve = self.kubectl("--kubeconfig", bootstrap_conf, "certificate", "approve", other, check=False)
        self.assertNotEqual(approve.returncode, 0)
        self.assertIn(f'certificatesigningrequests.certificates.k8s.io "{other}" is forbidden: User '
                      f'"system:bootstrap:{token_id}" cannot update resource "certificatesigningrequests/approval" '
                      f'in API group "certificates.k8s.io" at the cluster scope', approve.stderr)
        self.assertIsNone(certificates.read_certificate_signing_request(other).status.conditions)

    def test_an_expired_token_is_refused_then_deleted(self):
        token = self.new_token(expires_in=datetime.timedelta(seconds=15))
        token_id = token.split(".")[0]
        conf = self.kubeconfig("short", {"token": token})
        self.assertEqual(self.whoami(conf)["username"], f"system:bootstrap:{token_id}")

        def refused():
            result = self.kubectl("--kubeconfig", conf, "auth", "whoami", check=False)
            return result.returncode != 0 and "Unauthorized" in result.stderr
        wait_for(refused, timeout=60, interval=1)
        # and the token cleaner removes its Secret
        wait_for(lambda: self.kubectl("get", "secret", "-n", "kube-system", f"bootstrap-token-{token_id}",
                                      check=False).returncode != 0, timeout=30)
        gone = self.kubectl("get", "secret", "-n", "kube-system", f"bootstrap-token-{token_id}", check=False)
        self.assertIn("NotFound", gone.stderr)

    def test_cluster_info_is_signed_for_kubeadm_discovery(self):
        token = self.new_token()
        token_id, token_secret = token.split(".")
        with open(self.ca, "rb") as f:
            ca_data = base64.b64encode(f.read()).decode()
        kubeconfig = yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "", "cluster": {
            "server": self.server.server_url, "certificate-authority-data": ca_data}}]})
        self.apply("create", "configmap", "cluster-info", "-n", "kube-public",
                   f"--from-literal=kubeconfig={kubeconfig}")
        # kubeadm lets anyone read it: discovery happens before the joining node has credentials
        self.apply("create", "role", "kubeadm:bootstrap-signer-clusterinfo", "-n", "kube-public", "--verb=get",
                   "--resource=configmaps", "--resource-name=cluster-info")
        self.apply("create", "rolebinding", "kubeadm:bootstrap-signer-clusterinfo", "-n", "kube-public",
                   "--role=kubeadm:bootstrap-signer-clusterinfo", "--user=system:anonymous")

        def signed():
            data = self.anonymous_get("/api/v1/namespaces/kube-public/configmaps/cluster-info").get("data") or {}
            return data if f"jws-kubeconfig-{token_id}" in data else None
        data = wait_for(signed, timeout=30)
        # what kubeadm join checks: the signature recomputed from the token it was given
        self.assertEqual(data[f"jws-kubeconfig-{token_id}"],
                         detached_signature(data["kubeconfig"], token_id, token_secret))

    def anonymous_get(self, path: str) -> dict:
        url = urllib.parse.urlsplit(self.server.server_url)
        context = ssl.create_default_context(cafile=self.ca)
        connection = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=30)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = json.loads(response.read())
            self.assertEqual(response.status, 200, body)
            return body
        finally:
            connection.close()
