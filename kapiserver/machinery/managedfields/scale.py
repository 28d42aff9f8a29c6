"""Ownership of the replicas through the scale subresource (upstream's ScaleHandler).

A Scale shows the managers of the parent's replicas path as owners of its
``spec.replicas``; after a write of the Scale the parent gets them back: a
manager that owns the Scale's replicas owns the parent's, the others lose
them.  Entries keep their identity (name, operation, subresource) and are
written in the parent's API version.  As upstream, a manager that first
takes the replicas through the scale subresource gets no time stamp: the
time is looked up among the parent's entries under the Scale's identity.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.machinery.managedfields import entries
from kapiserver.machinery.managedfields.entries import Managed
from kapiserver.machinery.managedfields.fieldpath import Path, Set, VersionedSet

SCALE_API_VERSION = "autoscaling/v1"
REPLICAS_IN_SCALE: Path = ("f:spec", "f:replicas")


def replicas_path(spec_replicas_path: str) -> Path:
    """``.spec.replicas`` (a scale subresource's specReplicasPath) as a field path."""
    return tuple("f:" + part for part in spec_replicas_path.lstrip(".").split(".") if part)


def _decode(raw: Any) -> Managed:
    try:
        return entries.decode(raw)
    except entries.ManagedFieldsError:
        return Managed()


def to_subresource(parent_entries: Any, path: Path) -> Optional[list]:
    """The Scale's managedFields: the parent's owners of ``path``, owning ``spec.replicas``."""
    parent = _decode(parent_entries)
    out = Managed()
    for key, vs in parent.fields.items():
        if vs.set.has(path):
            out.fields[key] = VersionedSet(Set.of(REPLICAS_IN_SCALE), SCALE_API_VERSION, vs.applied)
            out.times[key] = parent.times.get(key)
    return entries.encode(out)


def to_parent(parent_entries: Any, scale_entries: Any, path: Path, parent_api_version: str) -> Optional[list]:
    """The parent's managedFields after a write of its Scale."""
    parent = _decode(parent_entries)
    scale = _decode(scale_entries)
    scale_fields = dict(scale.fields)
    out = Managed()
    for key, vs in parent.fields.items():
        if not vs.set.has(path):
            out.fields[key] = vs
            out.times[key] = parent.times.get(key)
        elif key not in scale_fields:
            rest = vs.set.difference(Set.of(path))
            if not rest.empty():
                out.fields[key] = vs.with_set(rest)
                out.times[key] = parent.times.get(key)
        else:
            out.fields[key] = vs
            out.times[key] = parent.times.get(key)
            del scale_fields[key]
    for key, vs in scale_fields.items():
        if not vs.set.has(REPLICAS_IN_SCALE):
            continue
        out.fields[key] = VersionedSet(Set.of(path), parent_api_version, vs.applied)
        out.times[key] = parent.times.get(key)
    return entries.encode(out)
