"""The controllers of TLS bootstrapping, in process: the kubelet client CSR approver (asking the
server's authorizer), the bootstrap token cleaner (on a fake clock) and the cluster-info signer."""
from __future__ import annotations

import base64
import datetime
import os
from typing import Any, Awaitable, Callable, Optional

from cryptography import x509
from cryptography.x509.oid import NameOID
from twisted.internet.task import Clock

from kapiserver.auth.authorizer import AlwaysAllow, Attributes, Decision
from kapiserver.auth.bootstrap_token import detached_signature
from kapiserver.machinery.user import UserInfo
from kapiserver.controllers.bootstrap_tokens import TokenCleaner
from kapiserver.server.certs import ensure_certificates
from kapiserver.testing.cases import ServerTestCase, run, sleep
from tests.apis.test_certificates import CSRS, KUBELET, csr_pem, manifest

NODE_USAGES = ("digital signature", "key encipherment", "client auth")
SECRETS = "/api/v1/namespaces/{ns}/secrets"
CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"


class NodeClientPermissions(AlwaysAllow):
    """Everything, except the two subresources the approver asks about: ``nodeclient`` for
    bootstrappers (while ``bootstrappers_allowed``), ``selfnodeclient`` for nodes."""

    def __init__(self) -> None:
        self.bootstrappers_allowed = True
        self.asked: list[tuple[str, str]] = []  # (user, subresource)

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        if attributes.resource == "certificatesigningrequests" and attributes.subresource:
            groups = user.groups if user is not None else ()
            self.asked.append((user.name if user is not None else "", attributes.subresource))
            if attributes.subresource == "nodeclient":
                return Decision(self.bootstrappers_allowed and "system:bootstrappers" in groups)
            if attributes.subresource == "selfnodeclient":
                return Decision("system:nodes" in groups)
            return Decision(False)
        return Decision(True)


def as_user(name: str, group: str) -> dict:
    return {"Impersonate-User": name, "Impersonate-Group": group}


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def rfc3339(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_secret(token_id: str, token_secret: str = "0123456789abcdef", namespace: str = "kube-system",
                 type_: str = "bootstrap.kubernetes.io/token", **data: str) -> dict:
    values = {"token-id": token_id, "token-secret": token_secret, **{k.replace("_", "-"): v for k, v in data.items()}}
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": namespace},
            "data": {k: b64(v) for k, v in values.items()}}


