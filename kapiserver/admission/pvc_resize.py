"""PersistentVolumeClaimResize (upstream's admission plugin of that name).

A claim may only grow when it is Bound, and only when its StorageClass
(the same before and after) sets ``allowVolumeExpansion: true``; shrinking
and other updates are left to the claim's own validation.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.lister import Lister, ListingPlugin
from kapiserver.machinery.quantity import parse_quantity, QuantityError
from kapiserver.quota.evaluators import claim_class
from kapiserver.registry.admission import UPDATE, Attributes


def _requested_storage(pvc: dict) -> Any:
    value = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return parse_quantity(str(value)) if value is not None else parse_quantity("0")
    except QuantityError:
        return parse_quantity("0")


class PersistentVolumeClaimResize(ListingPlugin):
    name = "PersistentVolumeClaimResize"
    validating = True
    operations = (UPDATE,)
    resources = frozenset({("", "persistentvolumeclaims")})

    def __init__(self, storage_classes: Lister) -> None:
        self.storage_classes = storage_classes
        self.listers = (storage_classes,)

    async def validate(self, attrs: Attributes) -> None:
        if attrs.rtype.group or attrs.rtype.plural != "persistentvolumeclaims" or attrs.subresource:
            return
        new, old = attrs.obj, attrs.old_obj
        if not isinstance(new, dict) or not isinstance(old, dict):
            return
        if _requested_storage(new) <= _requested_storage(old):
            return
        if (old.get("status") or {}).get("phase") != "Bound":
            raise admission_forbidden(attrs, "Only bound persistent volume claims can be expanded")
        if not await self._allows_resize(new, old):
            raise admission_forbidden(attrs, "only dynamically provisioned pvc can be resized and the storageclass "
                                             "that provisions the pvc must support resize")

    async def _allows_resize(self, new: dict, old: dict) -> bool:
        klass, old_class = claim_class(new), claim_class(old)
        if not klass or klass != old_class:
            return False
        storage_class = await self.storage_classes.get(klass)
        return bool(storage_class and storage_class.get("allowVolumeExpansion") is True)


def pvc_resize(config: Optional[bytes], deps: Any) -> PersistentVolumeClaimResize:
    return PersistentVolumeClaimResize(Lister(lambda: deps.store("storage.k8s.io", "v1", "storageclasses"),
                                              deps.reactor))
