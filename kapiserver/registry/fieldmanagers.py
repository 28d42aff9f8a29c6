"""The field manager of a resource type and subresource (managedFields, server-side apply).

The merge semantics come from the same schemas as everything else: the
built-in definitions for built-in kinds (one compiler, shared and lazily
filled), the version's structural schema for custom resources, with
ObjectMeta from the built-in definitions as upstream does.  A type without
any schema is "deduced": maps granular, lists atomic.

What a strategy resets is never owned (upstream's reset fields): the main
resource of a kind with a status subresource does not own ``status``; the
status subresource owns only ``status``.
"""
from __future__ import annotations

import functools
from typing import Optional

from kapiserver.machinery.managedfields import goshape
from kapiserver.machinery.managedfields.fieldmanager import FieldManager
from kapiserver.machinery.managedfields.fieldpath import Set
from kapiserver.machinery.managedfields.scale import SCALE_API_VERSION
from kapiserver.machinery.managedfields.schema import BUILTIN_KEY_DEFAULTS, DEDUCED, Compiler, TypeRef, crd_root
from kapiserver.machinery.managedfields.updater import SetFilter
from kapiserver.machinery.openapi_definitions import load_definitions
from kapiserver.registry.resource_type import ResourceType

SCALE_SCHEMA = "io.k8s.api.autoscaling.v1.Scale"
_STATUS = "f:status"


@functools.lru_cache(maxsize=1)
def builtin_compiler() -> Compiler:
    """The compiler of the built-in definitions (loads them on first use)."""
    return Compiler(load_definitions().get, BUILTIN_KEY_DEFAULTS, go_zero_defaults=True)


def root_type(rtype: ResourceType) -> TypeRef:
    if rtype.schema_name:
        return builtin_compiler().named(rtype.schema_name)
    if rtype.is_crd or rtype.schema is not None:
        compiler = builtin_compiler()
        schema = rtype.schema
        return TypeRef(resolve=lambda: compiler.compile(crd_root(schema), False))
    return DEDUCED


def _without_status(s: Set) -> Set:
    if _STATUS not in s.members and _STATUS not in s.children:
        return s
    return s.recursive_difference(Set({_STATUS}))


def _only_status(s: Set) -> Set:
    status = s.children.get(_STATUS)
    return Set(s.members & {_STATUS}, {_STATUS: status} if status is not None else {})


def reset_fields(rtype: ResourceType, subresource: str) -> Optional[SetFilter]:
    if subresource == "status":
        return _only_status
    if not subresource and rtype.has_status:
        return _without_status
    return None


def field_manager(rtype: ResourceType, subresource: str = "") -> FieldManager:
    """A new field manager for writes of ``rtype`` (through ``subresource``)."""
    if subresource == "scale":
        return FieldManager(builtin_compiler().named(SCALE_SCHEMA), SCALE_API_VERSION, "Scale", "scale",
                            shape=goshape.shaper(SCALE_API_VERSION, "Scale"))
    shape = None if rtype.is_crd else goshape.shaper(rtype.api_version, rtype.kind)
    return FieldManager(root_type(rtype), rtype.api_version, rtype.kind, subresource,
                        reset_fields(rtype, subresource), shape=shape)
