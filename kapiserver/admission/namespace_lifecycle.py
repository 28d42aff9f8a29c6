"""NamespaceLifecycle (upstream's admission plugin of that name).

Objects can only be created in namespaces that exist and are not being
terminated, and the bootstrap namespaces cannot be deleted.  As upstream it
runs in the mutating phase, so a request it refuses never reaches a webhook.
"""
from __future__ import annotations

from typing import Callable, Optional

from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, DELETE, UPDATE, AdmissionPlugin, Attributes
from kapiserver.registry.store import Store, StoredObject

PLUGIN_NAME = "NamespaceLifecycle"
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
# creates in these namespaces are checked like any other, but these are answered from the
# request alone (upstream's accessReviewResources)
_ACCESS_REVIEWS = (("authorization.k8s.io", "localsubjectaccessreviews"),)
# namespaces whose state is remembered (a deleted one's entry stays until this many are)
_REMEMBERED_NAMESPACES = 10_000


class NamespaceLifecycle(AdmissionPlugin):
    name = PLUGIN_NAME
    mutating = True
    operations = (CREATE, UPDATE, DELETE)

    def __init__(self, namespace_store: Callable[[], Store]) -> None:
        self._namespaces = namespace_store  # lazily: the Store of namespaces
        # by namespace: whether the stored value of that mod revision is terminating (every create
        # in a namespace asks; decoding the namespace each time was a few % of a create)
        self._terminating: dict[str, tuple[int, bool]] = {}

    async def admit(self, attrs: Attributes) -> None:
        rtype = attrs.rtype
        is_namespace = rtype.group == "" and rtype.kind == "Namespace"
        if attrs.operation == DELETE and is_namespace:
            if attrs.name in IMMORTAL_NAMESPACES:
                raise errors.forbidden("namespaces", "", attrs.name, "this namespace may not be deleted")
            return
        if is_namespace or not rtype.namespaced or not attrs.namespace or attrs.operation != CREATE:
            return
        if (rtype.group, rtype.plural) in _ACCESS_REVIEWS:
            return
        if await self._is_terminating(attrs.namespace):
            err = errors.forbidden(rtype.plural, rtype.group, attrs.name,
                                   f"unable to create new content in namespace {attrs.namespace} because it is "
                                   "being terminated")
            # controllers (kube-controller-manager's root CA publisher...) stop retrying on this cause
            err.details = dict(err.details or {}, causes=[{
                "reason": "NamespaceTerminating", "message": f"namespace {attrs.namespace} is being terminated",
                "field": "metadata.namespace"}])
            raise err

    async def _is_terminating(self, namespace: str) -> bool:
        """Whether the namespace is being terminated (a 404 when it does not exist)."""
        namespaces = self._namespaces()
        try:
            # the watch cache answers at once; a miss may just be a namespace created
            # a moment ago, so it is confirmed with a live read (as upstream does)
            found = await namespaces.get_stored("", namespace, resource_version="0")
        except errors.StatusError as e:
            if e.code != 404:
                raise
            self._terminating.pop(namespace, None)
            found = await namespaces.get_stored("", namespace)
        if not isinstance(found, StoredObject):
            return _terminating(found)
        revision = found.item.mod_revision
        known = self._terminating.get(namespace)
        if known is not None and known[0] == revision:
            return known[1]
        if len(self._terminating) >= _REMEMBERED_NAMESPACES:
            self._terminating.clear()
        terminating = self._terminating[namespace] = (revision, _terminating(found.external()))
        return terminating[1]


def _terminating(ns: dict) -> bool:
    return bool(ns["metadata"].get("deletionTimestamp")) or (ns.get("status") or {}).get("phase") == "Terminating"


def namespace_lifecycle(config: Optional[bytes], deps: AdmissionDeps) -> NamespaceLifecycle:
    return NamespaceLifecycle(lambda: deps.store("", "v1", "namespaces"))
