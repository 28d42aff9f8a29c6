"""NodeRestriction (upstream's opt-in admission plugin of that name).

Limits what a kubelet, a user ``system:node:<name>`` in the group
``system:nodes``, may write to what concerns its own node:

* its own Node object: not another node's, no change of its taints, and no
  labels in the ``node-restriction.kubernetes.io`` namespace, nor (on update)
  other ``kubernetes.io`` / ``k8s.io`` labels than the kubelet's own;
* pods: create only mirror pods (``kubernetes.io/config.mirror``) bound to
  itself, owned by nothing but its Node, referring to no service account,
  Secret, ConfigMap, PersistentVolumeClaim or ResourceClaim; delete, evict and
  update the status of only the pods bound to it;
* ``serviceaccounts/token``: tokens bound to a pod that runs on it;
* Leases only in ``kube-node-lease`` and named after it; its own CSINode;
  PersistentVolumeClaims only through ``status``, and only their capacity and
  conditions.

Refusals are 403 with upstream's messages.  What a kubelet may do at all is
the authorizer's to say (the Node authorizer, ``auth/node/``, lets it create
and delete pods, update its Node and pod statuses, and leaves to this plugin
which ones); this plugin narrows it as upstream's does.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.machinery.pod_references import pod_configmap_names, pod_secret_names
from kapiserver.apis.columns import get_path
from kapiserver.auth.node.identifier import node_identity
from kapiserver.registry.admission import CREATE, DELETE, UPDATE, AdmissionPlugin, Attributes

PLUGIN_NAME = "NodeRestriction"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_RESTRICTION_LABEL_NAMESPACE = "node-restriction.kubernetes.io"
# the labels a kubelet sets on its Node (upstream's kubeletapis.IsKubeletLabel)
KUBELET_LABELS = frozenset((
    "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os", "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region", "topology.kubernetes.io/zone"))
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def _label_namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def _in_namespace(namespace: str, domain: str) -> bool:
    return namespace == domain or namespace.endswith("." + domain)


def _is_kubelet_label(key: str) -> bool:
    return key in KUBELET_LABELS or any(_in_namespace(_label_namespace(key), ns) for ns in KUBELET_LABEL_NAMESPACES)


def _is_kubernetes_label(key: str) -> bool:
    namespace = _label_namespace(key)
    return _in_namespace(namespace, "kubernetes.io") or _in_namespace(namespace, "k8s.io")


def forbidden_labels(new: dict, old: dict, updating: bool) -> list[str]:
    """The changed label keys a node may not set (sorted, as upstream lists them)."""
    changed = {k for k in set(new) | set(old) if new.get(k) != old.get(k) or (k in new) != (k in old)}
    bad = {k for k in changed if _in_namespace(_label_namespace(k), NODE_RESTRICTION_LABEL_NAMESPACE)}
    if updating:
        bad |= {k for k in changed if _is_kubernetes_label(k) and not _is_kubelet_label(k)}
    return sorted(bad)


class NodeRestriction(AdmissionPlugin):
    name = PLUGIN_NAME
    mutating = True
    operations = (CREATE, UPDATE, DELETE)

    def __init__(self, store: Callable[[str, str, str], Any]) -> None:
        self._store = store  # lazily: the server's Stores

    async def _stored(self, plural: str, namespace: str, name: str) -> dict:
        """The stored object; its 404 passes through as upstream returns the lister's error."""
        return await self._store("", "v1", plural).get(namespace, name)

    async def admit(self, attrs: Attributes) -> None:
        node, is_node = node_identity(attrs.user)
        if not is_node:
            return
        if not node:
            name = attrs.user.name if attrs.user is not None else ""
            raise admission_forbidden(attrs, f'could not determine node from user "{name}"')
        resource = (attrs.rtype.group, attrs.rtype.plural)
        if resource == ("", "pods"):
            await self._pod(attrs, node)
        elif resource == ("", "nodes"):
            self._node(attrs, node)
        elif resource == ("", "persistentvolumeclaims"):
            self._pvc(attrs, node)
        elif resource == ("", "serviceaccounts") and attrs.subresource == "token" and attrs.operation == CREATE:
            await self._token(attrs, node)
        elif resource == ("coordination.k8s.io", "leases"):
            self._named_after_node(attrs, node, "node lease", namespace=NODE_LEASE_NAMESPACE)
        elif resource == ("storage.k8s.io", "csinodes"):
            self._named_after_node(attrs, node, "CSINode")

    # -- pods -----------------------------------------------------------------------------------

    async def _pod(self, attrs: Attributes, node: str) -> None:
        if attrs.subresource == "":
            if attrs.operation == CREATE:
                return await self._mirror_pod_create(attrs, node)
            if attrs.operation == DELETE:
                pod = attrs.old_obj or await self._stored("pods", attrs.namespace, attrs.name)
                if get_path(pod, "spec", "nodeName") != node:
                    raise admission_forbidden(attrs, f'node "{node}" can only delete pods with spec.nodeName set '
                                                     f'to itself')
                return None
            raise admission_forbidden(attrs, f'unexpected operation "{attrs.operation}", node "{node}" can only '
                                             f'create and delete mirror pods')
        if attrs.subresource == "status":
            if attrs.operation != UPDATE:
                raise admission_forbidden(attrs, f'unexpected operation "{attrs.operation}"')
            if get_path(attrs.old_obj, "spec", "nodeName") != node:
                raise admission_forbidden(attrs, f'node "{node}" can only update pod status for pods with '
                                                 f'spec.nodeName set to itself')
            if (get_path(attrs.old_obj, "metadata", "labels") or {}) != (get_path(attrs.obj, "metadata", "labels") or {}):
                raise admission_forbidden(attrs, f'node "{node}" cannot update labels through pod status')
            return None
        if attrs.subresource == "eviction":
            if attrs.operation != CREATE:
                raise admission_forbidden(attrs, f"unexpected operation {attrs.operation}")
            pod_name = attrs.name or get_path(attrs.obj, "metadata", "name")
            if not pod_name:
                raise admission_forbidden(attrs, "could not determine pod from request data")
            pod = await self._stored("pods", attrs.namespace, pod_name)
            if get_path(pod, "spec", "nodeName") != node:
                raise admission_forbidden(attrs, f"node {node} can only evict pods with spec.nodeName set to itself")
            return None
        raise admission_forbidden(attrs, f"unexpected pod subresource \"{attrs.subresource}\", only 'status' and "
                                         f"'eviction' are allowed")

    async def _mirror_pod_create(self, attrs: Attributes, node: str) -> None:
        pod: dict = attrs.obj if isinstance(attrs.obj, dict) else {}
        spec: dict = pod["spec"] if isinstance(pod.get("spec"), dict) else {}
        if MIRROR_POD_ANNOTATION not in (get_path(pod, "metadata", "annotations") or {}):
            raise admission_forbidden(attrs, f'pod does not have "{MIRROR_POD_ANNOTATION}" annotation, node "{node}" '
                                             f'can only create mirror pods')
        if spec.get("nodeName") != node:
            raise admission_forbidden(attrs, f'node "{node}" can only create pods with spec.nodeName set to itself')
        owners = get_path(pod, "metadata", "ownerReferences") or []
        if len(owners) > 1:
            raise admission_forbidden(attrs, f'node "{node}" can only create pods with a single owner reference set '
                                             f'to itself')
        if owners:
            await self._check_node_owner(attrs, node, owners[0] if isinstance(owners[0], dict) else {})
        refused = None
        if spec.get("serviceAccountName"):
            refused = "a service account"
        elif next(pod_secret_names(spec), None) is not None:
            refused = "secrets"
        elif next(pod_configmap_names(spec), None) is not None:
            refused = "configmaps"
        elif any(isinstance(v, dict) and v.get("persistentVolumeClaim") is not None for v in spec.get("volumes") or ()):
            refused = "persistentvolumeclaims"
        elif spec.get("resourceClaims"):
            refused = "resourceclaims"
        if refused:
            raise admission_forbidden(attrs, f'node "{node}" can not create pods that reference {refused}')

    async def _check_node_owner(self, attrs: Attributes, node: str, owner: dict) -> None:
        if owner.get("apiVersion") != "v1" or owner.get("kind") != "Node" or owner.get("name") != node:
            raise admission_forbidden(attrs, f'node "{node}" can only create pods with an owner reference set to '
                                             f'itself')
        if owner.get("controller") is not True:
            raise admission_forbidden(attrs, f'node "{node}" can only create pods with a controller owner reference '
                                             f'set to itself')
        if owner.get("blockOwnerDeletion") is True:
            raise admission_forbidden(attrs, f'node "{node}" must not set blockOwnerDeletion on an owner reference')
        stored = await self._stored("nodes", "", node)
        uid = get_path(stored, "metadata", "uid")
        if owner.get("uid") != uid:
            raise admission_forbidden(attrs, f"node {node} UID mismatch: expected {owner.get('uid')} got {uid}")

    # -- nodes, claims, tokens, leases ---------------------------------------------------------------

    def _node(self, attrs: Attributes, node: str) -> None:
        requested = attrs.name
        if attrs.operation == CREATE:
            requested = requested or get_path(attrs.obj, "metadata", "name") or ""
            bad = forbidden_labels(get_path(attrs.obj, "metadata", "labels") or {}, {}, updating=False)
            if bad:
                raise admission_forbidden(attrs, f'node "{node}" is not allowed to set the following labels: '
                                                 f'{", ".join(bad)}')
        if requested != node:
            raise admission_forbidden(attrs, f'node "{node}" is not allowed to modify node "{requested}"')
        if attrs.operation == UPDATE:
            if (get_path(attrs.obj, "spec", "taints") or []) != (get_path(attrs.old_obj, "spec", "taints") or []):
                raise admission_forbidden(attrs, f'node "{node}" is not allowed to modify taints')
            bad = forbidden_labels(get_path(attrs.obj, "metadata", "labels") or {},
                                   get_path(attrs.old_obj, "metadata", "labels") or {}, updating=True)
            if bad:
                raise admission_forbidden(attrs, f"is not allowed to modify labels: {', '.join(bad)}")

    def _pvc(self, attrs: Attributes, node: str) -> None:
        if attrs.subresource != "status":
            raise admission_forbidden(attrs, "may only update PVC status")
        if attrs.operation != UPDATE:
            raise admission_forbidden(attrs, f'unexpected operation "{attrs.operation}"')

        def comparable(claim: Any) -> dict:
            claim = copy.deepcopy(claim) if isinstance(claim, dict) else {}
            metadata = claim.get("metadata") if isinstance(claim.get("metadata"), dict) else {}
            metadata.pop("resourceVersion", None)
            metadata.pop("managedFields", None)
            status = claim.get("status") if isinstance(claim.get("status"), dict) else {}
            for key in ("capacity", "conditions"):
                status.pop(key, None)
            return claim

        new, old = comparable(attrs.obj), comparable(attrs.old_obj)
        if new != old:
            changed = sorted(k for k in set(new) | set(old) if new.get(k) != old.get(k))
            raise admission_forbidden(attrs, f'node "{node}" is not allowed to update fields other than '
                                             f'status.capacity and status.conditions: {", ".join(changed)}')

    async def _token(self, attrs: Attributes, node: str) -> None:
        ref = get_path(attrs.obj, "spec", "boundObjectRef")
        if not isinstance(ref, dict) or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" \
                or not ref.get("name"):
            raise admission_forbidden(attrs, "node requested token not bound to a pod")
        if not ref.get("uid"):
            raise admission_forbidden(attrs, "node requested token with a pod binding without a uid")
        pod = await self._stored("pods", attrs.namespace, ref["name"])
        uid = get_path(pod, "metadata", "uid")
        if ref["uid"] != uid:
            raise admission_forbidden(attrs, f"the UID in the bound object reference ({ref['uid']}) does not match "
                                             f"the UID in record ({uid}). The object might have been deleted and "
                                             f"then recreated")
        if get_path(pod, "spec", "nodeName") != node:
            raise admission_forbidden(attrs, "node requested token bound to a pod scheduled on a different node")

    @staticmethod
    def _named_after_node(attrs: Attributes, node: str, what: str, namespace: Optional[str] = None) -> None:
        if namespace is not None and attrs.namespace != namespace:
            raise admission_forbidden(attrs, f'can only access leases in the "{namespace}" system namespace')
        name = (get_path(attrs.obj, "metadata", "name") if attrs.operation == CREATE else attrs.name) or ""
        if name != node:
            raise admission_forbidden(attrs, f"can only access {what} with the same name as the requesting node")


def node_restriction(config: Optional[bytes], deps: Any) -> NodeRestriction:
    return NodeRestriction(deps.store)

