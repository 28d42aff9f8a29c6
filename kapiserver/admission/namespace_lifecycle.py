"""NamespaceLifecycle (upstream's admission plugin of that name).

Objects can only be created in namespaces that exist and are not being
terminated, and the bootstrap namespaces cannot be deleted.  As upstream it
runs in the mutating phase, so a request it refuses never reaches a webhook.
"""
from __future__ import annotations

from typing import Callable

from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, DELETE, UPDATE, AdmissionPlugin, Attributes

PLUGIN_NAME = "NamespaceLifecycle"
IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
# creates in these namespaces are checked like any other, but these are answered from the
# request alone (upstream's accessReviewResources)
_ACCESS_REVIEWS = (("authorization.k8s.io", "localsubjectaccessreviews"),)


class NamespaceLifecycle(AdmissionPlugin):
    name = PLUGIN_NAME
    mutating = True
    operations = (CREATE, UPDATE, DELETE)

    def __init__(self, namespace_store: Callable[[], object]) -> None:
        self._namespaces = namespace_store  # lazily: the Store of namespaces

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
        namespaces = self._namespaces()
        try:
            # the watch cache answers at once; a miss may just be a namespace created
            # a moment ago, so it is confirmed with a live read (as upstream does)
            ns = await namespaces.get("", attrs.namespace, resource_version="0")  # type: ignore[attr-defined]
        except errors.StatusError as e:
            if e.code != 404:
                raise
            ns = await namespaces.get("", attrs.namespace)  # type: ignore[attr-defined]
        if ns["metadata"].get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == "Terminating":
            err = errors.forbidden(rtype.plural, rtype.group, attrs.name,
                                   f"unable to create new content in namespace {attrs.namespace} because it is "
                                   "being terminated")
            # controllers (kube-controller-manager's root CA publisher...) stop retrying on this cause
            err.details = dict(err.details or {}, causes=[{
                "reason": "NamespaceTerminating", "message": f"namespace {attrs.namespace} is being terminated",
                "field": "metadata.namespace"}])
            raise err
