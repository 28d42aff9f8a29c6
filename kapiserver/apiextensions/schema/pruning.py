"""Pruning of unknown fields in custom resources (upstream's structural pruning).

Fields the schema does not specify are dropped unless
``x-kubernetes-preserve-unknown-fields`` is set where they appear.  The root
of a resource, and every ``x-kubernetes-embedded-resource``, always keeps
``apiVersion``, ``kind`` and ``metadata``.  The pruned paths are returned so
fieldValidation=Warn/Strict can report ``unknown field "spec.foo"``.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.machinery.schema_paths import child, index

_TYPE_META = ("apiVersion", "kind")
# ObjectMeta fields kept in an embedded resource's metadata.
_OBJECT_META = frozenset((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
    "ownerReferences", "finalizers", "managedFields",
))


def prune(obj: Any, schema: Optional[dict], is_resource_root: bool = True, path: str = "") -> list[str]:
    """Remove unknown fields from ``obj`` in place; return their paths, sorted."""
    pruned: list[str] = []
    _prune(obj, schema or {}, is_resource_root, path, pruned)
    return sorted(pruned)


def _prune(value: Any, s: dict, is_root: bool, path: str, pruned: list[str]) -> None:
    if isinstance(value, dict):
        _prune_object(value, s, is_root or bool(s.get("x-kubernetes-embedded-resource")), path, pruned)
    elif isinstance(value, list):
        items = s.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _prune(item, items, False, index(path, i), pruned)
        elif not s.get("x-kubernetes-preserve-unknown-fields"):
            for i, item in enumerate(value):
                _prune(item, {}, False, index(path, i), pruned)


def _prune_object(obj: dict, s: dict, keeps_meta: bool, path: str, pruned: list[str]) -> None:
    props = s.get("properties") or {}
    additional = s.get("additionalProperties")
    preserve = bool(s.get("x-kubernetes-preserve-unknown-fields"))
    for name in list(obj):
        sub = props.get(name)
        if keeps_meta and name in _TYPE_META and sub is None:
            continue
        if keeps_meta and name == "metadata":
            if path and isinstance(obj[name], dict):  # embedded resource: ObjectMeta only
                for meta_key in list(obj[name]):
                    if meta_key not in _OBJECT_META:
                        del obj[name][meta_key]
                        pruned.append(child(child(path, name), meta_key))
            continue
        if sub is None and isinstance(additional, dict):
            sub = additional
        if sub is not None:
            _prune(obj[name], sub, False, child(path, name), pruned)
        elif preserve or additional is True:
            continue
        else:
            del obj[name]
            pruned.append(child(path, name))
