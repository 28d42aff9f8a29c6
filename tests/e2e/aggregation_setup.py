"""Two kapiserver processes for the aggregation tests: an aggregator and an extension server.

The extension server runs in a network namespace (EndpointSlices may not name
loopback addresses), reached over a veth pair: the aggregator listens on the
pair's host side, so the extension server's SubjectAccessReviews reach it too.
The extension server trusts the aggregator's front-proxy CA (request-header
authentication) and authorizes with mode Webhook against the aggregator,
serves a CRD group (wardle.example.com), and is registered with an APIService
behind the Service ``wardle/api`` and an EndpointSlice naming its address.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
from typing import Optional

import yaml

from kapiserver.testing.cases import wait_for
from kapiserver.testing.netns import NetworkNamespace
from kapiserver.testing.process import ServerProcess

GROUP, VERSION = "wardle.example.com", "v1alpha1"
APISERVICE = f"{VERSION}.{GROUP}"
SERVICE_NAMESPACE, SERVICE_NAME = "wardle", "api"

CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: flunders.{GROUP}}}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{plural: flunders, singular: flunder, kind: Flunder, shortNames: [fl]}}
  versions:
  - name: {VERSION}
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: A Flunder is a test resource served by an extension API server.
        properties:
          spec:
            type: object
            description: What the flunder wants.
            properties:
              reference: {{type: string, description: The name of another flunder.}}
"""


class AggregationCluster:
    def __init__(self) -> None:
        self.netns = NetworkNamespace(f"kapiserver-agg-{os.getpid()}")
        self.aggregator: Optional[ServerProcess] = None
        self.extension: Optional[ServerProcess] = None
        self.extension_port = 0

    def start(self) -> "AggregationCluster":
        self.netns.create()
        host, peer = self.netns.host_address, self.netns.peer_address
        self.aggregator = ServerProcess({"bind_address": host, "tls": {"extra_sans": [host]}}).start()
        agg_certs = os.path.join(self.aggregator.workdir, "certs")
        # the Webhook authorizer posts to the URL its kubeconfig names: the aggregator's SubjectAccessReviews
        with open(self.aggregator.kubeconfig) as f:
            webhook = yaml.safe_load(f)
        for cluster in webhook["clusters"]:
            cluster["cluster"]["server"] += "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        webhook_path = os.path.join(self.aggregator.workdir, "authorization-webhook.kubeconfig")
        with open(webhook_path, "w") as f:
            yaml.safe_dump(webhook, f)
        self.extension = ServerProcess({
            "bind_address": peer,
            "tls": {"extra_sans": [peer, f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc"]},
            "authentication": {"requestheader": {"client_ca_file": os.path.join(agg_certs, "front-proxy-ca.crt")}},
            "authorization": {"modes": ["Webhook"], "webhook": {"config_file": webhook_path,
                                                                 "cache_authorized_ttl_seconds": 0,
                                                                 "cache_unauthorized_ttl_seconds": 0}},
        }, command_prefix=self.netns.exec_prefix)
        self.extension.start()
        self.extension_port = int(self.extension.server_url.rsplit(":", 1)[1])
        # later starts keep the port the EndpointSlice names
        self.extension.extra_config["secure_port"] = self.extension_port
        self.extension.kubectl("apply", "-f", "-", input=CRD)
        self.extension.kubectl("wait", "--for=condition=Established", f"crd/flunders.{GROUP}", "--timeout=30s")
        self.register()
        return self

    def register(self) -> None:
        assert self.aggregator is not None and self.extension is not None
        with open(os.path.join(self.extension.workdir, "certs", "ca.crt"), "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        manifest = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}},
            {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
             "spec": {"ports": [{"name": "https", "port": 443, "targetPort": self.extension_port}]}},
            {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
             "metadata": {"name": f"{SERVICE_NAME}-1", "namespace": SERVICE_NAMESPACE,
                          "labels": {"kubernetes.io/service-name": SERVICE_NAME}},
             "addressType": "IPv4",
             "endpoints": [{"addresses": [self.netns.peer_address], "conditions": {"ready": True}}],
             "ports": [{"name": "https", "port": self.extension_port, "protocol": "TCP"}]},
            {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": APISERVICE},
             "spec": {"group": GROUP, "version": VERSION, "groupPriorityMinimum": 1000, "versionPriority": 15,
                      "caBundle": ca_bundle,
                      "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE_NAME, "port": 443}}},
        ]
        self.aggregator.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(manifest))

    def available(self) -> dict:
        """The APIService's Available condition as the aggregator reports it."""
        assert self.aggregator is not None
        out = self.aggregator.kubectl("get", "apiservice", APISERVICE, "-o", "json").stdout
        for condition in (json.loads(out).get("status") or {}).get("conditions") or ():
            if condition["type"] == "Available":
                return condition
        return {}

    def wait_available(self, status: str = "True", timeout: float = 40.0) -> dict:
        return wait_for(lambda: (c := self.available()).get("status") == status and c, timeout=timeout)

    def stop(self) -> None:
        for server in (self.extension, self.aggregator):
            if server is not None:
                try:
                    server.cleanup()
                except (OSError, subprocess.SubprocessError):
                    pass
        self.netns.delete()
