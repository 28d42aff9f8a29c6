"""Roles (rbac.authorization.k8s.io/v1): stored, listed and watched; not enforced.

Validation and columns live in :mod:`kapiserver.apis.rbac.rules`.
"""
from __future__ import annotations

from kapiserver.apis.rbac import rules
from kapiserver.registry.resource_type import ResourceType

SCHEMA = "io.k8s.api.rbac.v1.Role"


def resource_type() -> ResourceType:
    return ResourceType(
        group=rules.GROUP, version="v1", kind="Role", plural="roles", singular="role", namespaced=True,
        strategy=rules.RoleStrategy(), schema_name=SCHEMA, table_columns=rules.role_columns(SCHEMA),
    )
