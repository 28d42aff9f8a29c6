"""Bootstrap policy reconciliation and ClusterRole aggregation, as pure functions."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.auth.rbac import bootstrap_policy
from kapiserver.auth.rbac.reconciliation import (NONE, RECREATE, UPDATE, compute_reconciled_binding,
                                                 compute_reconciled_role)
from kapiserver.auth.union import aggregate_message
from kapiserver.controllers.clusterrole_aggregation import aggregated_rules

ANNOTATION = "rbac.authorization.kubernetes.io/autoupdate"


def by_name(objs: list[dict], name: str) -> dict:
    return next(o for o in objs if o["metadata"]["name"] == name)


class BootstrapPolicyTests(unittest.TestCase):
    def test_upstream_roles_and_bindings(self) -> None:
        roles = bootstrap_policy.cluster_roles()
        bindings = bootstrap_policy.cluster_role_bindings()
        self.assertEqual(len({r["metadata"]["name"] for r in roles}), len(roles))
        admin = by_name(bindings, "cluster-admin")
        self.assertEqual(admin["subjects"], [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                              "name": "system:masters"}])
        public = by_name(bindings, "system:public-info-viewer")
        self.assertEqual([s["name"] for s in public["subjects"]], ["system:authenticated", "system:unauthenticated"])
        self.assertEqual([s["name"] for s in by_name(bindings, "system:discovery")["subjects"]],
                         ["system:authenticated"])
        self.assertEqual(by_name(roles, "system:public-info-viewer")["rules"],
                         [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version",
                                                                 "/version/"]}])
        view = by_name(roles, "view")
        self.assertNotIn("rules", view)
        self.assertEqual(view["aggregationRule"]["clusterRoleSelectors"],
                         [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}])
        for obj in roles + bindings:
            self.assertEqual(obj["metadata"]["annotations"], {ANNOTATION: "true"})
            self.assertEqual(obj["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults")
        # each controller role is bound to its service account in kube-system
        gc = by_name(bindings, "system:controller:generic-garbage-collector")
        self.assertEqual(gc["subjects"], [{"kind": "ServiceAccount", "name": "generic-garbage-collector",
                                           "namespace": "kube-system"}])
        # edit can no longer write Endpoints (CVE-2021-25740), as upstream since 1.22
        edit = by_name(roles, "system:aggregate-to-edit")
        writes = [r for r in edit["rules"] if "create" in r["verbs"] and r["apiGroups"] == [""]]
        self.assertFalse(any("endpoints" in r["resources"] for r in writes))


class ReconcileRoleTests(unittest.TestCase):
    def expected(self) -> dict:
        return by_name(bootstrap_policy.cluster_roles(), "system:basic-user")

    def test_user_additions_stay_and_missing_rules_come_back(self) -> None:
        expected = self.expected()
        extra = {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}
        existing = {**expected, "metadata": {**expected["metadata"], "labels": {"team": "a"},
                                             "resourceVersion": "7"},
                    "rules": [expected["rules"][0], extra]}
        result, outcome = compute_reconciled_role(existing, expected)
        self.assertEqual(outcome.operation, UPDATE)
        self.assertEqual(result["rules"][:2], [expected["rules"][0], extra])
        self.assertEqual(result["rules"][2:], [{"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
                                                "resources": ["selfsubjectreviews"]}])
        self.assertEqual(result["metadata"]["labels"], {"kubernetes.io/bootstrapping": "rbac-defaults", "team": "a"})
        self.assertEqual(result["metadata"]["resourceVersion"], "7")
        again, outcome = compute_reconciled_role(result, expected)
        self.assertEqual(outcome.operation, NONE)

    def test_autoupdate_false_protects(self) -> None:
        expected = self.expected()
        existing = {**expected, "metadata": {**expected["metadata"], "annotations": {ANNOTATION: "false"}},
                    "rules": []}
        result, outcome = compute_reconciled_role(existing, expected)
        self.assertTrue(outcome.protected)
        self.assertEqual(outcome.operation, UPDATE)  # what would be done, not done
        self.assertEqual(result["metadata"]["annotations"], {ANNOTATION: "false"})

    def test_aggregation_selectors_added_and_unexpected_aggregation_removed(self) -> None:
        view = by_name(bootstrap_policy.cluster_roles(), "view")
        existing = {**view, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"mine": "yes"}}]},
                    "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}
        result, outcome = compute_reconciled_role(existing, view)
        self.assertEqual(result["aggregationRule"]["clusterRoleSelectors"],
                         [{"matchLabels": {"mine": "yes"}},
                          {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}])
        self.assertEqual(result["rules"], existing["rules"])  # aggregated rules are the controller's
        basic = self.expected()
        result, outcome = compute_reconciled_role({**basic, "aggregationRule": view["aggregationRule"]}, basic)
        self.assertNotIn("aggregationRule", result)
        self.assertEqual(outcome.operation, UPDATE)


class ReconcileBindingTests(unittest.TestCase):
    def test_subjects_added_and_other_role_ref_recreated(self) -> None:
        expected = by_name(bootstrap_policy.cluster_role_bindings(), "system:public-info-viewer")
        mine = {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "carol"}
        existing = {**expected, "subjects": [mine, expected["subjects"][0]]}
        result, outcome = compute_reconciled_binding(existing, expected)
        self.assertEqual(outcome.operation, UPDATE)
        self.assertEqual(result["subjects"], [mine, *expected["subjects"]])
        moved = {**expected, "roleRef": {**expected["roleRef"], "name": "view"}}
        self.assertEqual(compute_reconciled_binding(moved, expected)[1].operation, RECREATE)


class AggregationTests(unittest.TestCase):
    def test_union_of_selected_roles_in_name_order(self) -> None:
        label = {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
        read_pods = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}
        read_crs = {"verbs": ["get"], "apiGroups": ["example.com"], "resources": ["widgets"]}
        roles = [
            {"metadata": {"name": "z-widgets", "labels": label}, "rules": [read_crs, read_pods]},
            {"metadata": {"name": "a-pods", "labels": label}, "rules": [read_pods]},
            {"metadata": {"name": "unlabelled"}, "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]},
        ]
        view = by_name(bootstrap_policy.cluster_roles(), "view")
        self.assertEqual(aggregated_rules(view, roles + [view]), [read_pods, read_crs])

    def test_go_aggregate_message(self) -> None:
        self.assertEqual(aggregate_message(["a"]), "a")
        self.assertEqual(aggregate_message(["a", "b", "a"]), "[a, b]")
        self.assertEqual(aggregate_message([]), "")
