"""Structural defaulting of custom resources (upstream's structuraldefaulting).

Runs after decoding (and after pruning): a property missing from an object,
or null where the schema does not allow null, gets a deep copy of its
``default``; nulls of non-nullable fields without default are dropped.  The
walk descends into properties, additionalProperties and items, so defaults
apply at every depth of whatever the object holds.
"""
from __future__ import annotations

import copy
from typing import Any, Optional


def apply_defaults(obj: Any, schema: Optional[dict]) -> None:
    """Fill in schema defaults in ``obj`` in place."""
    if not schema:
        return
    if isinstance(obj, dict):
        _default_object(obj, schema)
    elif isinstance(obj, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(obj):
                if item is None and not items.get("nullable") and "default" in items:
                    obj[i] = copy.deepcopy(items["default"])
                apply_defaults(obj[i], items)


def _default_object(obj: dict, schema: dict) -> None:
    props = schema.get("properties") or {}
    for name, prop in props.items():
        present = name in obj
        if "default" in prop and (not present or (obj[name] is None and not prop.get("nullable"))):
            obj[name] = copy.deepcopy(prop["default"])
        elif present and obj[name] is None and not prop.get("nullable"):
            del obj[name]
    additional = schema.get("additionalProperties")
    for name in list(obj):
        sub = props.get(name)
        if sub is None and isinstance(additional, dict):
            sub = additional
            if obj[name] is None and not sub.get("nullable"):
                if "default" in sub:
                    obj[name] = copy.deepcopy(sub["default"])
                else:
                    del obj[name]
                    continue
        if sub is not None:
            apply_defaults(obj[name], sub)
