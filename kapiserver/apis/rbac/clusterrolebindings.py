"""ClusterRoleBindings (rbac.authorization.k8s.io/v1): enforced by the RBAC authorizer
(kapiserver.auth.rbac); writes that would escalate privileges are refused
(:mod:`kapiserver.apis.rbac.policy_store`).

Validation and columns live in :mod:`kapiserver.apis.rbac.rules`.
"""
from __future__ import annotations

from kapiserver.apis.rbac import policy_store, rules
from kapiserver.registry.resource_type import ResourceType

SCHEMA = "io.k8s.api.rbac.v1.ClusterRoleBinding"


def resource_type() -> ResourceType:
    return ResourceType(
        group=rules.GROUP, version="v1", kind="ClusterRoleBinding", plural="clusterrolebindings", singular="clusterrolebinding", namespaced=False,
        strategy=rules.BindingStrategy(), schema_name=SCHEMA, table_columns=rules.binding_columns(SCHEMA),
        make_store=policy_store.binding_store,
    )
