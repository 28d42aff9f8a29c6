"""Every protobuf field table: the hand-written ones (``protobuf_types.py``) over the
generated ones (``protobuf_tables_generated.py``, from tools/gen_protobuf_tables.py).

The generated module, which is built on the field types of ``protobuf_types.py``,
is loaded on first use: a server that never sees protobuf never imports it.
"""
from __future__ import annotations

from collections import ChainMap
from typing import MutableMapping, Optional, cast

from kapiserver.machinery.protobuf_types import ANY_GROUP_VERSION_KINDS, KINDS, MESSAGES


def message_for(group: str, version: str, kind: str) -> Optional[str]:
    """The message name of a top-level kind, or None when protobuf is not served for it."""
    return all_kinds().get((group, version, kind)) or ANY_GROUP_VERSION_KINDS.get(kind)


_merged: dict[str, ChainMap] = {}


def all_messages() -> ChainMap:
    """Every table: the generated ones (tools/gen_protobuf_tables.py), with the
    hand-written ones above taking precedence.  Loaded on first use, so a server
    that never sees protobuf never imports the generated module."""
    if not _merged:
        from kapiserver.machinery import protobuf_tables_generated as generated
        # (ChainMap only reads what it is given; its annotations ask for mutable maps)
        _merged["messages"] = ChainMap(MESSAGES, cast(MutableMapping, generated.MESSAGES))
        _merged["kinds"] = ChainMap(KINDS, generated.KINDS)
    return _merged["messages"]


def all_kinds() -> ChainMap:
    """(group, version, kind) -> message, generated and hand-written."""
    all_messages()
    return _merged["kinds"]
