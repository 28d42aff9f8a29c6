"""JSON merge patch (RFC 7386), the ``application/merge-patch+json`` PATCH type.

Objects merge recursively, ``null`` deletes a key, anything else (lists
included) replaces the target wholesale.  Inputs are never mutated.
"""
from __future__ import annotations

from typing import Any

from kapiserver.machinery.codec import copy_json


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """The result of merging ``patch`` into ``doc`` (a new value)."""
    if not isinstance(patch, dict):  # a list is copied: the patch is applied again on a conflict's retry
        return copy_json(patch) if isinstance(patch, list) else patch
    result = {k: v for k, v in doc.items()} if isinstance(doc, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    # values of ``doc`` not touched by the patch are shared above; copy the mutable
    # ones so the result never aliases the input
    return {k: (copy_json(v) if k not in patch and isinstance(v, (dict, list)) else v) for k, v in result.items()}
