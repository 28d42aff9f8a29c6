"""The server's authorizer from ``authorization.modes`` (upstream's ``--authorization-mode``).

``system:masters`` first (always, as kube-apiserver's privileged-group
authorizer), then each configured mode in order, composed by the union
authorizer: the first allow or deny decides.  The modes are the rule
resolvers of SelfSubjectRulesReview, in the same order.
"""
from __future__ import annotations

from typing import Any

from kapiserver.auth.authorizer import AlwaysAllow, AlwaysDeny, Authorizer
from kapiserver.auth.rbac.authorizer import RBACAuthorizer
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.auth.union import PrivilegedGroups, UnionAuthorizer
from kapiserver.auth.user import MASTERS_GROUP
from kapiserver.auth.webhook_authorizer import WebhookAuthorizer
from kapiserver.auth.webhook_kubeconfig import load_webhook_kubeconfig


def build_authorizer(config: Any, index: PolicyIndex, reactor: Any) -> UnionAuthorizer:
    """``config`` is the ``authorization`` section; raises WebhookConfigError for an unusable webhook file."""
    modes: list[Authorizer] = []
    for mode in config.modes:
        if mode == "AlwaysAllow":
            modes.append(AlwaysAllow())
        elif mode == "AlwaysDeny":
            modes.append(AlwaysDeny())
        elif mode == "RBAC":
            modes.append(RBACAuthorizer(index))
        elif mode == "Webhook":
            webhook = config.webhook
            modes.append(WebhookAuthorizer(load_webhook_kubeconfig(webhook.config_file), webhook.version,
                                           webhook.cache_authorized_ttl_seconds,
                                           webhook.cache_unauthorized_ttl_seconds, reactor))
        else:
            raise ValueError(f"unknown authorization mode {mode!r}")
    return UnionAuthorizer([PrivilegedGroups(MASTERS_GROUP), *modes], modes)
