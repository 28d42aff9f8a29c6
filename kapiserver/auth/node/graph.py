"""The Node authorizer's graph: which objects each node's pods reach (upstream's node/graph.go).

Vertices are API objects (type, namespace, name); every edge points toward the
vertices of Nodes::

    node <- pod <- secret, configmap, pvc, serviceaccount, resourceclaim
                   pvc <- pv <- secret
    node <- volumeattachment

ResourceSlices (resourceslice -> node upstream) are not in it: resource.k8s.io
is not served (DynamicResourceAllocation is off by default in v1.32, and
upstream then has no slice informer either), so a slice is never related.

An edge that leads to exactly one node carries that node (upstream's
destinationEdge): pod -> node, and every edge out of a pod's references
(secret -> pod carries the pod's node).  Each vertex counts the nodes its
outgoing edges carry, so "is this secret used by a pod on node n" is one
dictionary lookup however many pods use it (upstream keeps that index only for
vertices of 200 edges or more and walks the edges below that; the answer is the
same).  Edges of a PersistentVolume (pv -> pvc, secret -> pv) carry no node:
the pvc's pods are found by walking on.

Removing a vertex removes the neighbours left without any edge, as upstream
does: a pod's Secret vertex goes with its last pod, a Node's with its last pod
or attachment.  Everything runs on the reactor thread, so there is no lock.
"""
from __future__ import annotations

import enum
from typing import Iterable, Optional

from kapiserver.machinery.pod_references import (as_dict, pod_claim_names, pod_configmap_names,
                                                 pod_resource_claim_names, pod_secret_names, pv_secret_refs)

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"


class VertexType(enum.Enum):
    """The kinds of objects in the graph, named as upstream's messages name them."""

    CONFIGMAP = "configmap"
    RESOURCE_SLICE = "resourceslice"
    NODE = "node"
    POD = "pod"
    PVC = "pvc"
    PV = "pv"
    RESOURCE_CLAIM = "resourceclaim"
    SECRET = "secret"
    VOLUME_ATTACHMENT = "volumeattachment"
    SERVICE_ACCOUNT = "serviceAccount"


# vertices whose every outgoing edge carries its node: the nodes they count are all the nodes that
# reach them, so a node not counted is not related (no walk needed; upstream's vertexTypeWithAuthoritativeIndex)
AUTHORITATIVE_TYPES = frozenset((VertexType.CONFIGMAP, VertexType.RESOURCE_SLICE, VertexType.POD, VertexType.PVC,
                                 VertexType.RESOURCE_CLAIM, VertexType.VOLUME_ATTACHMENT,
                                 VertexType.SERVICE_ACCOUNT))


class Vertex:
    """One object; ``out`` maps each vertex it points to to the node that edge carries (or None)."""

    __slots__ = ("type", "namespace", "name", "out", "into", "destinations")

    def __init__(self, vertex_type: VertexType, namespace: str, name: str) -> None:
        self.type = vertex_type
        self.namespace = namespace
        self.name = name
        self.out: dict[Vertex, Optional[Vertex]] = {}
        self.into: set[Vertex] = set()
        self.destinations: dict[Vertex, int] = {}  # node vertex -> how many outgoing edges carry it

    @property
    def degree(self) -> int:
        return len(self.out) + len(self.into)

    def __repr__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.type.value}:{where}"


