"""Bootstrap policy reconciliation on every start (upstream's ``rbac/bootstrap-roles`` post-start hook).

For each bootstrap role and binding, as upstream's
``component-helpers/auth/rbac/reconciliation`` does with ``Confirm`` and
without removing extras:

* missing: created;
* a role: the bootstrap labels and annotations are merged in (the stored
  values win), rules it lacks are added (the broken-down missing rules, as
  upstream appends them), aggregation selectors it lacks are added, and an
  aggregation rule the bootstrap role does not have is removed; everything a
  user added stays;
* a binding: labels and annotations merged, missing subjects added; a
  different roleRef (which cannot be updated) means delete and re-create;
* an object annotated ``rbac.authorization.kubernetes.io/autoupdate: "false"``
  is left alone (reported, as upstream logs it).

The writes go straight to the Stores (the server acting as itself, like
upstream's loopback client in ``system:masters``), so no escalation check
applies.  Conflicting writers make an object be reconciled again.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.auth.rbac import bootstrap_policy
from kapiserver.auth.rbac.bootstrap_policy import AUTOUPDATE_ANNOTATION, GROUP
from kapiserver.auth.rbac.policy_rules import covers
from kapiserver.machinery import errors
from kapiserver.registry.options import DeleteOptions

log = Logger()

CREATE, UPDATE, RECREATE, NONE = "create", "update", "recreate", "none"
ATTEMPTS = 3
RETRY_SECONDS = 1.0
DEADLINE_SECONDS = 30.0


@dataclass
class Outcome:
    operation: str = NONE
    protected: bool = False
    missing: list = field(default_factory=list)  # rules or subjects the stored object lacked


def _merged(expected: Optional[dict], existing: Optional[dict]) -> Optional[dict]:
    """Upstream's merge: the stored values win; nil when both are."""
    if expected is None and existing is None:
        return None
    return {**(expected or {}), **(existing or {})}


def _merge_metadata(result: dict, expected: dict, existing: dict) -> bool:
    """Merge the expected labels and annotations into ``result``; whether anything changed."""
    md, exp_md, old_md = result["metadata"], expected["metadata"], existing.get("metadata") or {}
    changed = False
    for key in ("annotations", "labels"):
        merged = _merged(exp_md.get(key), old_md.get(key))
        if merged != old_md.get(key):
            changed = True
        if merged is not None:
            md[key] = merged
    return changed


def _protected(existing: dict) -> bool:
    return ((existing.get("metadata") or {}).get("annotations") or {}).get(AUTOUPDATE_ANNOTATION) == "false"


def _to_change(existing: dict) -> dict:
    """A copy of ``existing`` to reconcile: its top level and metadata, the only levels the
    reconciliation sets (it replaces labels, annotations, rules, subjects and the aggregation
    rule whole).  Every start reconciles the ~125 bootstrap objects, nearly always unchanged:
    a deep copy of each was most of that work."""
    return {**existing, "metadata": dict(existing.get("metadata") or {})}


def compute_reconciled_role(existing: dict, expected: dict) -> tuple[dict, Outcome]:
    """The role to write so ``existing`` has at least ``expected``'s permissions."""
    outcome = Outcome()
    outcome.protected = _protected(existing)
    result = _to_change(existing)
    if _merge_metadata(result, expected, existing):
        outcome.operation = UPDATE
    existing_rules = existing.get("rules") or []
    _, missing = covers(existing_rules, expected.get("rules") or [])
    if missing:
        result["rules"] = list(existing_rules) + missing
        outcome.missing = missing
        outcome.operation = UPDATE
    expected_agg, existing_agg = expected.get("aggregationRule"), existing.get("aggregationRule")
    if expected_agg is None and existing_agg is not None:
        result.pop("aggregationRule", None)
        outcome.operation = UPDATE
    elif expected_agg is not None:
        have = (existing_agg or {}).get("clusterRoleSelectors") or []
        lacking = [s for s in expected_agg.get("clusterRoleSelectors") or [] if s not in have]
        if lacking:
            result["aggregationRule"] = {"clusterRoleSelectors": list(have) + lacking}
            outcome.operation = UPDATE
    return result, outcome


def _subject_key(subject: dict) -> tuple:
    return (subject.get("kind") or "", subject.get("apiGroup") or "", subject.get("name") or "",
            subject.get("namespace") or "")


