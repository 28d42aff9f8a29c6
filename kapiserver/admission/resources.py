"""Served resources as admission sees them (upstream's EquivalentResourceMapper and the
RESTMapper lookups policies need).

Two resources are *equivalent* when they are the same objects served at two
URLs: the versions of one custom resource, or built-in versions kept in one
storage (``events`` and ``events.k8s.io`` events; autoscaling v1 and v2
HorizontalPodAutoscalers).  A webhook or policy with ``matchPolicy:
Equivalent`` whose rules name one of them sees requests to the others,
converted to the version it named.  The mapping is rebuilt whenever the
served types change (CRDs).
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.registry.groups import ServedTypes
from kapiserver.registry.resource_type import ResourceType

SCALE_KIND = GroupVersionKind("autoscaling", "v1", "Scale")


def subresource_kind(rtype: ResourceType, subresource: str) -> Optional[GroupVersionKind]:
    """The kind of the objects a subresource takes (None if the resource has no such subresource)."""
    if not subresource or subresource == "status" and rtype.has_status:
        return GroupVersionKind(rtype.group, rtype.version, rtype.kind)
    if subresource == "scale" and rtype.scale is not None:
        return SCALE_KIND
    sub = rtype.subresource(subresource)
    if sub is None:
        return None
    if sub.version:
        return GroupVersionKind(sub.group, sub.version, sub.kind or rtype.kind)
    return GroupVersionKind(rtype.group, rtype.version, sub.kind or rtype.kind)


def _storage_identity(rtype: ResourceType) -> tuple:
    """What equivalent resources share: their stored objects."""
    return (rtype.storage_resource, rtype.is_crd)


class ResourceMapper:
    def __init__(self, served: ServedTypes) -> None:
        self._served = served
        self._built_for: Any = object()
        self._by_gvr: dict[GroupVersionResource, ResourceType] = {}
        self._by_kind: dict[tuple[str, str, str], ResourceType] = {}
        self._by_storage: dict[tuple, list[ResourceType]] = {}

    def _refresh(self) -> None:
        generation = self._served.generation
        if generation == self._built_for:
            return
        by_gvr: dict[GroupVersionResource, ResourceType] = {}
        by_kind: dict[tuple[str, str, str], ResourceType] = {}
        by_storage: dict[tuple, list[ResourceType]] = {}
        for rtype in self._served.types():
            by_gvr[GroupVersionResource(rtype.group, rtype.version, rtype.plural)] = rtype
            by_kind.setdefault((rtype.group, rtype.version, rtype.kind), rtype)
            if rtype.stored:
                by_storage.setdefault(_storage_identity(rtype), []).append(rtype)
        self._by_gvr, self._by_kind, self._by_storage = by_gvr, by_kind, by_storage
        self._built_for = generation

    def resource_type(self, gvr: GroupVersionResource) -> Optional[ResourceType]:
        self._refresh()
        return self._by_gvr.get(gvr)

    def for_kind(self, group: str, version: str, kind: str) -> Optional[ResourceType]:
        """The resource serving a kind (a policy's paramKind)."""
        self._refresh()
        return self._by_kind.get((group, version, kind))

    def kinds_for(self, gvr: GroupVersionResource) -> Optional[GroupVersionKind]:
        rtype = self.resource_type(gvr)
        return None if rtype is None else GroupVersionKind(rtype.group, rtype.version, rtype.kind)

    def equivalents(self, rtype: ResourceType, subresource: str) -> list[GroupVersionResource]:
        """The resources serving the same objects as ``rtype`` (itself included), with the subresource."""
        self._refresh()
        if not rtype.stored:
            return [GroupVersionResource(rtype.group, rtype.version, rtype.plural)]
        out = []
        for other in self._by_storage.get(_storage_identity(rtype), [rtype]):
            if subresource and subresource_kind(other, subresource) is None:
                continue
            out.append(GroupVersionResource(other.group, other.version, other.plural))
        return out

    def kind_for(self, gvr: GroupVersionResource, subresource: str) -> Optional[GroupVersionKind]:
        """The kind a request to ``gvr`` (and ``subresource``) carries (upstream's KindFor)."""
        rtype = self.resource_type(gvr)
        return None if rtype is None else subresource_kind(rtype, subresource)


async def convert(obj: Optional[dict], source: ResourceType, target: ResourceType) -> Optional[dict]:
    """``obj`` (of ``source``'s version) as ``target``'s version: an equivalent resource's objects
    through their shared stored form.  The input is not changed."""
    if obj is None or source is target or source.api_version == target.api_version:
        return obj
    if target.convert_from_storage_async is not None:
        return (await target.convert_from_storage_async([obj]))[0]
    if source.convert_to_storage_async is not None:
        stored = (await source.convert_to_storage_async([obj]))[0]
    else:
        stored = source.convert_to_storage(obj) if source.convert_to_storage is not None else obj
    if target.convert_from_storage is not None:
        out = target.convert_from_storage(stored)
    else:
        out = dict(stored)
    out["apiVersion"] = target.api_version
    out["kind"] = target.kind
    return out
