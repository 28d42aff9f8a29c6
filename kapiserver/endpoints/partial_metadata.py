"""``PartialObjectMetadata`` and its list: an object reduced to its metadata.

Clients ask for it with ``Accept: application/json;as=PartialObjectMetadata;
g=meta.k8s.io;v=v1`` (or ``v1beta1``, or the ``...List`` kind on collections),
and Table rows carry it by default (``includeObject=Metadata``).
"""
from __future__ import annotations

from typing import Optional

META_V1 = "meta.k8s.io/v1"


def to_partial_object_metadata(obj: dict, api_version: str = META_V1) -> dict:
    """The object's full ``metadata`` under PartialObjectMetadata's type (shared, not copied)."""
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": obj.get("metadata") or {}}


def to_partial_object_metadata_list(items: list[dict], api_version: str = META_V1,
                                    list_meta: Optional[dict] = None) -> dict:
    """A ``PartialObjectMetadataList``: each item typed, the list's ListMeta kept."""
    return {"kind": "PartialObjectMetadataList", "apiVersion": api_version, "metadata": dict(list_meta or {}),
            "items": [to_partial_object_metadata(i, api_version) for i in items]}
