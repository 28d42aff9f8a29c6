"""A Deployment makes its ReplicaSet and Pods when the real kube-controller-manager runs (the plugin's fixture).

Without ``kube_controller_manager`` nothing would: kapiserver runs no
workload controllers of its own. The test is skipped, saying where the
binary is expected, when kube-controller-manager is not built.
"""
from __future__ import annotations

from typing import Any

from kubernetes import client

from kapiserver.testing.eventually import eventually

DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}]}},
    },
}


def test_deployment_gets_a_replicaset_and_pods(kube_controller_manager: Any, kube_client: client.ApiClient,
                                               kube_namespace: str) -> None:
    apps = client.AppsV1Api(kube_client)
    core = client.CoreV1Api(kube_client)
    deployment = apps.create_namespaced_deployment(kube_namespace, DEPLOYMENT)

    replica_sets = eventually(lambda: apps.list_namespaced_replica_set(kube_namespace).items, "the ReplicaSet")
    assert len(replica_sets) == 1
    owner = replica_sets[0].metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == ("Deployment", "web", deployment.metadata.uid,
                                                                     True)
    assert replica_sets[0].spec.replicas == 3

    pods = eventually(lambda: (lambda items: items if len(items) == 3 else None)(
        core.list_namespaced_pod(kube_namespace, label_selector="app=web").items), "three Pods")
    assert {pod.metadata.owner_references[0].name for pod in pods} == {replica_sets[0].metadata.name}
    # no scheduler and no kubelet run: the Pods are stored and wait for a node
    assert {(pod.status.phase, pod.spec.node_name) for pod in pods} == {("Pending", None)}

    # the Deployment controller reports what it did in the Deployment's status
    eventually(lambda: apps.read_namespaced_deployment(
        "web", kube_namespace).status.replicas == 3, "the Deployment's status.replicas")

    # scaling down goes through the same controllers
    apps.patch_namespaced_deployment_scale("web", kube_namespace, {"spec": {"replicas": 1}})
    eventually(lambda: len([pod for pod in core.list_namespaced_pod(kube_namespace, label_selector="app=web").items
                            if pod.metadata.deletion_timestamp is None]) == 1, "one Pod left")
