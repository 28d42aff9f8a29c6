"""A real kubelet joins kapiserver with only a bootstrap token (TLS bootstrapping), as kubeadm sets it up.

kapiserver authenticates the token (``authentication.enable_bootstrap_token_auth``);
the real kube-controller-manager approves (``csrapproving``) and signs
(``csrsigning``) the kubelet's CertificateSigningRequest; the kubelet then
works as ``system:node:knode`` under the Node authorizer and NodeRestriction.
Skipped, saying why, where the node kit is not built or not running as root.
"""
from __future__ import annotations

import json
import os

import yaml
from twisted.trial import unittest

from kapiserver.testing import node

TOKEN_ID, TOKEN_SECRET = "k4p1sv", "0123456789abcdef"
EXTRA_GROUP = "system:bootstrappers:kubeadm:default-node-token"


def _bootstrap_objects(cluster: node.NodeCluster) -> None:
    """The token Secret and kubeadm's three bindings; the bootstrap kubeconfig the kubelet starts with."""
    server = cluster.server
    assert server is not None
    documents = [
        {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
         "metadata": {"name": f"bootstrap-token-{TOKEN_ID}", "namespace": "kube-system"},
         "stringData": {"token-id": TOKEN_ID, "token-secret": TOKEN_SECRET, "usage-bootstrap-authentication": "true",
                        "usage-bootstrap-signing": "true", "auth-extra-groups": EXTRA_GROUP}},
    ]
    for name, role, group in (
            ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", EXTRA_GROUP),
            ("kubeadm:node-autoapprove-bootstrap",
             "system:certificates.k8s.io:certificatesigningrequests:nodeclient", EXTRA_GROUP),
            ("kubeadm:node-autoapprove-certificate-rotation",
             "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes")):
        documents.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                          "metadata": {"name": name},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                          "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]})
    server.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))
    port = server.server_url.rsplit(":", 1)[1]
    bootstrap = {"apiVersion": "v1", "kind": "Config",
                 "clusters": [{"name": "c", "cluster": {
                     "server": f"https://{node.HOST_ADDRESS}:{port}",
                     "certificate-authority": os.path.join(server.workdir, "certs", "ca.crt")}}],
                 "users": [{"name": "bootstrap", "user": {"token": f"{TOKEN_ID}.{TOKEN_SECRET}"}}],
                 "contexts": [{"name": "c", "context": {"cluster": "c", "user": "bootstrap"}}],
                 "current-context": "c"}
    with open(_bootstrap_path(cluster), "w") as f:
        yaml.safe_dump(bootstrap, f)


def _bootstrap_path(cluster: node.NodeCluster) -> str:
    assert cluster.server is not None
    return os.path.join(cluster.server.workdir, "bootstrap-kubelet.kubeconfig")


def _kubelet_kubeconfig(cluster: node.NodeCluster) -> str:
    """Where the kubelet writes the kubeconfig of the identity it was issued."""
    assert cluster.server is not None
    return os.path.join(cluster.server.workdir, "kubelet-issued.kubeconfig")


def _before_node(cluster: node.NodeCluster) -> None:
    _bootstrap_objects(cluster)
    # the kubelet starts from the bootstrap kubeconfig and writes its own (flags after the kit's win); its
    # certificates go to a directory of this cluster's: a kubelet finding a client certificate from an
    # earlier cluster in the kit's cert dir would use it instead of bootstrapping
    assert cluster.server is not None
    cert_dir = os.path.join(cluster.server.workdir, "kubelet-pki")
    cluster.node_env["KNODE_KUBELET_ARGS"] = (f"--kubeconfig={_kubelet_kubeconfig(cluster)} --rotate-certificates "
                                              f"--bootstrap-kubeconfig={_bootstrap_path(cluster)} "
                                              f"--cert-dir={cert_dir}")


def _make() -> node.NodeCluster:
    return node.NodeCluster(extra_config={"authentication": {"enable_bootstrap_token_auth": True}},
                            before_node=_before_node)


class BootstrapJoinTests(unittest.TestCase):
    timeout = 600

    def setUp(self) -> None:
        reason = node.unavailable_reason() or node.not_in_this_run()
        if reason:
            raise unittest.SkipTest(reason)
        self.cluster = node.shared_cluster("bootstrap", _make)
        assert self.cluster.server is not None
        self.server = self.cluster.server

    def test_the_kubelet_joins_with_a_bootstrap_token(self):
        csrs = json.loads(self.server.kubectl("get", "csr", "-o", "json").stdout)["items"]
        kubelet_csrs = [c for c in csrs if c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"]
        self.assertTrue(kubelet_csrs, "the kubelet asked for no client certificate")
        first = kubelet_csrs[0]
        self.assertEqual(first["spec"]["username"], f"system:bootstrap:{TOKEN_ID}")
        self.assertIn(EXTRA_GROUP, first["spec"]["groups"])
        conditions = {c["type"]: c for c in first["status"]["conditions"]}
        self.assertEqual(conditions["Approved"]["reason"], "AutoApproved")  # kube-controller-manager's csrapproving
        self.assertTrue(first["status"].get("certificate"), "the CSR was not signed")
        # the Node registered by the kubelet under its new identity, and Ready
        ready = self.server.kubectl("get", "node", node.NODE_NAME, "-o",
                                    "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}").stdout
        self.assertEqual(ready, "True")
        with open(_kubelet_kubeconfig(self.cluster)) as f:
            written = yaml.safe_load(f)
        self.assertIn("kubelet-client-current.pem", written["users"][0]["user"]["client-certificate"])

    def test_the_joined_node_runs_pods_and_serves_their_streams(self):
        ns = "joined"
        self.server.kubectl("create", "namespace", ns, check=False)
        self.server.kubectl("-n", ns, "run", "box", "--image=registry.k8s.io/e2e-test-images/busybox:1.37.0-1",
                            "--restart=Never", "--command", "--", "sh", "-c", "echo started; sleep 3600")
        self.cluster.wait_for_pod(ns, "box")
        self.assertEqual(self.server.kubectl("-n", ns, "exec", "box", "--", "echo", "hi").stdout, "hi\n")
        self.assertEqual(self.server.kubectl("-n", ns, "logs", "box").stdout, "started\n")
