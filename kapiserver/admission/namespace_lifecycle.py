"""NamespaceLifecycle (upstream's admission plugin of that name).

Objects can only be created in namespaces that exist and are not being
terminated, and the bootstrap namespaces cannot be deleted.
"""
from __future__ import annotations

from typing import Callable

from kapiserver.admission.interface import CREATE, DELETE, AdmissionPlugin, Attributes
from kapiserver.machinery import errors

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")


class NamespaceLifecycle(AdmissionPlugin):
    def __init__(self, namespace_store: Callable[[], object]) -> None:
        self._namespaces = namespace_store  # lazily: the Store of namespaces

    async def validate(self, attrs: Attributes) -> None:
        rtype = attrs.rtype
        if attrs.operation == DELETE and rtype.group == "" and rtype.plural == "namespaces":
            if attrs.name in IMMORTAL_NAMESPACES:
                raise errors.forbidden("namespaces", "", attrs.name, "this namespace may not be deleted")
            return
        if attrs.operation != CREATE or not rtype.namespaced or not attrs.namespace:
            return
        namespaces = self._namespaces()
        try:
            # the watch cache answers at once; a miss may just be a namespace created
            # a moment ago, so it is confirmed with a live read (as upstream does)
            ns = await namespaces.get("", attrs.namespace, resource_version="0")
        except errors.StatusError as e:
            if e.code != 404:
                raise
            ns = await namespaces.get("", attrs.namespace)
        if ns["metadata"].get("deletionTimestamp") or (ns.get("status") or {}).get("phase") == "Terminating":
            err = errors.forbidden(rtype.plural, rtype.group, attrs.name,
                                   f"unable to create new content in namespace {attrs.namespace} because it is "
                                   "being terminated")
            # controllers (kube-controller-manager's root CA publisher...) stop retrying on this cause
            err.details = dict(err.details or {}, causes=[{
                "reason": "NamespaceTerminating", "message": f"namespace {attrs.namespace} is being terminated",
                "field": "metadata.namespace"}])
            raise err
