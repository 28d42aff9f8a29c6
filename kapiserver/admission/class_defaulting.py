"""DefaultStorageClass and DefaultIngressClass (upstream's admission plugins of those names).

A PersistentVolumeClaim created without a storage class (neither
``spec.storageClassName`` nor the beta annotation) gets the default
StorageClass, an Ingress created without ``spec.ingressClassName`` (nor the
``kubernetes.io/ingress.class`` annotation) the default IngressClass: the
class annotated ``...is-default-class: "true"``, the newest one when several
are (ties by name), as upstream chooses.  Both are mutating and only see
creates; without a default class the object is left as it is.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.admission.lister import Lister, ListingPlugin
from kapiserver.registry.admission import CREATE, Attributes

STORAGE_CLASS_DEFAULT = ("storageclass.kubernetes.io/is-default-class",
                         "storageclass.beta.kubernetes.io/is-default-class")
BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
INGRESS_CLASS_DEFAULT = ("ingressclass.kubernetes.io/is-default-class",)
INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"


def default_class(classes: list[dict], annotations: tuple[str, ...]) -> Optional[dict]:
    """The newest class carrying one of ``annotations`` set to "true" (by name on equal times)."""
    defaults = [c for c in classes
                if any(((c.get("metadata") or {}).get("annotations") or {}).get(a) == "true" for a in annotations)]
    if not defaults:
        return None
    defaults.sort(key=lambda c: c["metadata"].get("name", ""))
    defaults.sort(key=lambda c: c["metadata"].get("creationTimestamp") or "", reverse=True)
    return defaults[0]


class _ClassDefaulter(ListingPlugin):
    mutating = True
    operations = (CREATE,)
    group = ""
    resource = ""
    default_annotations: tuple[str, ...] = ()

    def __init__(self, classes: Lister) -> None:
        self.classes = classes
        self.listers = (classes,)
        self.resources = frozenset({(self.group, self.resource)})

    def has_class(self, obj: dict) -> bool:
        raise NotImplementedError

    def set_class(self, obj: dict, name: str) -> None:
        raise NotImplementedError

    async def admit(self, attrs: Attributes) -> None:
        if (attrs.rtype.group, attrs.rtype.plural) != (self.group, self.resource) or attrs.subresource:
            return
        obj = attrs.obj
        if not isinstance(obj, dict) or self.has_class(obj):
            return
        chosen = default_class(await self.classes.list(), self.default_annotations)
        if chosen is not None:
            self.set_class(obj, chosen["metadata"]["name"])


class DefaultStorageClass(_ClassDefaulter):
    name = "DefaultStorageClass"
    resource = "persistentvolumeclaims"
    default_annotations = STORAGE_CLASS_DEFAULT

    def has_class(self, obj: dict) -> bool:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        return BETA_STORAGE_CLASS in annotations or (obj.get("spec") or {}).get("storageClassName") is not None

    def set_class(self, obj: dict, name: str) -> None:
        obj.setdefault("spec", {})["storageClassName"] = name


class DefaultIngressClass(_ClassDefaulter):
    name = "DefaultIngressClass"
    group = "networking.k8s.io"
    resource = "ingresses"
    default_annotations = INGRESS_CLASS_DEFAULT

    def has_class(self, obj: dict) -> bool:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        return INGRESS_CLASS_ANNOTATION in annotations or (obj.get("spec") or {}).get("ingressClassName") is not None

    def set_class(self, obj: dict, name: str) -> None:
        obj.setdefault("spec", {})["ingressClassName"] = name


def default_storage_class(config: Optional[bytes], deps: Any) -> DefaultStorageClass:
    return DefaultStorageClass(Lister(lambda: deps.store("storage.k8s.io", "v1", "storageclasses"), deps.reactor))


def default_ingress_class(config: Optional[bytes], deps: Any) -> DefaultIngressClass:
    return DefaultIngressClass(Lister(lambda: deps.store("networking.k8s.io", "v1", "ingressclasses"), deps.reactor))