class Graph:
    def __init__(self) -> None:
        self._vertices: dict[tuple[VertexType, str, str], Vertex] = {}

    # ------------------------------------------------------------ reading

    def vertex(self, vertex_type: VertexType, namespace: str, name: str) -> Optional[Vertex]:
        return self._vertices.get((vertex_type, namespace, name))

    def __len__(self) -> int:
        return len(self._vertices)

    def has_path_from(self, node_name: str, start_type: VertexType, namespace: str,
                      name: str) -> tuple[bool, str]:
        """Whether the object reaches ``node_name``'s vertex; when not, why (upstream's hasPathFrom
        errors, which its authorizer logs; the requester is told less)."""
        what = f"{start_type.value} {namespace}/{name}"
        node = self.vertex(VertexType.NODE, "", node_name)
        if node is None:
            return False, f"unknown node '{node_name}' cannot get {what}"
        start = self.vertex(start_type, namespace, name)
        if start is None:
            return False, f"node '{node_name}' cannot get unknown {what}"
        unrelated = (f"node '{node_name}' cannot get {what}, no relationship to this object was found in the "
                     f"node authorizer graph")
        if node in start.destinations:
            return True, ""
        if start_type in AUTHORITATIVE_TYPES:
            return False, unrelated
        # a walk along the edges that carry no node (secret -> pv -> pvc); an edge that carries one
        # leads to that node only, so a vertex counting ``node`` is the answer, and others are not followed
        stack, seen = [start], {start}
        while stack:
            vertex = stack.pop()
            if vertex is node or node in vertex.destinations:
                return True, ""
            for to, destination in vertex.out.items():
                if destination is None and to not in seen:
                    seen.add(to)
                    stack.append(to)
        return False, unrelated

    # ------------------------------------------------------------ changes

    def add_pod(self, pod: dict) -> None:
        """A pod bound to a node (``spec.nodeName`` set) and what it references: pod -> node, and
        serviceaccount, secret, configmap, pvc, resourceclaim -> pod.  A mirror pod gets only its
        edge to the node: a node must not gain access to anything by creating one."""
        metadata, spec = as_dict(pod.get("metadata")), as_dict(pod.get("spec"))
        namespace, name = str(metadata.get("namespace") or ""), str(metadata.get("name") or "")
        self._delete_vertex(VertexType.POD, namespace, name)
        pod_vertex = self._get_or_create(VertexType.POD, namespace, name)
        node = self._get_or_create(VertexType.NODE, "", str(spec.get("nodeName") or ""))
        self._add_edge(pod_vertex, node, node)
        if MIRROR_POD_ANNOTATION in as_dict(metadata.get("annotations")):
            return
        referenced: list[tuple[VertexType, Iterable[str]]] = [
            (VertexType.SERVICE_ACCOUNT, (str(spec.get("serviceAccountName") or ""),)),
            (VertexType.SECRET, pod_secret_names(spec)),
            (VertexType.CONFIGMAP, pod_configmap_names(spec)),
            (VertexType.PVC, pod_claim_names(pod)),
            (VertexType.RESOURCE_CLAIM, pod_resource_claim_names(pod)),
        ]
        for vertex_type, names in referenced:
            for referenced_name in names:
                if referenced_name:
                    self._add_edge(self._get_or_create(vertex_type, namespace, referenced_name), pod_vertex, node)

    def delete_pod(self, namespace: str, name: str) -> None:
        self._delete_vertex(VertexType.POD, namespace, name)

    def add_pv(self, pv: dict) -> None:
        """A PersistentVolume bound to a claim: pv -> pvc, and secret -> pv for each Secret its source
        names that the kubelet uses.  Which nodes the claim's pods are on is not known here (nor
        whether it has pods yet), so these edges carry no node."""
        name = str(as_dict(pv.get("metadata")).get("name") or "")
        self._delete_vertex(VertexType.PV, "", name)
        claim_ref = as_dict(pv.get("spec")).get("claimRef")
        if claim_ref is None:
            return
        claim_ref = as_dict(claim_ref)
        pv_vertex = self._get_or_create(VertexType.PV, "", name)
        self._add_edge(pv_vertex, self._get_or_create(VertexType.PVC, str(claim_ref.get("namespace") or ""),
                                                      str(claim_ref.get("name") or "")), None)
        for secret_namespace, secret_name, kubelet_visible in pv_secret_refs(pv):
            if kubelet_visible:
                self._add_edge(self._get_or_create(VertexType.SECRET, secret_namespace, secret_name), pv_vertex, None)

    def delete_pv(self, name: str) -> None:
        self._delete_vertex(VertexType.PV, "", name)

    def add_volume_attachment(self, name: str, node_name: str) -> None:
        """volumeattachment -> node (none while the attachment names no node)."""
        self._delete_vertex(VertexType.VOLUME_ATTACHMENT, "", name)
        if node_name:
            node = self._get_or_create(VertexType.NODE, "", node_name)
            self._add_edge(self._get_or_create(VertexType.VOLUME_ATTACHMENT, "", name), node, node)

    def delete_volume_attachment(self, name: str) -> None:
        self._delete_vertex(VertexType.VOLUME_ATTACHMENT, "", name)

    # ------------------------------------------------------------ internals

    def _get_or_create(self, vertex_type: VertexType, namespace: str, name: str) -> Vertex:
        key = (vertex_type, namespace, name)
        vertex = self._vertices.get(key)
        if vertex is None:
            vertex = self._vertices[key] = Vertex(vertex_type, namespace, name)
        return vertex

    def _add_edge(self, source: Vertex, target: Vertex, destination: Optional[Vertex]) -> None:
        """source -> target, carrying ``destination`` (a node) or nothing; replaces an edge between them."""
        if destination is None and source.type in AUTHORITATIVE_TYPES:
            # the counted nodes of these types must be complete (upstream panics too)
            raise ValueError(f"vertex of type {source.type.value!r} must have destination edges only")
        if target in source.out:
            self._uncount(source, source.out[target])
        source.out[target] = destination
        target.into.add(source)
        if destination is not None:
            source.destinations[destination] = source.destinations.get(destination, 0) + 1

    @staticmethod
    def _uncount(source: Vertex, destination: Optional[Vertex]) -> None:
        if destination is None:
            return
        left = source.destinations[destination] - 1
        if left:
            source.destinations[destination] = left
        else:
            del source.destinations[destination]

    def _delete_vertex(self, vertex_type: VertexType, namespace: str, name: str) -> None:
        """Remove a vertex and its edges, and the neighbours it was the only neighbour of."""
        vertex = self.vertex(vertex_type, namespace, name)
        if vertex is None:
            return
        orphans = [n for n in (*vertex.out, *vertex.into) if n.degree == 1]
        self._remove(vertex)
        for orphan in orphans:
            self._remove(orphan)

    def _remove(self, vertex: Vertex) -> None:
        for target in vertex.out:
            target.into.discard(vertex)
        for source in vertex.into:
            self._uncount(source, source.out.pop(vertex))
        vertex.out.clear()
        vertex.into.clear()
        vertex.destinations.clear()
        del self._vertices[(vertex.type, vertex.namespace, vertex.name)]