class CSRApprovingTests(ServerTestCase):
    """Requests created as a bootstrapper or a node (impersonated), approved or not by the approver,
    then signed by the signer with a real cluster CA."""

    async def _start(self) -> None:
        self.cert_dir = os.path.abspath(self.mktemp())
        ensure_certificates(self.cert_dir)
        self.authorizer = NodeClientPermissions()
        self.settings = {"cert_dir": self.cert_dir, "authorizer": self.authorizer}
        await super()._start()

    async def create(self, name: str, common_name: str, user: tuple[str, str], *organizations: str,
                     usages=NODE_USAGES, signer: str = KUBELET) -> None:
        reply = await self.client.post(CSRS, manifest(name, csr_pem(common_name, *organizations), signer=signer,
                                                      usages=usages), headers=as_user(*user))
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["spec"]["username"], user[0])

    async def signed(self, name: str) -> dict:
        async def done():
            status = (await self.client.get(f"{CSRS}/{name}")).body["status"]
            return status if status.get("certificate") else None
        return await self.wait_for(done, timeout=10)

    async def status(self, name: str) -> dict:
        return (await self.client.get(f"{CSRS}/{name}")).body["status"]

    @run
    async def test_a_bootstrapper_gets_a_node_client_certificate_and_the_node_renews_it(self):
        await self.create("join", "system:node:n1", ("system:bootstrap:abcdef", "system:bootstrappers"),
                          "system:nodes")
        status = await self.signed("join")
        approved = [c for c in status["conditions"] if c["type"] == "Approved"]
        self.assertEqual([(c["status"], c["reason"], c["message"]) for c in approved],
                         [("True", "AutoApproved", "Auto approving kubelet client certificate after "
                                                   "SubjectAccessReview.")])
        self.assertTrue(approved[0]["lastUpdateTime"])
        certificate = x509.load_pem_x509_certificate(base64.b64decode(status["certificate"]))
        self.assertEqual(certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value,
                         "system:nodes")
        # selfnodeclient was not asked about: the CN is not the bootstrapper's name
        self.assertEqual(self.authorizer.asked[:1], [("system:bootstrap:abcdef", "nodeclient")])

        await self.create("renew", "system:node:n1", ("system:node:n1", "system:nodes"), "system:nodes",
                          usages=("digital signature", "client auth"))
        status = await self.signed("renew")
        self.assertEqual([c["message"] for c in status["conditions"] if c["type"] == "Approved"],
                         ["Auto approving self kubelet client certificate after SubjectAccessReview."])

    @run
    async def test_requests_it_does_not_recognise_or_may_not_approve_stay_pending(self):
        node = ("system:node:n1", "system:nodes")
        bootstrapper = ("system:bootstrap:abcdef", "system:bootstrappers")
        # a node asking for another node's certificate (no nodeclient for nodes)
        await self.create("other-node", "system:node:n2", node, "system:nodes")
        # not a kubelet client certificate: wrong organization, server usages, another signer
        await self.create("wrong-org", "system:node:n1", bootstrapper, "system:masters")
        await self.create("serving", "system:node:n1", bootstrapper, "system:nodes",
                          usages=("digital signature", "key encipherment", "server auth"))
        await self.create("client", "system:node:n1", bootstrapper, "system:nodes", usages=("client auth",),
                          signer="kubernetes.io/kube-apiserver-client")
        # one that is approved, created last: by then the others have been looked at
        await self.create("join", "system:node:n1", bootstrapper, "system:nodes")
        await self.signed("join")
        for name in ("other-node", "wrong-org", "serving", "client"):
            self.assertEqual(await self.status(name), {}, name)
        self.assertIn(("system:node:n1", "nodeclient"), self.authorizer.asked)

    @run
    async def test_a_request_refused_is_approved_once_the_requester_may(self):
        self.authorizer.bootstrappers_allowed = False
        await self.create("join", "system:node:n1", ("system:bootstrap:abcdef", "system:bootstrappers"),
                          "system:nodes")

        async def refused_twice():
            return self.authorizer.asked.count(("system:bootstrap:abcdef", "nodeclient")) >= 2
        await self.wait_for(refused_twice, timeout=10)  # asked again with backoff
        self.assertEqual(await self.status("join"), {})
        self.authorizer.bootstrappers_allowed = True  # a ClusterRoleBinding made after the request
        status = await self.signed("join")
        self.assertEqual([c["reason"] for c in status["conditions"]], ["AutoApproved"])


class TokenCleanerTests(ServerTestCase):
    """The cleaner on the server's Secrets, with a fake clock deciding what has expired."""

    NOW = 1_700_000_000.0

    async def settle(self, check: Callable[[], Awaitable[Any]]) -> Any:
        """Run what the fake clock has due (the queue's work) until ``check`` holds."""
        async def step():
            self.clock.advance(0)
            return await check()
        return await self.wait_for(step, timeout=10)

    async def exists(self, namespace: str, name: str) -> bool:
        return (await self.client.get(f"{SECRETS.format(ns=namespace)}/{name}")).code == 200

    @run
    async def test_expired_tokens_are_deleted_when_they_expire(self):
        self.clock = Clock()
        self.clock.advance(self.NOW)
        secrets = {"expired": token_secret("expird", expiration=rfc3339(self.NOW - 1)),
                   "unparsable": token_secret("unpars", expiration="next week"),
                   "later": token_secret("later1", expiration=rfc3339(self.NOW + 3600)),
                   "forever": token_secret("forevr"),
                   "elsewhere": token_secret("elsewh", namespace="default", expiration=rfc3339(self.NOW - 1)),
                   "opaque": token_secret("opaque", type_="Opaque", expiration=rfc3339(self.NOW - 1))}
        for secret in secrets.values():
            reply = await self.client.post(SECRETS.format(ns=secret["metadata"]["namespace"]), secret)
            self.assertEqual(reply.code, 201, reply.body)
        cleaner = TokenCleaner(self.server.api.served.store("", "v1", "secrets"), self.clock)
        cleaner.start()
        self.addCleanup(cleaner.stop)
        await cleaner.informer.synced

        async def gone(*names: str) -> bool:
            return not any([await self.exists("kube-system", f"bootstrap-token-{n}") for n in names])
        await self.settle(lambda: gone("expird", "unpars"))
        self.assertTrue(await self.exists("kube-system", "bootstrap-token-later1"))
        self.clock.advance(3599)
        for _ in range(5):  # give a wrongly early deletion the chance to happen
            self.clock.advance(0)
            await sleep(0.05)
        self.assertTrue(await self.exists("kube-system", "bootstrap-token-later1"))
        self.clock.advance(1)
        await self.settle(lambda: gone("later1"))
        for namespace, name in (("kube-system", "forevr"), ("default", "elsewh"), ("kube-system", "opaque")):
            self.assertTrue(await self.exists(namespace, f"bootstrap-token-{name}"), name)


