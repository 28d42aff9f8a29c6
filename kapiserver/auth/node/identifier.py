"""Which node a user is (upstream's pkg/auth/nodeidentifier, the default NodeIdentifier).

A kubelet authenticates as ``system:node:<node name>`` in the group ``system:nodes``; both
are needed.  The Node authorizer and the NodeRestriction admission plugin ask the same question.
"""
from __future__ import annotations

from typing import Optional

from kapiserver.machinery.user import NODES_GROUP, UserInfo

NODE_USER_PREFIX = "system:node:"


def node_identity(user: Optional[UserInfo]) -> tuple[str, bool]:
    """(node name, is a node): a node only with the prefix and the group; the name is "" for
    the bare prefix (a node whose name cannot be told)."""
    if user is None or not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
        return "", False
    return user.name[len(NODE_USER_PREFIX):], True
