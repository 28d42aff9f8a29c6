"""Authorizers in a row (upstream's union authorizer) and the privileged-group authorizer.

The first authorizer that allows or denies decides; one with no opinion hands
the request to the next.  When none decides the answer is "no opinion"
carrying every reason given (joined by newlines) and every evaluation error,
which the authorization filter turns into a 403 (or a 500 when an authorizer
failed to evaluate).  ``rules_for`` (SelfSubjectRulesReview) is the
concatenation of every rule resolver's answer.

Most authorizers answer at once, so the chain runs synchronously until one
returns a Deferred (a webhook call), and continues when it fires.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

from twisted.internet import defer

from kapiserver.auth.authorizer import ALLOW, NO_OPINION, Attributes, Authorizer, Closeable, Decision, Rules
from kapiserver.machinery.user import UserInfo

Outcome = Union[Decision, "defer.Deferred[Decision]"]


def aggregate_message(messages: Sequence[str]) -> str:
    """Go's ``utilerrors.NewAggregate(errs).Error()``: one message as is, several as ``[a, b]``."""
    messages = [m for m in messages if m]
    if len(messages) <= 1:
        return messages[0] if messages else ""
    unique: list[str] = []
    for message in messages:
        if message not in unique:
            unique.append(message)
    return f"[{', '.join(unique)}]"


class PrivilegedGroups:
    """Allows members of the given groups everything (``system:masters``), else no opinion.

    kube-apiserver always puts this first, whatever the authorization modes:
    the group is how the server's own loopback clients and the cluster's
    administrators are recognised.
    """

    def __init__(self, *groups: str) -> None:
        self.groups = frozenset(groups)

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Decision:
        if user is not None and not self.groups.isdisjoint(user.groups):
            return ALLOW
        return NO_OPINION

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        return Rules()


class UnionAuthorizer:
    def __init__(self, authorizers: Sequence[Authorizer], rule_resolvers: Sequence[Authorizer]) -> None:
        self.authorizers = tuple(authorizers)
        self.rule_resolvers = tuple(rule_resolvers)

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Outcome:
        return self._from(0, user, attributes, [], [])

    def _from(self, index: int, user: Optional[UserInfo], attributes: Attributes, reasons: list[str],
              failures: list[str]) -> Outcome:
        for position in range(index, len(self.authorizers)):
            decision = self.authorizers[position].authorize(user, attributes)
            if isinstance(decision, defer.Deferred):
                return decision.addCallback(self._after, position, user, attributes, reasons, failures)
            if decision.reason:
                reasons.append(decision.reason)
            if decision.error:
                failures.append(decision.error)
            if not decision.no_opinion:
                return decision
        if not reasons and not failures:
            return NO_OPINION
        return Decision(False, "\n".join(reasons), error=aggregate_message(failures))

    def _after(self, decision: Decision, position: int, user: Optional[UserInfo], attributes: Attributes,
               reasons: list[str], failures: list[str]) -> Outcome:
        if decision.reason:
            reasons.append(decision.reason)
        if decision.error:
            failures.append(decision.error)
        if not decision.no_opinion:
            return decision
        return self._from(position + 1, user, attributes, reasons, failures)

    async def close(self) -> None:
        """Release what the authorizers hold (a webhook's connections)."""
        for authorizer in self.authorizers:
            if isinstance(authorizer, Closeable):
                await authorizer.close()

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        resource_rules: list[dict] = []
        non_resource_rules: list[dict] = []
        incomplete = False
        failures: list[str] = []
        for resolver in self.rule_resolvers:
            rules = resolver.rules_for(user, namespace)
            resource_rules.extend(rules.resource_rules)
            non_resource_rules.extend(rules.non_resource_rules)
            incomplete = incomplete or rules.incomplete
            if rules.evaluation_error:
                failures.append(rules.evaluation_error)
        return Rules(resource_rules, non_resource_rules, incomplete, aggregate_message(failures))
