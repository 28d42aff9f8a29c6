"""Authorization cost per request: the server's authorizer (system:masters, then RBAC) in-process.

The RBAC index holds upstream's bootstrap policy plus a synthetic cluster:
``--namespaces`` namespaces with ``--bindings`` RoleBindings each (to edit, view
and a custom Role) and ``--cluster-bindings`` ClusterRoleBindings for groups.
Each row is one kind of request as the authorization filter asks it; the
numbers are microseconds per ``authorize()`` call (median of 5 rounds), with
the per-user resolution cache warm, and cold (after an RBAC change, the first
request of each user pays the resolution).  No server, no HTTP: this is the
part of a request's cost that authorization adds.

    python bench/authorization.py [--namespaces 1000] [--bindings 3] [--cluster-bindings 100]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

sys.path.insert(0, ".")

from kapiserver.auth.authorizer import Attributes  # noqa: E402
from kapiserver.auth.rbac import bootstrap_policy  # noqa: E402
from kapiserver.auth.rbac.authorizer import RBACAuthorizer  # noqa: E402
from kapiserver.auth.rbac.policy_index import PolicyIndex  # noqa: E402
from kapiserver.auth.union import PrivilegedGroups, UnionAuthorizer  # noqa: E402
from kapiserver.machinery.user import UserInfo  # noqa: E402
from kapiserver.controllers.clusterrole_aggregation import aggregated_rules  # noqa: E402

GROUP = "rbac.authorization.k8s.io"


def build_index(namespaces: int, bindings: int, cluster_bindings: int) -> PolicyIndex:
    index = PolicyIndex()
    roles = bootstrap_policy.cluster_roles()
    for role in roles:  # aggregated roles as the controller fills them
        if "aggregationRule" in role:
            role["rules"] = aggregated_rules(role, roles)
    for role in roles:
        index.set_cluster_role(role)
    for b in bootstrap_policy.cluster_role_bindings():
        index.set_cluster_role_binding(b)
    for i in range(cluster_bindings):
        index.set_cluster_role_binding({"metadata": {"name": f"team-{i}"},
                                        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
                                        "subjects": [{"kind": "Group", "name": f"team-{i}"}]})
    for n in range(namespaces):
        ns = f"ns-{n}"
        index.set_role({"metadata": {"namespace": ns, "name": "config-reader"},
                        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                                   "resourceNames": ["app"]}]})
        for b in range(bindings):
            role = ["edit", "view", "config-reader"][b % 3]
            kind = "Role" if role == "config-reader" else "ClusterRole"
            index.set_role_binding({"metadata": {"namespace": ns, "name": f"b{b}"},
                                    "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
                                    "subjects": [{"kind": "User", "name": f"user-{n}-{b}"},
                                                 {"kind": "ServiceAccount", "name": "deployer"}]})
    return index


def per_call_us(fn, calls: int) -> float:
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--bindings", type=int, default=3)
    parser.add_argument("--cluster-bindings", type=int, default=100)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    start = time.perf_counter()
    index = build_index(args.namespaces, args.bindings, args.cluster_bindings)
    built = time.perf_counter() - start
    authorizer = UnionAuthorizer([PrivilegedGroups("system:masters"), RBACAuthorizer(index)], [])
    ns = f"ns-{args.namespaces // 2}"
    authenticated = ("system:authenticated",)
    cases = [
        ("system:masters (privileged group)", UserInfo("admin", ("system:masters", *authenticated)),
         Attributes("delete", namespace=ns, resource="secrets", name="s")),
        ("edit via RoleBinding: create pods", UserInfo(f"user-{args.namespaces // 2}-0", authenticated),
         Attributes("create", namespace=ns, resource="pods")),
        ("view via RoleBinding: list deployments", UserInfo(f"user-{args.namespaces // 2}-1", authenticated),
         Attributes("list", namespace=ns, api_group="apps", resource="deployments")),
        ("custom Role with resourceNames", UserInfo(f"user-{args.namespaces // 2}-2", authenticated),
         Attributes("get", namespace=ns, resource="configmaps", name="app")),
        ("service account via RoleBinding", UserInfo(f"system:serviceaccount:{ns}:deployer",
                                                    ("system:serviceaccounts", f"system:serviceaccounts:{ns}",
                                                     *authenticated)),
         Attributes("patch", namespace=ns, api_group="apps", resource="deployments", subresource="scale", name="d")),
        ("group view via ClusterRoleBinding", UserInfo("member", ("team-7", *authenticated)),
         Attributes("get", namespace=ns, resource="pods", name="p")),
        ("discovery (non-resource)", UserInfo("someone", authenticated),
         Attributes("get", resource_request=False, path="/apis/apps/v1")),
        ("denied: no binding (403)", UserInfo("stranger", authenticated),
         Attributes("delete", namespace=ns, resource="secrets", name="s")),
        ("denied: anonymous secrets (403)", UserInfo("system:anonymous", ("system:unauthenticated",)),
         Attributes("list", resource="secrets")),
    ]
    print(f"RBAC index: {len(index.cluster_roles)} ClusterRoles, {len(index.cluster_role_bindings)} "
          f"ClusterRoleBindings, {len(index.roles)} Roles, {len(index.role_bindings)} RoleBindings "
          f"(built in {built * 1000:.0f} ms)\n")
    print("| request | allowed | warm µs/call | cold µs/call |")
    print("|---|---|---|---|")
    for label, user, attributes in cases:
        decision = authorizer.authorize(user, attributes)
        assert not hasattr(decision, "addCallback")
        warm = per_call_us(lambda: authorizer.authorize(user, attributes), args.calls)

        def cold() -> None:
            index._changed()  # what any RBAC write does: the resolution cache is dropped
            authorizer.authorize(user, attributes)
        cold_us = per_call_us(cold, max(1, args.calls // 10))
        print(f"| {label} | {'yes' if decision.allowed else 'no'} | {warm:.2f} | {cold_us:.1f} |")


if __name__ == "__main__":
    main()
