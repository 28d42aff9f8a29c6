"""Keeps the Node authorizer's graph current: informers over the Pods, PersistentVolumes and
VolumeAttachments Stores (upstream's node/graph_populator.go over its shared informers).

The same in-process informers as RBAC's policy index (``registry/informer.py``): a list,
then a watch, restarted with a fresh list when it ends.  A pod enters the graph once it is
bound to a node, and is added again only when its node, its uid (deleted and created again
under the same name, possibly on another node) or its ResourceClaim statuses change: all
else it references is immutable once bound.  After every (re)list, what was deleted while
the watch was down is removed, as an informer's replace would.  ``synced`` fires once the
three kinds have been listed.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from kapiserver.auth.node.graph import Graph
from kapiserver.machinery.pod_references import as_dict, pod_resource_claim_statuses
from kapiserver.registry.informer import Informer
from kapiserver.registry.store import Store

DELETED = "DELETED"
# what makes a bound pod's edges change: (node, uid, ResourceClaim statuses)
PodState = tuple[str, str, tuple[tuple[str, Optional[str]], ...]]


def _key(obj: dict) -> tuple[str, str]:
    metadata = as_dict(obj.get("metadata"))
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


class GraphPopulator:
    def __init__(self, graph: Graph, store: Callable[[str, str, str], Store], reactor: IReactorTime) -> None:
        self.graph = graph
        self._pods: dict[tuple[str, str], PodState] = {}
        self._pvs: set[str] = set()
        self._attachments: dict[str, str] = {}  # name -> node
        self.pods = Informer(store("", "v1", "pods"), self._on_pod, reactor)
        self.pods.after_list = self._sweep_pods
        self.pvs = Informer(store("", "v1", "persistentvolumes"), self._on_pv, reactor)
        self.pvs.after_list = self._sweep_pvs
        self.attachments = Informer(store("storage.k8s.io", "v1", "volumeattachments"), self._on_attachment,
                                    reactor)
        self.attachments.after_list = self._sweep_attachments
        self.informers = (self.pods, self.pvs, self.attachments)
        self.synced: defer.Deferred = defer.gatherResults([i.synced for i in self.informers])

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()

    # ------------------------------------------------------------ pods

    def _on_pod(self, event_type: str, pod: dict) -> None:
        key = _key(pod)
        node = str(as_dict(pod.get("spec")).get("nodeName") or "")
        if event_type == DELETED:
            self._pods.pop(key, None)
            if node:
                self.graph.delete_pod(*key)
            return
        if not node:  # not scheduled yet: it references nothing a node may read
            return
        state = (node, str(as_dict(pod.get("metadata")).get("uid") or ""), pod_resource_claim_statuses(pod))
        if self._pods.get(key) == state:
            return
        self._pods[key] = state
        self.graph.add_pod(pod)

    def _sweep_pods(self) -> None:
        for key in [k for k in self._pods if k not in self.pods.objects]:
            del self._pods[key]
            self.graph.delete_pod(*key)

    # ------------------------------------------------------------ persistent volumes

    def _on_pv(self, event_type: str, pv: dict) -> None:
        name = _key(pv)[1]
        if event_type == DELETED:
            self._pvs.discard(name)
            self.graph.delete_pv(name)
        else:
            self._pvs.add(name)
            self.graph.add_pv(pv)

    def _sweep_pvs(self) -> None:
        for name in [n for n in self._pvs if ("", n) not in self.pvs.objects]:
            self._pvs.discard(name)
            self.graph.delete_pv(name)

    # ------------------------------------------------------------ volume attachments

    def _on_attachment(self, event_type: str, attachment: dict) -> None:
        name = _key(attachment)[1]
        if event_type == DELETED:
            self._attachments.pop(name, None)
            self.graph.delete_volume_attachment(name)
            return
        node = str(as_dict(attachment.get("spec")).get("nodeName") or "")
        if self._attachments.get(name) == node:
            return
        self._attachments[name] = node
        self.graph.add_volume_attachment(name, node)

    def _sweep_attachments(self) -> None:
        for name in [n for n in self._attachments if ("", n) not in self.attachments.objects]:
            del self._attachments[name]
            self.graph.delete_volume_attachment(name)
