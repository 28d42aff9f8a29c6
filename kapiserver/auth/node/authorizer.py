"""The Node authorizer (``authorization.modes: [Node, RBAC]``), upstream's node/node_authorizer.go.

What a kubelet (``system:node:<name>`` in ``system:nodes``) may do:

* Secrets, ConfigMaps (get, list, watch of one named object), PersistentVolumeClaims,
  PersistentVolumes, ResourceClaims, VolumeAttachments (get), ServiceAccount tokens
  (create ``serviceaccounts/token``): only of objects the graph relates to its node, that
  is used by a pod bound to it (a PV through its claim, a PV's Secrets through the PV);
  ``persistentvolumeclaims/status`` update and patch likewise;
* its Pods: get one related to it, list and watch with the field selector
  ``spec.nodeName=<itself>`` (or one named pod of its own); create and delete (mirror
  pods), update status, create evictions, which NodeRestriction admission narrows to its
  own pods;
* its Node: get, list, watch its own by name; create, update, patch (NodeRestriction
  keeps it to its own);
* its Lease in ``kube-node-lease`` and its CSINode, named after it (any name on create,
  which NodeRestriction checks);
* ResourceSlices: create (NodeRestriction checks the node), get/update/patch/delete of
  ones related to it, list/watch/deletecollection with ``spec.nodeName=<itself>``;
* everything else: the ``system:node`` ClusterRole's rules (upstream's NodeRules), which
  are not bound to anyone by default: this authorizer applies them.

The parts behind AuthorizeNodeWithSelectors (beta, on by default in v1.32) are always on:
reads of Pods and Nodes are decided here, not by the rules.

It never denies: a request it does not allow gets no opinion, so the next mode (RBAC) may
still allow it, and the reason, upstream's words (``no relationship found between node
'n1' and this object``), ends the 403's message.  Why the graph found no relationship is
logged at debug level, as upstream logs it.
"""
from __future__ import annotations

from typing import Optional, Sequence

from twisted.logger import Logger

from kapiserver.auth.authorizer import ALLOW, NO_OPINION, Attributes, Decision, Rules
from kapiserver.auth.node.graph import Graph, VertexType
from kapiserver.auth.node.identifier import node_identity
from kapiserver.auth.rbac.policy_rules import compile_rules, go_quote
from kapiserver.machinery.user import UserInfo
from kapiserver.machinery.fields import NOT_EQUALS

log = Logger()

NODE_LEASE_NAMESPACE = "kube-node-lease"
RULES_UNSUPPORTED = "node authorizer does not support user rule resolution"

# (group, resource) -> the graph's vertex type, for reads decided by the graph
_GET_ONLY = {
    ("", "persistentvolumes"): VertexType.PV,
    ("resource.k8s.io", "resourceclaims"): VertexType.RESOURCE_CLAIM,
    ("storage.k8s.io", "volumeattachments"): VertexType.VOLUME_ATTACHMENT,
}
_READ_NAMESPACED = {("", "secrets"): VertexType.SECRET, ("", "configmaps"): VertexType.CONFIGMAP}


def _no_opinion(reason: str) -> Decision:
    return Decision(False, reason)


def _selects(attributes: Attributes, field: str, value: str) -> bool:
    """The request's field selector requires ``field`` to equal ``value``."""
    return any(r.field == field and r.operator != NOT_EQUALS and r.value == value
               for r in attributes.field_selector)


