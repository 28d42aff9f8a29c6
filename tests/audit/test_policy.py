"""The audit policy: upstream's rule matching and checks (``audit/policy/checker.go``, ``validation.go``)."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.audit.policy import PolicyError, parse_policy
from kapiserver.auth.authorizer import Attributes
from kapiserver.machinery.user import UserInfo

ALICE = UserInfo("alice", ("dev", "system:authenticated"))
BOB = UserInfo("bob", ("ops", "system:authenticated"))


def policy(rules: str, extra: str = ""):
    return parse_policy(f"apiVersion: audit.k8s.io/v1\nkind: Policy\n{extra}rules:\n{rules}")


def res(verb: str, resource: str, namespace: str = "", name: str = "", subresource: str = "",
        group: str = "") -> Attributes:
    return Attributes(verb=verb, resource_request=True, namespace=namespace, api_group=group, api_version="v1",
                      resource=resource, subresource=subresource, name=name)


def path(verb: str, p: str) -> Attributes:
    return Attributes(verb=verb, resource_request=False, path=p)


class MatchingTests(unittest.TestCase):
    def test_first_matching_rule_wins_and_no_match_is_none(self):
        p = policy("- level: Metadata\n  users: [alice]\n- level: RequestResponse\n")
        self.assertEqual(p.evaluate(ALICE, res("get", "pods")).level, "Metadata")
        self.assertEqual(p.evaluate(BOB, res("get", "pods")).level, "RequestResponse")
        only_alice = policy("- level: Request\n  users: [alice]\n")
        self.assertEqual(only_alice.evaluate(BOB, res("get", "pods")).level, "None")
        self.assertEqual(only_alice.evaluate(None, res("get", "pods")).level, "None")

    def test_user_groups_and_verbs(self):
        p = policy("- level: Request\n  userGroups: [ops]\n  verbs: [delete, deletecollection]\n")
        self.assertEqual(p.evaluate(BOB, res("delete", "pods", "ns", "p")).level, "Request")
        self.assertEqual(p.evaluate(BOB, res("get", "pods", "ns", "p")).level, "None")
        self.assertEqual(p.evaluate(ALICE, res("delete", "pods", "ns", "p")).level, "None")

    def test_resources_subresources_and_names(self):
        p = policy("- level: RequestResponse\n  resources:\n  - group: ''\n    resources: [pods/log]\n"
                   "- level: Request\n  resources:\n  - group: ''\n    resources: ['*/status']\n"
                   "- level: Metadata\n  resources:\n  - group: apps\n    resources: ['deployments/*']\n"
                   "- level: Metadata\n  resources:\n  - group: ''\n    resources: [configmaps]\n"
                   "    resourceNames: [controller-leader]\n")
        self.assertEqual(p.evaluate(ALICE, res("get", "pods", "ns", "p", "log")).level, "RequestResponse")
        self.assertEqual(p.evaluate(ALICE, res("get", "pods", "ns", "p")).level, "None")  # pods/log is not pods
        self.assertEqual(p.evaluate(ALICE, res("update", "nodes", "", "n", "status")).level, "Request")
        self.assertEqual(p.evaluate(ALICE, res("update", "deployments", "ns", "d", "scale", "apps")).level,
                         "Metadata")
        self.assertEqual(p.evaluate(ALICE, res("get", "deployments", "ns", "d", group="apps")).level, "Metadata")
        self.assertEqual(p.evaluate(ALICE, res("get", "deployments", "ns", "d")).level, "None")  # core group
        self.assertEqual(p.evaluate(ALICE, res("update", "configmaps", "ns", "controller-leader")).level,
                         "Metadata")
        self.assertEqual(p.evaluate(ALICE, res("update", "configmaps", "ns", "other")).level, "None")

    def test_a_group_without_resources_matches_all_of_it(self):
        p = policy("- level: Metadata\n  resources:\n  - group: rbac.authorization.k8s.io\n")
        self.assertEqual(p.evaluate(ALICE, res("get", "roles", "ns", group="rbac.authorization.k8s.io")).level,
                         "Metadata")
        self.assertEqual(p.evaluate(ALICE, res("get", "pods", "ns")).level, "None")

    def test_namespaces_only_match_resource_requests(self):
        p = policy("- level: Request\n  namespaces: [kube-system]\n")
        self.assertEqual(p.evaluate(ALICE, res("get", "pods", "kube-system")).level, "Request")
        self.assertEqual(p.evaluate(ALICE, res("get", "pods", "default")).level, "None")
        self.assertEqual(p.evaluate(ALICE, path("get", "/healthz")).level, "None")
        cluster_scoped = policy("- level: Request\n  namespaces: ['']\n")
        self.assertEqual(cluster_scoped.evaluate(ALICE, res("get", "nodes")).level, "Request")

    def test_non_resource_urls_with_a_star_suffix(self):
        p = policy("- level: None\n  nonResourceURLs: ['/healthz*', /version]\n- level: Metadata\n")
        self.assertEqual(p.evaluate(ALICE, path("get", "/healthz")).level, "None")
        self.assertEqual(p.evaluate(ALICE, path("get", "/healthz/etcd")).level, "None")
        self.assertEqual(p.evaluate(ALICE, path("get", "/version")).level, "None")
        self.assertEqual(p.evaluate(ALICE, path("get", "/versions")).level, "Metadata")
        self.assertEqual(p.evaluate(ALICE, res("get", "healthz")).level, "Metadata")

    def test_omitted_stages_add_up_and_managed_fields_override(self):
        p = policy("- level: Request\n  omitStages: [ResponseStarted]\n  omitManagedFields: false\n"
                   "- level: Metadata\n", extra="omitStages: [RequestReceived]\nomitManagedFields: true\n")
        first = p.evaluate(ALICE, res("get", "pods"))
        self.assertEqual(first.omit_stages, {"RequestReceived", "ResponseStarted"})
        self.assertFalse(first.omit_managed_fields)
        self.assertTrue(p.evaluate(ALICE, res("get", "pods")).level == "Request")
        none = policy("- level: Request\n  users: [nobody]\n", extra="omitStages: [Panic]\n")
        self.assertEqual(none.evaluate(ALICE, res("get", "pods")).omit_stages, {"Panic"})


class ValidationTests(unittest.TestCase):
    def test_upstream_checks(self):
        cases = {
            "- level: Everything\n": 'rules[0].level: Unsupported value: "Everything"',
            "- users: [a]\n": "rules[0].level: Required value",
            "- level: None\n  nonResourceURLs: [healthz]\n": "non-resource URL rules must begin with a '/'",
            "- level: None\n  nonResourceURLs: ['/a*/b']\n": "wildcards '*' must be the final character",
            "- level: None\n  nonResourceURLs: [/a]\n  namespaces: [x]\n":
                "rules cannot apply to both regular resources and non-resource URLs",
            "- level: None\n  omitStages: [Done]\n": 'rules[0].omitStages[0]: Invalid value: "Done": allowed stages',
            "- level: None\n  resources: [{group: '', resourceNames: [x]}]\n":
                "using resourceNames requires at least one resource",
        }
        for rules, message in cases.items():
            with self.assertRaises(PolicyError, msg=rules) as caught:
                policy(rules)
            self.assertIn(message, str(caught.exception))
        with self.assertRaisesRegex(PolicyError, "0 rules"):
            parse_policy("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n")
        with self.assertRaisesRegex(PolicyError, "unknown group version"):
            parse_policy("apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules: [{level: None}]\n")

    def test_json_policies_load_too(self):
        p = parse_policy('{"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}')
        self.assertEqual(p.evaluate(ALICE, res("get", "pods")).level, "Metadata")
