"""The 409 Conflict an apply answers when it would take fields other managers own.

Message and causes as upstream's ``NewConflictError``: one cause per field
(reason ``FieldManagerConflict``, ``field`` the path as ``.spec.replicas``),
the message grouping the fields by manager.
"""
from __future__ import annotations

import json

from kapiserver.machinery import errors
from kapiserver.machinery.managedfields.entries import UPDATE, ManagerKey
from kapiserver.machinery.managedfields.fieldpath import path_string
from kapiserver.machinery.managedfields.updater import Conflicts

FIELD_MANAGER_CONFLICT = "FieldManagerConflict"


def print_manager(key: object) -> str:
    """``"kubectl" using apps/v1``, ``"ctl" with subresource "status"``: how upstream names a manager."""
    if not isinstance(key, ManagerKey):
        return json.dumps(str(key))
    out = json.dumps(key.manager, ensure_ascii=False)
    if key.subresource:
        out += f" with subresource {json.dumps(key.subresource, ensure_ascii=False)}"
    if key.operation == UPDATE:
        out += f" using {key.api_version}"
    return out


def conflict_error(conflicts: Conflicts) -> errors.StatusError:
    items = conflicts.conflicts
    causes = [errors.Cause(FIELD_MANAGER_CONFLICT, f"conflict with {print_manager(key)}", path_string(path))
              for key, path in items]
    if len(items) == 1:
        key, path = items[0]
        message = f"Apply failed with 1 conflict: conflict with {print_manager(key)}: {path_string(path)}"
    else:
        grouped: dict[str, list[str]] = {}
        names = {}
        for key, path in items:
            ident = key.identifier() if isinstance(key, ManagerKey) else str(key)
            grouped.setdefault(ident, []).append(path_string(path))
            names[ident] = print_manager(key)
        lines = []
        for ident in sorted(grouped):
            lines.append(f"conflicts with {names[ident]}:")
            lines.extend(f"- {p}" for p in grouped[ident])
        message = f"Apply failed with {len(items)} conflicts: " + "\n".join(lines)
    return errors.StatusError(409, "Conflict", message, {"causes": [c.to_dict() for c in causes]})