class NodeAuthorizer:
    def __init__(self, graph: Graph, rules: Sequence[dict]) -> None:
        self.graph = graph
        self.rules = compile_rules(list(rules))

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        """None: a node's are not enumerable (incomplete, with upstream's error); others' are not ours."""
        if node_identity(user)[1]:
            return Rules(incomplete=True, evaluation_error=RULES_UNSUPPORTED)
        return Rules()

    def authorize(self, user: Optional[UserInfo], a: Attributes) -> Decision:
        node, is_node = node_identity(user)
        if user is None or not is_node:
            return NO_OPINION
        if not node:
            log.debug("NODE DENY: unknown node for user {user!r}", user=user.name)
            return _no_opinion(f"unknown node for user {go_quote(user.name)}")
        if a.resource_request:
            resource = (a.api_group, a.resource)
            if resource in _READ_NAMESPACED:
                return self._read_namespaced(node, _READ_NAMESPACED[resource], a)
            if resource == ("", "persistentvolumeclaims"):
                if a.subresource == "status":
                    return self._status_update(node, VertexType.PVC, a)
                return self._get(node, VertexType.PVC, a)
            if resource in _GET_ONLY:
                return self._get(node, _GET_ONLY[resource], a)
            if resource == ("", "serviceaccounts"):
                return self._create_token(node, a)
            if resource == ("coordination.k8s.io", "leases"):
                return self._lease(node, a)
            if resource == ("storage.k8s.io", "csinodes"):
                return self._csinode(node, a)
            if resource == ("resource.k8s.io", "resourceslices"):
                return self._resource_slice(node, a)
            if resource == ("", "nodes"):
                return self._node(node, a)
            if resource == ("", "pods"):
                return self._pod(node, a)
        if any(r.allows(a) for r in self.rules):
            return ALLOW
        return NO_OPINION

    # ------------------------------------------------------------ graph-checked reads

    def _related(self, node: str, vertex_type: VertexType, a: Attributes) -> Decision:
        if not a.name:
            self._deny(node, a)
            return _no_opinion("No Object name found")
        related, why = self.graph.has_path_from(node, vertex_type, a.namespace, a.name)
        if not related:
            log.debug("NODE DENY: {why}", why=why)
            return _no_opinion(f"no relationship found between node '{node}' and this object")
        return ALLOW

    def _get(self, node: str, vertex_type: VertexType, a: Attributes) -> Decision:
        if a.verb != "get":
            self._deny(node, a)
            return _no_opinion("can only get individual resources of this type")
        if a.subresource:
            self._deny(node, a)
            return _no_opinion("cannot get subresource")
        return self._related(node, vertex_type, a)

    def _read_namespaced(self, node: str, vertex_type: VertexType, a: Attributes) -> Decision:
        if a.verb not in ("get", "list", "watch"):
            self._deny(node, a)
            return _no_opinion("can only read resources of this type")
        if a.subresource:
            self._deny(node, a)
            return _no_opinion("cannot read subresource")
        if not a.namespace:
            self._deny(node, a)
            return _no_opinion("can only read namespaced object of this type")
        return self._related(node, vertex_type, a)

    def _status_update(self, node: str, vertex_type: VertexType, a: Attributes) -> Decision:
        if a.verb not in ("update", "patch"):
            self._deny(node, a)
            return _no_opinion("can only get/update/patch this type")
        return self._related(node, vertex_type, a)

    def _create_token(self, node: str, a: Attributes) -> Decision:
        if a.verb != "create" or not a.name:
            self._deny(node, a)
            return _no_opinion("can only create tokens for individual service accounts")
        if a.subresource != "token":
            self._deny(node, a)
            return _no_opinion("can only create token subresource of serviceaccount")
        return self._related(node, VertexType.SERVICE_ACCOUNT, a)

    # ------------------------------------------------------------ objects named after the node

    def _lease(self, node: str, a: Attributes) -> Decision:
        if a.verb not in ("get", "create", "update", "patch", "delete"):
            self._deny(node, a)
            return _no_opinion("can only get, create, update, patch, or delete a node lease")
        if a.namespace != NODE_LEASE_NAMESPACE:
            self._deny(node, a)
            return _no_opinion(f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace')
        # the name of a create is in the body: NodeRestriction checks it
        if a.verb != "create" and a.name != node:
            self._deny(node, a)
            return _no_opinion("can only access node lease with the same name as the requesting node")
        return ALLOW

    def _csinode(self, node: str, a: Attributes) -> Decision:
        if a.verb not in ("get", "create", "update", "patch", "delete"):
            self._deny(node, a)
            return _no_opinion("can only get, create, update, patch, or delete a CSINode")
        if a.subresource:
            self._deny(node, a)
            return _no_opinion("cannot authorize CSINode subresources")
        if a.verb != "create" and a.name != node:
            self._deny(node, a)
            return _no_opinion("can only access CSINode with the same name as the requesting node")
        return ALLOW

    def _resource_slice(self, node: str, a: Attributes) -> Decision:
        if a.subresource:
            self._deny(node, a)
            return _no_opinion("cannot authorize ResourceSlice subresources")
        if a.verb == "create":  # NodeRestriction checks spec.nodeName
            return ALLOW
        if a.verb in ("get", "update", "patch", "delete"):
            return self._related(node, VertexType.RESOURCE_SLICE, a)
        if a.verb in ("watch", "list", "deletecollection"):
            if _selects(a, "spec.nodeName", node):
                return ALLOW
            self._deny(node, a)
            return _no_opinion("can only list/watch/deletecollection resourceslices with nodeName field selector")
        self._deny(node, a)
        return _no_opinion("only the following verbs are allowed for a ResourceSlice: get, watch, list, create, "
                           "update, patch, delete, deletecollection")

    # ------------------------------------------------------------ nodes and pods (AuthorizeNodeWithSelectors)

    def _node(self, node: str, a: Attributes) -> Decision:
        if not a.subresource:
            if a.verb in ("create", "update", "patch"):  # NodeRestriction keeps it to its own Node
                return ALLOW
            if a.verb in ("get", "list", "watch"):
                # by name, not through the graph: a kubelet reads its Node before registering it
                if a.name == node:
                    return ALLOW
                self._deny(node, a)
                if not a.name:
                    return _no_opinion(f"node '{node}' cannot read all nodes, only its own Node object")
                return _no_opinion(f"node '{node}' cannot read '{a.name}', only its own Node object")
        elif a.subresource == "status" and a.verb in ("update", "patch"):
            return ALLOW
        self._deny(node, a)
        return NO_OPINION

    def _pod(self, node: str, a: Attributes) -> Decision:
        if not a.subresource:
            if a.verb == "get":
                return self._get(node, VertexType.POD, a)
            if a.verb in ("list", "watch"):
                if _selects(a, "spec.nodeName", node):
                    return ALLOW
                if a.name:  # one pod, by its metadata.name field selector
                    return self._related(node, VertexType.POD, a)
                self._deny(node, a)
                return _no_opinion("can only list/watch pods with spec.nodeName field selector")
            if a.verb in ("create", "delete"):  # mirror pods; NodeRestriction checks which
                return ALLOW
        elif a.subresource == "status":
            if a.verb in ("update", "patch"):
                return ALLOW
        elif a.subresource == "eviction":
            if a.verb == "create":
                return ALLOW
        self._deny(node, a)
        return NO_OPINION

    @staticmethod
    def _deny(node: str, a: Attributes) -> None:
        log.debug("NODE DENY: '{node}' {attributes!r}", node=node, attributes=a)
