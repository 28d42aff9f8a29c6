"""kubectl 1.32's typed create commands, which POST protobuf bodies
(``Content-Type: application/vnd.kubernetes.protobuf``), read back as JSON."""
from __future__ import annotations

import base64
import datetime
import json
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server


def self_signed_pair(common_name: str) -> tuple[bytes, bytes]:
    """A PEM certificate and key, for ``kubectl create secret tls``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class KubectlProtobufTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"pb-{self._testMethodName.replace('_', '-')[5:40].strip('-')}"
        # -v=8 shows the request headers: prove the body really was protobuf
        created = self.kubectl("create", "ns", self.ns, "-v=8")
        self.assertIn("Content-Type: application/vnd.kubernetes.protobuf", created.stderr)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def get_json(self, *args: str) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def test_namespace_is_active(self):
        got = self.get_json("get", "ns", self.ns)
        self.assertEqual(got["metadata"]["name"], self.ns)
        self.assertEqual(got["status"]["phase"], "Active")
        self.assertEqual(got["spec"]["finalizers"], ["kubernetes"])

    def test_configmap_from_literal_and_file(self):
        path = os.path.join(self.server.workdir, "settings.ini")
        with open(path, "w") as f:
            f.write("[main]\nmode = fast\n")
        blob = os.path.join(self.server.workdir, "blob.bin")
        with open(blob, "wb") as f:
            f.write(b"\x00\x01\xfe\xff")
        self.kubectl("-n", self.ns, "create", "configmap", "c", "--from-literal=a=b",
                     f"--from-file={path}", f"--from-file=blob={blob}")
        got = self.get_json("-n", self.ns, "get", "configmap", "c")
        self.assertEqual(got["data"], {"a": "b", "settings.ini": "[main]\nmode = fast\n"})
        self.assertEqual(got["binaryData"], {"blob": base64.b64encode(b"\x00\x01\xfe\xff").decode()})
        self.assertRegex(got["metadata"]["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_secret_generic_and_labels(self):
        self.kubectl("-n", self.ns, "create", "secret", "generic", "s", "--from-literal=password=hunter2",
                     "--from-literal=user=admin", "--type=example.com/creds")
        self.kubectl("-n", self.ns, "label", "secret", "s", "team=blue")
        got = self.get_json("-n", self.ns, "get", "secret", "s")
        self.assertEqual(got["type"], "example.com/creds")
        self.assertEqual(got["data"], {"password": base64.b64encode(b"hunter2").decode(),
                                       "user": base64.b64encode(b"admin").decode()})
        self.assertEqual(got["metadata"]["labels"], {"team": "blue"})

    def test_secret_tls(self):
        cert, key = self_signed_pair("demo.example.com")
        cert_path = os.path.join(self.server.workdir, f"{self.ns}.crt")
        key_path = os.path.join(self.server.workdir, f"{self.ns}.key")
        with open(cert_path, "wb") as f:
            f.write(cert)
        with open(key_path, "wb") as f:
            f.write(key)
        self.kubectl("-n", self.ns, "create", "secret", "tls", "web-tls", f"--cert={cert_path}",
                     f"--key={key_path}")
        got = self.get_json("-n", self.ns, "get", "secret", "web-tls")
        self.assertEqual(got["type"], "kubernetes.io/tls")
        self.assertEqual(base64.b64decode(got["data"]["tls.crt"]), cert)
        self.assertEqual(base64.b64decode(got["data"]["tls.key"]), key)

    def test_secret_docker_registry(self):
        self.kubectl("-n", self.ns, "create", "secret", "docker-registry", "reg", "--docker-server=r.example",
                     "--docker-username=u", "--docker-password=p")
        got = self.get_json("-n", self.ns, "get", "secret", "reg")
        self.assertEqual(got["type"], "kubernetes.io/dockerconfigjson")
        config = json.loads(base64.b64decode(got["data"][".dockerconfigjson"]))
        self.assertEqual(config["auths"]["r.example"]["username"], "u")

    def test_serviceaccount(self):
        self.kubectl("-n", self.ns, "create", "serviceaccount", "robot")
        got = self.get_json("-n", self.ns, "get", "serviceaccount", "robot")
        self.assertEqual(got["metadata"]["name"], "robot")
        self.assertEqual(got["metadata"]["namespace"], self.ns)
        self.assertTrue(got["metadata"]["uid"])

    def test_duplicate_create_reports_already_exists(self):
        self.kubectl("-n", self.ns, "create", "configmap", "twice", "--from-literal=a=b")
        result = self.kubectl("-n", self.ns, "create", "configmap", "twice", "--from-literal=a=b", check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn('configmaps "twice" already exists', result.stderr)

    def test_create_output_is_decoded_from_a_protobuf_answer(self):
        out = self.kubectl("-n", self.ns, "create", "configmap", "echo", "--from-literal=k=v", "-o", "json", "-v=8")
        self.assertIn("Content-Type: application/vnd.kubernetes.protobuf", out.stderr.split("Response Headers")[1])
        created = json.loads(out.stdout)
        got = self.get_json("-n", self.ns, "get", "configmap", "echo")
        self.assertEqual(created["data"], {"k": "v"})
        self.assertEqual(created, got)


class KubectlTypedCreateTests(unittest.TestCase):
    """The typed create commands of the other built-in kinds (tables generated from
    upstream's generated.proto by tools/gen_protobuf_tables.py)."""

    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "pb-typed"
        self.kubectl("create", "ns", self.ns, check=False)

    def get_json(self, *args: str) -> dict:
        return json.loads(self.kubectl("-n", self.ns, *args, "-o", "json").stdout)

    def test_workloads_services_and_policy(self):
        created = self.kubectl("-n", self.ns, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=2",
                               "--port=80", "-v=8")
        self.assertIn("Content-Type: application/vnd.kubernetes.protobuf", created.stderr)
        deployment = self.get_json("get", "deployment", "web")
        self.assertEqual(deployment["spec"]["replicas"], 2)
        self.assertEqual(deployment["spec"]["strategy"]["type"], "RollingUpdate")  # defaulted by the server
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual((container["image"], container["ports"]), ("nginx:1.27", [{"containerPort": 80,
                                                                                   "protocol": "TCP"}]))
        self.kubectl("-n", self.ns, "expose", "deployment", "web", "--port=8080", "--target-port=80")
        service = self.get_json("get", "service", "web")
        self.assertEqual(service["spec"]["ports"][0]["port"], 8080)
        self.assertEqual(service["spec"]["selector"], {"app": "web"})
        self.kubectl("-n", self.ns, "run", "task", "--image=busybox", "--restart=Never", "--", "sleep", "5")
        pod = self.get_json("get", "pod", "task")
        self.assertEqual((pod["spec"]["restartPolicy"], pod["spec"]["containers"][0]["args"]),
                         ("Never", ["sleep", "5"]))
        self.kubectl("-n", self.ns, "create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *")
        self.assertEqual(self.get_json("get", "cronjob", "nightly")["spec"]["schedule"], "0 3 * * *")
        self.kubectl("-n", self.ns, "create", "pdb", "web", "--selector=app=web", "--min-available=1")
        self.assertEqual(self.get_json("get", "pdb", "web")["spec"]["minAvailable"], 1)
        self.kubectl("-n", self.ns, "autoscale", "deployment", "web", "--max=5", "--cpu-percent=60")
        hpa = self.get_json("get", "horizontalpodautoscalers.v2.autoscaling", "web")
        self.assertEqual(hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 60)
        self.kubectl("-n", self.ns, "create", "quota", "q", "--hard=pods=10,cpu=2")
        self.assertEqual(self.get_json("get", "quota", "q")["spec"]["hard"], {"cpu": "2", "pods": "10"})

    def test_rbac_and_auth_commands(self):
        self.kubectl("-n", self.ns, "create", "role", "reader", "--verb=get,list", "--resource=pods")
        self.assertEqual(self.get_json("get", "role", "reader")["rules"],
                         [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}])
        self.kubectl("-n", self.ns, "create", "rolebinding", "bob-reads", "--role=reader", "--user=bob")
        self.assertEqual(self.get_json("get", "rolebinding", "bob-reads")["subjects"][0]["name"], "bob")
        self.assertEqual(self.kubectl("auth", "can-i", "create", "pods").stdout.strip(), "yes")
        whoami = self.kubectl("auth", "whoami", "-o", "json")
        self.assertEqual(json.loads(whoami.stdout)["status"]["userInfo"]["username"], "kapiserver-admin")
