"""StorageObjectInUseProtection (upstream's admission plugin of that name).

Every PersistentVolumeClaim and PersistentVolume is created with the
``kubernetes.io/pvc-protection`` / ``kubernetes.io/pv-protection``
finalizer, so a claim a pod still uses, or a volume still bound to a claim,
is only marked for deletion; the protection controllers
(``controllers/storage_protection.py``, or kube-controller-manager's) remove
the finalizer once it is unused.
"""
from __future__ import annotations

from typing import Optional

from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.registry.admission import CREATE, AdmissionPlugin, Attributes


PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
_FINALIZERS = {"persistentvolumeclaims": PVC_PROTECTION, "persistentvolumes": PV_PROTECTION}


class StorageObjectInUseProtection(AdmissionPlugin):
    name = "StorageObjectInUseProtection"
    mutating = True
    operations = (CREATE,)
    resources = frozenset(("", plural) for plural in _FINALIZERS)

    async def admit(self, attrs: Attributes) -> None:
        if attrs.rtype.group or attrs.subresource or not isinstance(attrs.obj, dict):
            return
        finalizer = _FINALIZERS.get(attrs.rtype.plural)
        if finalizer is None:
            return
        md = attrs.obj.setdefault("metadata", {})
        finalizers = md.get("finalizers")
        if not isinstance(finalizers, list):
            finalizers = md["finalizers"] = []
        if finalizer not in finalizers:
            finalizers.append(finalizer)


def storage_object_in_use_protection(config: Optional[bytes], deps: AdmissionDeps) -> StorageObjectInUseProtection:
    return StorageObjectInUseProtection()