def compute_reconciled_binding(existing: dict, expected: dict) -> tuple[dict, Outcome]:
    """The binding to write so ``existing`` names at least ``expected``'s subjects (RECREATE: other roleRef)."""
    outcome = Outcome()
    outcome.protected = _protected(existing)
    if (existing.get("roleRef") or {}) != expected["roleRef"]:
        outcome.operation = RECREATE
        return copy.deepcopy(expected), outcome
    result = _to_change(existing)
    if _merge_metadata(result, expected, existing):
        outcome.operation = UPDATE
    have = existing.get("subjects") or []
    keys = {_subject_key(s) for s in have}
    missing = []
    for subject in expected.get("subjects") or []:
        if _subject_key(subject) not in keys:
            keys.add(_subject_key(subject))
            missing.append(subject)
    if missing:
        result["subjects"] = list(have) + missing
        outcome.missing = missing
        outcome.operation = UPDATE
    return result, outcome


async def reconcile(store: Any, expected: dict, compute: Callable[[dict, dict], tuple[dict, Outcome]]) -> Outcome:
    """Create or reconcile one object through its Store (re-run when it changed underneath)."""
    md = expected["metadata"]
    namespace, name = md.get("namespace") or "", md["name"]
    last = ""  # why the last attempt had to look again (for the error)
    for _ in range(ATTEMPTS):
        try:
            existing = await store.get(namespace, name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
            try:
                await store.create(namespace, copy.deepcopy(expected))
            except errors.StatusError as e2:
                if e2.reason == "AlreadyExists":
                    last = "read as absent, created: already exists"
                    continue
                raise
            return Outcome(CREATE)
        result, outcome = compute(existing, expected)
        if outcome.protected or outcome.operation == NONE:
            return outcome
        try:
            if outcome.operation == RECREATE:
                uid = existing["metadata"].get("uid", "")
                try:
                    await store.delete(namespace, name, DeleteOptions(precondition_uid=uid))
                except errors.StatusError as e:
                    if e.code == 409:
                        last = f"recreate: delete of uid {uid}: {e}"
                        continue
                    if e.code != 404:
                        raise
                await store.create(namespace, copy.deepcopy(expected))
            else:
                await store.update(namespace, name, result)
        except errors.StatusError as e:
            if e.code in (404, 409):  # deleted, re-created or changed meanwhile: look again
                last = f"{outcome.operation} of resourceVersion " \
                       f"{existing['metadata'].get('resourceVersion')}: {e}"
                continue
            raise
        return outcome
    raise RuntimeError(f"{name}: exceeded maximum attempts (last: {last})")


def _describe(kind: str, obj: dict) -> str:
    md = obj["metadata"]
    where = f" in {md['namespace']}" if md.get("namespace") else ""
    return f"{kind}.{GROUP}/{md['name']}{where}"


async def ensure_bootstrap_policy(store: Callable[[str, str, str], Any], reactor: IReactorTime) -> None:
    """Create or reconcile every bootstrap object; retried for up to 30 s, then the start fails."""
    work = ([("clusterrole", "clusterroles", r, compute_reconciled_role) for r in bootstrap_policy.cluster_roles()]
            + [("clusterrolebinding", "clusterrolebindings", b, compute_reconciled_binding)
               for b in bootstrap_policy.cluster_role_bindings()]
            + [("role", "roles", r, compute_reconciled_role) for r in bootstrap_policy.namespace_roles()]
            + [("rolebinding", "rolebindings", b, compute_reconciled_binding)
               for b in bootstrap_policy.namespace_role_bindings()])
    deadline = reactor.seconds() + DEADLINE_SECONDS
    while True:
        results = await defer.DeferredList(
            [defer.Deferred.fromCoroutine(reconcile(store(GROUP, "v1", plural), obj, compute))
             for _, plural, obj, compute in work], consumeErrors=True)
        failed = []
        for (kind, plural, obj, compute), (ok, value) in zip(work, results):
            if not ok:
                failed.append((kind, plural, obj, compute))
                log.warn("unable to reconcile {what}: {err}", what=_describe(kind, obj),
                         err=value.value if isinstance(value, Failure) else value)
            elif value.protected and value.operation != NONE:
                log.warn("skipped reconcile-protected {what} with missing {missing}", what=_describe(kind, obj),
                         missing=value.missing)
            elif value.operation != NONE:
                log.debug("{what}: {operation}", operation=value.operation, what=_describe(kind, obj))
        if not failed:
            return
        if reactor.seconds() >= deadline:
            raise RuntimeError(f"unable to initialize roles: {len(failed)} bootstrap RBAC objects could not be "
                               f"reconciled")
        work = failed
        await task.deferLater(reactor, RETRY_SECONDS, lambda: None)
