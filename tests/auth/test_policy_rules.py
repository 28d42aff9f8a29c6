"""PolicyRule matching, covering and upstream's wording of rules (kapiserver.auth.rbac.policy_rules)."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.auth.authorizer import Attributes
from kapiserver.auth.rbac.policy_rules import (CompiledRule, compact_rules, compact_string, covers, go_quote_list,
                                               rule)


def res(verb: str, resource: str, group: str = "", subresource: str = "", name: str = "", ns: str = "d") -> Attributes:
    return Attributes(verb=verb, api_group=group, resource=resource, subresource=subresource, name=name, namespace=ns)


def url(verb: str, path: str) -> Attributes:
    return Attributes(verb=verb, resource_request=False, path=path)


class RuleAllowsTests(unittest.TestCase):
    def allows(self, r: dict, a: Attributes) -> bool:
        return CompiledRule(r).allows(a)

    def test_verbs_groups_resources_and_wildcards(self) -> None:
        r = rule(["get", "list"], [""], ["pods"])
        self.assertTrue(self.allows(r, res("get", "pods")))
        self.assertFalse(self.allows(r, res("delete", "pods")))
        self.assertFalse(self.allows(r, res("get", "pods", group="apps")))
        self.assertFalse(self.allows(r, res("get", "secrets")))
        self.assertTrue(self.allows(rule(["*"], ["*"], ["*"]), res("escalate", "roles", "rbac.authorization.k8s.io")))

    def test_subresources_are_separate_unless_star_slash(self) -> None:
        self.assertFalse(self.allows(rule(["get"], [""], ["pods"]), res("get", "pods", subresource="log")))
        self.assertTrue(self.allows(rule(["get"], [""], ["pods/log"]), res("get", "pods", subresource="log")))
        scale = rule(["update"], ["*"], ["*/scale"])
        self.assertTrue(self.allows(scale, res("update", "deployments", "apps", subresource="scale")))
        self.assertFalse(self.allows(scale, res("update", "deployments", "apps")))
        self.assertFalse(self.allows(scale, res("update", "deployments", "apps", subresource="status")))

    def test_resource_names(self) -> None:
        r = rule(["get", "update"], [""], ["configmaps"], names=["app"])
        self.assertTrue(self.allows(r, res("get", "configmaps", name="app")))
        self.assertFalse(self.allows(r, res("get", "configmaps", name="other")))
        self.assertFalse(self.allows(r, res("list", "configmaps")))  # a list names nothing

    def test_non_resource_urls(self) -> None:
        r = rule(["get"], urls=["/healthz", "/apis/*"])
        self.assertTrue(self.allows(r, url("get", "/healthz")))
        self.assertFalse(self.allows(r, url("get", "/healthz/etcd")))
        self.assertTrue(self.allows(r, url("get", "/apis/apps/v1")))
        self.assertTrue(self.allows(r, url("get", "/apis/")))
        self.assertFalse(self.allows(r, url("get", "/apis")))
        self.assertFalse(self.allows(r, url("post", "/healthz")))
        # a URL rule says nothing about resources, nor a resource rule about URLs
        self.assertFalse(self.allows(r, res("get", "pods")))
        self.assertFalse(self.allows(rule(["*"], ["*"], ["*"]), url("get", "/metrics")))


class CoversTests(unittest.TestCase):
    def test_owner_covers_servant_piece_by_piece(self) -> None:
        owner = [rule(["get", "list"], [""], ["pods", "secrets"]), rule(["get"], urls=["/api/*"])]
        self.assertEqual(covers(owner, [rule(["get"], [""], ["pods"])]), (True, []))
        ok, missing = covers(owner, [rule(["get", "delete"], [""], ["secrets"]), rule(["get"], urls=["/api/v1"])])
        self.assertFalse(ok)
        self.assertEqual(missing, [{"verbs": ["delete"], "apiGroups": [""], "resources": ["secrets"]}])

    def test_star_subresource_and_names(self) -> None:
        self.assertTrue(covers([rule(["get"], ["apps"], ["*/scale"])], [rule(["get"], ["apps"], ["deployments/scale"])])[0])
        named = [rule(["get"], [""], ["configmaps"], names=["a"])]
        self.assertTrue(covers(named, [rule(["get"], [""], ["configmaps"], names=["a"])])[0])
        self.assertFalse(covers(named, [rule(["get"], [""], ["configmaps"])])[0])

    def test_a_rule_covers_itself_as_its_pieces_do(self) -> None:
        """Rules found among the owner's are not broken down; the answer is the one the pieces give."""
        from kapiserver.auth.rbac import bootstrap_policy
        from kapiserver.auth.rbac.policy_rules import _rule_covers, breakdown
        roles = bootstrap_policy.cluster_roles() + bootstrap_policy.controller_roles()
        rules = [r for role in roles for r in role.get("rules") or []]
        # names and URLs both: upstream's ruleCovers leaves the URL pieces (which name nothing) uncovered
        odd = {"verbs": ["get"], "nonResourceURLs": ["/x"], "resourceNames": ["a"]}
        for r in rules + [odd, {"verbs": ["get"], "apiGroups": "junk", "resources": ["pods", 7]}]:
            by_pieces = [sub for sub in breakdown(r) if not _rule_covers(r, sub)]
            self.assertEqual(covers([r], [r]), (not by_pieces, by_pieces), r)
        self.assertEqual(covers([odd], [odd]), (False, [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]))

    def test_escalation_message_parts(self) -> None:
        _, missing = covers([], [rule(["get", "delete"], [""], ["secrets"]), rule(["*"], urls=["*"])])
        lines = sorted(compact_string(r) for r in compact_rules(missing))
        self.assertEqual(lines, ['{APIGroups:[""], Resources:["secrets"], Verbs:["delete" "get"]}',
                                 '{NonResourceURLs:["*"], Verbs:["*"]}'])
        self.assertEqual(go_quote_list(["system:authenticated", 'a"b']), '["system:authenticated" "a\\"b"]')
