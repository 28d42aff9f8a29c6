"""Who may do what, end to end on a real server process: onboarding a user with openssl and kubectl
alone, the audit log a person reads, Secrets encrypted at rest, and private files."""
from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import tempfile
import time
import uuid

from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server

AUDIT_POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ['/healthz*', '/readyz*', '/livez*', '/openapi*', '/api', '/apis*', '/version']
- level: Metadata
  resources: [{group: "", resources: [secrets]}]
- level: RequestResponse
  resources:
  - {group: "", resources: [configmaps, serviceaccounts/token]}
  - {group: authentication.k8s.io, resources: [tokenreviews]}
- level: Metadata
"""
KEY1 = base64.b64encode(bytes(range(32))).decode()
KEY2 = base64.b64encode(bytes(range(100, 132))).decode()


def encryption_config(*keys: tuple[str, str], identity_first: bool = False) -> str:
    aescbc = "    - aescbc:\n        keys:\n" + "".join(
        f"          - {{name: {name}, secret: {secret}}}\n" for name, secret in keys)
    providers = ("    - identity: {}\n" + aescbc) if identity_first else (aescbc + "    - identity: {}\n")
    return ("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
            "  - resources: [secrets]\n    providers:\n" + providers)


def write(path: str, text: str) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


_FILES: dict[str, str] = {}


def security_server() -> ServerProcess:
    """One server for the tests below: an audit policy and log, Secrets encrypted with key1, and
    CSR certificates capped at two hours."""
    files = _FILES.setdefault("dir", tempfile.mkdtemp(prefix="kapiserver-security-"))
    config = {
        **E2E_CONFIG,
        "audit": {"policy_file": write(os.path.join(files, "policy.yaml"), AUDIT_POLICY),
                  "log_path": os.path.join(files, "audit", "audit.log")},
        "encryption_provider_config": write(os.path.join(files, "encryption.yaml"),
                                            encryption_config(("key1", KEY1))),
        "controllers": {"cluster_signing_duration_seconds": 7200},
    }
    return shared_server("security", extra_config=config)


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


class OnboardingTests(unittest.TestCase):
    """A person onboards a user with kubectl alone: key, CSR, approve, fetch, use."""

    def setUp(self):
        self.server = security_server()
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def request(self, name: str, subject: str, expiration: int = 86400) -> str:
        key, csr = os.path.join(self.dir, f"{name}.key"), os.path.join(self.dir, f"{name}.csr")
        openssl("genrsa", "-out", key, "2048")
        openssl("req", "-new", "-key", key, "-out", csr, "-subj", subject)
        with open(csr, "rb") as f:
            request = base64.b64encode(f.read()).decode()
        self.server.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client",
                     "expirationSeconds": expiration, "usages": ["client auth"]}}))
        return key

    def test_onboard_a_user_and_use_the_certificate(self):
        name = f"jane-{uuid.uuid4().hex[:6]}"
        key = self.request(name, f"/CN={name}/O=developers")
        pending = self.server.kubectl("get", "csr", name).stdout
        self.assertIn("Pending", pending)
        self.assertIn("kapiserver-admin", pending)  # the requester column
        self.assertIn(f"certificatesigningrequest.certificates.k8s.io/{name} approved",
                      self.server.kubectl("certificate", "approve", name).stdout)
        issued = wait_for(lambda: self.server.kubectl(
            "get", "csr", name, "-o", "jsonpath={.status.certificate}").stdout)
        crt = os.path.join(self.dir, f"{name}.crt")
        with open(crt, "wb") as f:
            f.write(base64.b64decode(issued))
        dates = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-enddate", "-subject", "-issuer"],
                               capture_output=True, text=True, check=True).stdout
        self.assertIn("CN=kapiserver-ca", dates.replace(" = ", "="))
        self.assertIn(name, dates)
        # capped by --cluster-signing-duration (2h here), though a day was asked for
        end = subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-checkend", str(2 * 3600 + 60)],
                             capture_output=True)
        self.assertEqual(end.returncode, 1)  # expires within 2 h (+ slack)
        self.assertEqual(subprocess.run(["openssl", "x509", "-in", crt, "-noout", "-checkend", "7000"],
                                        capture_output=True).returncode, 0)
        self.assertIn("Approved", self.server.kubectl("get", "csr", name).stdout)
        # the new user's kubeconfig entry, with kubectl too
        self.server.kubectl("config", "set-credentials", name, f"--client-key={key}",
                            f"--client-certificate={crt}", "--embed-certs=true")
        self.server.kubectl("config", "set-context", name, "--cluster=kapiserver", f"--user={name}")
        whoami = self.server.kubectl("--context", name, "auth", "whoami", "-o", "json").stdout
        user = json.loads(whoami)["status"]["userInfo"]
        self.assertEqual(user["username"], name)
        self.assertEqual(user["groups"], ["developers", "system:authenticated"])

    def onboard(self, name: str) -> str:
        """A user with a signed certificate and a kubeconfig context of their own (the context name)."""
        key = self.request(name, f"/CN={name}")
        self.server.kubectl("certificate", "approve", name)
        issued = wait_for(lambda: self.server.kubectl(
            "get", "csr", name, "-o", "jsonpath={.status.certificate}").stdout)
        crt = os.path.join(self.dir, f"{name}.crt")
        with open(crt, "wb") as f:
            f.write(base64.b64decode(issued))
        self.server.kubectl("config", "set-credentials", name, f"--client-key={key}",
                            f"--client-certificate={crt}", "--embed-certs=true")
        self.server.kubectl("config", "set-context", name, "--cluster=kapiserver", f"--user={name}")
        return name

    def test_approving_needs_approve_on_the_signer(self):
        """With RBAC: update on certificatesigningrequests/approval is not enough, as upstream."""
        approver = self.onboard(f"approver-{uuid.uuid4().hex[:6]}")
        pending = f"pending-{uuid.uuid4().hex[:6]}"
        self.request(pending, f"/CN={pending}")
        refused = self.server.kubectl("--context", approver, "certificate", "approve", pending, check=False)
        self.assertIn("forbidden", refused.stderr)  # may not even read CSRs yet
        role = f"{approver}-csr"
        self.server.kubectl("create", "clusterrole", role, "--verb=get,list,watch",
                            "--resource=certificatesigningrequests")
        self.server.kubectl("create", "clusterrolebinding", role, f"--clusterrole={role}", f"--user={approver}")
        self.server.kubectl("create", "clusterrole", f"{role}-approval", "--verb=update",
                            "--resource=certificatesigningrequests/approval")
        self.server.kubectl("create", "clusterrolebinding", f"{role}-approval", f"--clusterrole={role}-approval",
                            f"--user={approver}")
        refused = wait_for(lambda: (lambda r: r if "not permitted" in r.stderr else None)(self.server.kubectl(
            "--context", approver, "certificate", "approve", pending, check=False)))
        self.assertIn('user not permitted to approve requests with signerName '
                      '"kubernetes.io/kube-apiserver-client"', refused.stderr)
        self.assertIn("Pending", self.server.kubectl("get", "csr", pending).stdout)
        self.server.kubectl("apply", "-f", "-", input=json.dumps({  # (signers is no served resource: a manifest)
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{role}-signer"},
            "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"],
                       "resourceNames": ["kubernetes.io/kube-apiserver-client"]}]}))
        self.server.kubectl("create", "clusterrolebinding", f"{role}-signer", f"--clusterrole={role}-signer",
                            f"--user={approver}")
        wait_for(lambda: self.server.kubectl("--context", approver, "certificate", "approve", pending,
                                             check=False).returncode == 0)
        self.assertIn("Approved", self.server.kubectl("get", "csr", pending).stdout)

    def test_deny_and_masters_refusal(self):
        name = f"eve-{uuid.uuid4().hex[:6]}"
        self.request(name, f"/CN={name}")
        self.server.kubectl("certificate", "deny", name)
        self.assertIn("Denied", self.server.kubectl("get", "csr", name).stdout)
        again = self.server.kubectl("certificate", "approve", name, check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("is already Denied", again.stderr)
        time.sleep(1)
        self.assertEqual(self.server.kubectl("get", "csr", name, "-o", "jsonpath={.status.certificate}").stdout, "")
        root = f"root-{uuid.uuid4().hex[:6]}"
        with self.assertRaises(AssertionError) as refused:
            self.request(root, f"/CN={root}/O=system:masters")
        self.assertIn("use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
                      str(refused.exception))


class AuditTests(unittest.TestCase):
    def setUp(self):
        self.server = security_server()
        self.log_path = self.server.extra_config["audit"]["log_path"]

    def events(self, predicate) -> list[dict]:
        with open(self.log_path) as f:
            return [e for e in (json.loads(line) for line in f if line.strip()) if predicate(e)]

    def test_kubectl_requests_are_recorded_by_the_policy(self):
        name = f"audited-{uuid.uuid4().hex[:6]}"
        self.server.kubectl("create", "configmap", name, "--from-literal=color=blue")
        self.server.kubectl("create", "secret", "generic", name, "--from-literal=password=hunter2")
        configmap = wait_for(lambda: self.events(lambda e: e.get("objectRef", {}).get("name") == name
                                                 and e["objectRef"]["resource"] == "configmaps"
                                                 and e["verb"] == "create"))
        self.assertEqual(configmap[0]["level"], "RequestResponse")
        self.assertEqual(configmap[0]["requestObject"]["data"], {"color": "blue"})
        self.assertEqual(configmap[0]["user"]["username"], "kapiserver-admin")
        self.assertIn("system:masters", configmap[0]["user"]["groups"])
        self.assertTrue(configmap[0]["userAgent"].startswith("kubectl"))
        secret = wait_for(lambda: self.events(lambda e: e.get("objectRef", {}).get("name") == name
                                              and e["objectRef"]["resource"] == "secrets"))
        self.assertEqual(secret[0]["level"], "Metadata")
        self.assertNotIn("requestObject", secret[0])
        with open(self.log_path) as f:
            text = f.read()
        self.assertNotIn("hunter2", text)
        self.assertNotIn(base64.b64encode(b"hunter2").decode(), text)
        self.assertEqual(stat.S_IMODE(os.stat(self.log_path).st_mode), 0o600)

    def test_issued_and_reviewed_tokens_never_reach_the_log(self):
        account = f"robot-{uuid.uuid4().hex[:6]}"
        self.server.kubectl("create", "serviceaccount", account)
        token = self.server.kubectl("create", "token", account, "--duration=10m").stdout.strip()
        self.assertEqual(token.count("."), 2)
        review = self.server.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})).stdout
        self.assertTrue(json.loads(review)["status"]["authenticated"])
        issued = wait_for(lambda: self.events(lambda e: e.get("objectRef", {}).get("name") == account
                                              and e["objectRef"].get("subresource") == "token"))
        self.assertEqual(issued[0]["level"], "RequestResponse")
        self.assertEqual(issued[0]["responseObject"]["kind"], "TokenRequest")
        self.assertEqual(issued[0]["responseObject"]["status"]["token"], "")
        self.assertIn("expirationTimestamp", issued[0]["responseObject"]["status"])
        wait_for(lambda: self.events(lambda e: e.get("objectRef", {}).get("resource") == "tokenreviews"))
        with open(self.log_path) as f:
            text = f.read()
        for part in token.split("."):
            self.assertNotIn(part, text)

    def test_audit_id_header_and_a_client_sent_one(self):
        from kubernetes import client
        api = client.CoreV1Api(self.server.python_client())
        mine = f"trace-{uuid.uuid4()}"
        _, code, headers = api.list_namespace_with_http_info(_headers={"Audit-ID": mine})
        self.assertEqual(code, 200)
        self.assertEqual(headers.get("Audit-Id"), mine)
        [event] = wait_for(lambda: self.events(lambda e: e["auditID"] == mine))
        self.assertEqual(event["verb"], "list")
        _, _, fresh = api.list_namespace_with_http_info()
        self.assertRegex(fresh.get("Audit-Id"), r"^[0-9a-f-]{36}$")


class EncryptionAtRestTests(unittest.TestCase):
    def setUp(self):
        self.server = security_server()

    def raw_value(self, key: str) -> bytes:
        db = os.path.join(self.server.workdir, "data", "kapiserver.db")
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT value FROM kv WHERE key = ? ORDER BY rev DESC LIMIT 1",
                                     (key.encode(),)).fetchone()
        finally:
            connection.close()
        return bytes(row[0])

    def test_a_secret_is_not_readable_from_the_database_file(self):
        name = f"db-{uuid.uuid4().hex[:6]}"
        self.server.kubectl("create", "secret", "generic", name, "--from-literal=password=correct-horse")
        raw = self.raw_value(f"/secrets/default/{name}")
        self.assertTrue(raw.startswith(b"k8s:enc:aescbc:v1:key1:"), raw[:40])
        with open(os.path.join(self.server.workdir, "data", "kapiserver.db"), "rb") as f:
            self.assertNotIn(b"correct-horse", f.read())
        value = self.server.kubectl("get", "secret", name, "-o", "jsonpath={.data.password}").stdout
        self.assertEqual(base64.b64decode(value), b"correct-horse")
        # ConfigMaps are not named by the configuration: stored as they are
        self.server.kubectl("create", "configmap", name, "--from-literal=k=visible")
        self.assertIn(b"visible", self.raw_value(f"/configmaps/default/{name}"))


class FileModeTests(unittest.TestCase):
    """Database, keys, kubeconfig and audit log are 0600 in 0700 directories, under umask 022."""

    def test_private_files_under_a_permissive_umask(self):
        workdir = tempfile.mkdtemp(prefix="kapiserver-modes-")  # short: the notify socket path is limited
        self.addCleanup(shutil.rmtree, workdir, True)
        policy = write(os.path.join(workdir, "policy.yaml"), AUDIT_POLICY)
        config = {"data_dir": os.path.join(workdir, "state", "data"),
                  "cert_dir": os.path.join(workdir, "state", "certs"),
                  "admin_kubeconfig": os.path.join(workdir, "state", "admin.kubeconfig"),
                  "audit": {"policy_file": policy, "log_path": os.path.join(workdir, "logs", "audit.log")}}
        old = os.umask(0o022)
        try:
            server = ServerProcess(extra_config=config, workdir=workdir)
            server.kubeconfig = config["admin_kubeconfig"]
            server.start()
        finally:
            os.umask(old)
        self.addCleanup(server.stop)
        server.kubectl("create", "configmap", "probe", "--from-literal=a=b")  # the WAL has content
        state = os.path.join(workdir, "state")
        for directory in (state, config["data_dir"], config["cert_dir"], os.path.join(workdir, "logs")):
            self.assertEqual(stat.S_IMODE(os.stat(directory).st_mode), 0o700, directory)
        private = [os.path.join(config["data_dir"], f) for f in ("kapiserver.db", "kapiserver.db-wal",
                                                                 "kapiserver.db-shm")]
        private += [os.path.join(config["cert_dir"], f) for f in ("ca.key", "apiserver.key", "admin.key", "sa.key",
                                                                  "front-proxy-ca.key", "front-proxy-client.key")]
        private += [config["admin_kubeconfig"], config["audit"]["log_path"]]
        for path in private:
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600, path)
