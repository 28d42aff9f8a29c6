"""The union of authorizers (first allow or deny decides) and the authorization modes built from config."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.auth.authorization_modes import build_authorizer
from kapiserver.auth.authorizer import NO_OPINION, AlwaysAllow, AlwaysDeny, Attributes, Decision, Rules
from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.auth.union import PrivilegedGroups, UnionAuthorizer
from kapiserver.machinery.user import UserInfo
from kapiserver.server.config import config_from_dict

ALICE = UserInfo("alice", ("system:authenticated",))
GET_PODS = Attributes("get", resource="pods", namespace="d", name="p")


class Fixed:
    def __init__(self, decision, rules: Rules = Rules()) -> None:
        self.decision = decision
        self.rules = rules
        self.asked = 0

    def authorize(self, user, attributes):
        self.asked += 1
        return self.decision() if callable(self.decision) else self.decision

    def rules_for(self, user, namespace):
        return self.rules


class UnionTests(unittest.TestCase):
    def test_first_allow_or_deny_decides(self) -> None:
        deny, allow = Fixed(Decision(False, "no", denied=True)), Fixed(Decision(True, "yes"))
        self.assertEqual(UnionAuthorizer([Fixed(NO_OPINION), deny, allow], []).authorize(ALICE, GET_PODS),
                         Decision(False, "no", denied=True))
        self.assertEqual(allow.asked, 0)
        self.assertTrue(UnionAuthorizer([Fixed(NO_OPINION), allow, deny], []).authorize(ALICE, GET_PODS).allowed)

    def test_no_opinion_collects_reasons_and_errors(self) -> None:
        union = UnionAuthorizer([Fixed(Decision(False, "first")), Fixed(Decision(False, error="down")),
                                 Fixed(Decision(False, "second", error="broken"))], [])
        self.assertEqual(union.authorize(ALICE, GET_PODS),
                         Decision(False, "first\nsecond", error="[down, broken]"))

    def test_a_deferred_answer_continues_the_chain(self) -> None:
        later: defer.Deferred = defer.Deferred()
        allow = Fixed(Decision(True))
        outcome = UnionAuthorizer([Fixed(lambda: later), allow], []).authorize(ALICE, GET_PODS)
        self.assertIsInstance(outcome, defer.Deferred)
        self.assertEqual(allow.asked, 0)
        later.callback(NO_OPINION)
        self.assertTrue(self.successResultOf(outcome).allowed)
        self.assertEqual(allow.asked, 1)

    def test_rules_are_concatenated(self) -> None:
        union = UnionAuthorizer([], [Fixed(NO_OPINION, Rules([{"verbs": ["get"]}], [], False, "")),
                                     Fixed(NO_OPINION, Rules([], [{"verbs": ["get"]}], True, "partial"))])
        self.assertEqual(union.rules_for(ALICE, "d"), Rules([{"verbs": ["get"]}], [{"verbs": ["get"]}], True, "partial"))

    def test_modes_from_configuration(self) -> None:
        masters = UserInfo("root", ("system:masters",))
        for modes, alice_allowed in ((["AlwaysDeny"], False), (["AlwaysAllow"], True), (["RBAC"], False),
                                     (["AlwaysDeny", "AlwaysAllow"], True)):
            config = config_from_dict({"authorization": {"modes": modes}})
            authorizer = build_authorizer(config.authorization, PolicyIndex(), reactor=None)
            self.assertIsInstance(authorizer.authorizers[0], PrivilegedGroups)
            self.assertTrue(authorizer.authorize(masters, GET_PODS).allowed, modes)
            self.assertEqual(authorizer.authorize(ALICE, GET_PODS).allowed, alice_allowed, modes)
        deny_all = build_authorizer(config_from_dict({"authorization": {"modes": ["AlwaysDeny"]}}).authorization,
                                    PolicyIndex(), reactor=None)
        self.assertEqual(deny_all.authorize(ALICE, GET_PODS).reason, AlwaysDeny.REASON)
        self.assertEqual(AlwaysAllow().rules_for(ALICE, "d").resource_rules,
                         [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])
