"""The server's authorizer from ``authorization.modes`` (upstream's ``--authorization-mode``).

``system:masters`` first (always, as kube-apiserver's privileged-group
authorizer), then each configured mode in order, composed by the union
authorizer: the first allow or deny decides.  The modes are the rule
resolvers of SelfSubjectRulesReview, in the same order.

Mode ``Node`` decides on the graph its caller keeps current (``auth/node/``
GraphPopulator), with the ``system:node`` role's rules for what the graph
does not cover, as upstream builds it.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.auth.authorizer import AlwaysAllow, AlwaysDeny, Authorizer
from kapiserver.auth.node.authorizer import NodeAuthorizer
from kapiserver.auth.node.graph import Graph
from kapiserver.auth.rbac.authorizer import RBACAuthorizer
from kapiserver.auth.rbac.bootstrap_policy import node_rules
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.auth.union import PrivilegedGroups, UnionAuthorizer
from kapiserver.machinery.user import MASTERS_GROUP


def build_authorizer(config: Any, index: PolicyIndex, reactor: IReactorTime,
                     node_graph: Optional[Graph] = None) -> UnionAuthorizer:
    """``config`` is the ``authorization`` section; raises WebhookConfigError for an unusable webhook file.

    ``node_graph`` is required with mode Node."""
    modes: list[Authorizer] = []
    for mode in config.modes:
        if mode == "Node":
            if node_graph is None:
                raise ValueError("authorization mode Node needs the node graph")
            modes.append(NodeAuthorizer(node_graph, node_rules()))
        elif mode == "AlwaysAllow":
            modes.append(AlwaysAllow())
        elif mode == "AlwaysDeny":
            modes.append(AlwaysDeny())
        elif mode == "RBAC":
            modes.append(RBACAuthorizer(index))
        elif mode == "Webhook":
            # the webhook's HTTP client loads only when configured: see kapiserver/machinery/go_http_client.py
            from kapiserver.auth.webhook_authorizer import WebhookAuthorizer
            from kapiserver.auth.webhook_kubeconfig import load_webhook_kubeconfig
            webhook = config.webhook
            modes.append(WebhookAuthorizer(load_webhook_kubeconfig(webhook.config_file), webhook.version,
                                           webhook.cache_authorized_ttl_seconds,
                                           webhook.cache_unauthorized_ttl_seconds, reactor))
        else:
            raise ValueError(f"unknown authorization mode {mode!r}")
    return UnionAuthorizer([PrivilegedGroups(MASTERS_GROUP), *modes], modes)