class BootstrapSignerTests(ServerTestCase):
    """The signer as the server runs it when named (``controllers: [*, bootstrapsigner]``)."""

    settings = {"controllers": ["*", "bootstrapsigner"]}
    KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters:\n- name: ''\n  cluster:\n    server: https://10.0.0.1\n"

    async def data(self) -> dict:
        reply = await self.client.get(CLUSTER_INFO)
        self.assertEqual(reply.code, 200, reply.body)
        return reply.body.get("data") or {}

    async def until_data(self, wanted: Callable[[dict], bool]) -> dict:
        async def check():
            data = await self.data()
            return data if wanted(data) else None
        return await self.wait_for(check, timeout=10)

    @run
    async def test_cluster_info_is_signed_by_every_signing_token(self):
        for secret in (token_secret("abcdef", "0123456789abcdef", usage_bootstrap_signing="true"),
                       token_secret("authon", "0123456789abcdef", usage_bootstrap_authentication="true"),
                       token_secret("expird", "0123456789abcdef", usage_bootstrap_signing="true",
                                    expiration="2000-01-01T00:00:00Z")):
            reply = await self.client.post(SECRETS.format(ns="kube-system"), secret)
            self.assertEqual(reply.code, 201, reply.body)
        reply = await self.client.post("/api/v1/namespaces/kube-public/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cluster-info"},
            "data": {"kubeconfig": self.KUBECONFIG, "jws-kubeconfig-gone00": "stale"}})
        self.assertEqual(reply.code, 201, reply.body)

        signed = await self.until_data(lambda d: "jws-kubeconfig-abcdef" in d)
        self.assertEqual(signed, {"kubeconfig": self.KUBECONFIG, "jws-kubeconfig-abcdef": detached_signature(
            self.KUBECONFIG, "abcdef", "0123456789abcdef")})

        # a second signing token adds its signature, a new kubeconfig is signed again
        reply = await self.client.post(SECRETS.format(ns="kube-system"),
                                       token_secret("second", "fedcba9876543210", usage_bootstrap_signing="true"))
        self.assertEqual(reply.code, 201, reply.body)
        await self.until_data(lambda d: "jws-kubeconfig-second" in d)
        changed = self.KUBECONFIG + "preferences: {}\n"
        reply = await self.client.patch(CLUSTER_INFO, {"data": {"kubeconfig": changed}})
        self.assertEqual(reply.code, 200, reply.body)
        expected = {"kubeconfig": changed,
                    "jws-kubeconfig-abcdef": detached_signature(changed, "abcdef", "0123456789abcdef"),
                    "jws-kubeconfig-second": detached_signature(changed, "second", "fedcba9876543210")}
        await self.until_data(lambda d: d == expected)

        # a token deleted takes its signature with it
        reply = await self.client.delete(f"{SECRETS.format(ns='kube-system')}/bootstrap-token-abcdef")
        self.assertEqual(reply.code, 200, reply.body)
        await self.until_data(lambda d: "jws-kubeconfig-abcdef" not in d)
        self.assertEqual(await self.data(), {k: v for k, v in expected.items() if k != "jws-kubeconfig-abcdef"})
