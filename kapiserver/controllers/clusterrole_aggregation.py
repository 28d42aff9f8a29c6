"""ClusterRole aggregation (upstream's clusterrole-aggregation-controller).

A ClusterRole with an ``aggregationRule`` gets as its rules the union of the
rules of every other ClusterRole its selectors pick (in name order, each rule
once).  ``admin``, ``edit`` and ``view`` are built this way from the
``rbac.authorization.k8s.io/aggregate-to-*`` labels, so labelling a
ClusterRole ``aggregate-to-view: "true"`` extends view, edit and admin.

Any ClusterRole change re-queues every aggregated ClusterRole, as upstream
does: the set of ClusterRoles is small and the selectors may chain.
"""
from __future__ import annotations

from typing import Any, Callable

import orjson
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.controllers.informer_controller import InformerController
from kapiserver.machinery import errors
from kapiserver.machinery.codec import exact_size
from kapiserver.machinery.labels import selector_from_label_selector_dict
from kapiserver.registry.store import Store

log = Logger()


def _rules(role: dict) -> list:
    return role.get("rules") or []


def aggregated_rules(role: dict, cluster_roles: list[dict], rules_of: Callable[[dict], list] = _rules) -> list[dict]:
    """The rules ``role``'s aggregationRule gathers from ``cluster_roles`` (``rules_of`` reads a
    ClusterRole's rules: only those of the roles a selector picks are read)."""
    rules: list[dict] = []
    name = (role.get("metadata") or {}).get("name")
    ordered = sorted(cluster_roles, key=lambda r: (r.get("metadata") or {}).get("name") or "")
    for selector in ((role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []):
        try:
            matches = selector_from_label_selector_dict(selector)
        except Exception:  # an invalid selector gathers nothing (validation rejects them anyway)
            continue
        for other in ordered:
            md = other.get("metadata") or {}
            if md.get("name") == name or not matches.matches(md.get("labels") or {}):
                continue
            for rule in rules_of(other):
                if rule not in rules:
                    rules.append(rule)
    return rules


def aggregation_fields(role: dict) -> dict:
    """What aggregation reads of a ClusterRole (its name, labels, aggregationRule and rules): the
    controller's informer keeps only these, not the metadata's managedFields and annotations, and
    the rules as their JSON (read by :func:`written_rules`: most roles' rules are never read, and
    the policy index holds them all already, compiled)."""
    md = role.get("metadata") or {}
    kept: dict = {"metadata": {"name": md.get("name"), "labels": md.get("labels")},
                  "rules": exact_size(orjson.dumps(role.get("rules")))}
    if role.get("aggregationRule") is not None:
        kept["aggregationRule"] = role["aggregationRule"]
    return kept


def written_rules(kept: dict) -> list:
    """The rules of a ClusterRole as :func:`aggregation_fields` keeps them."""
    return orjson.loads(kept["rules"]) or []


class ClusterRoleAggregationController(InformerController):
    queue_name = "clusterrole-aggregation"

    def __init__(self, store: Store, reactor: IReactorTime) -> None:
        super().__init__(store, reactor, keep=aggregation_fields)

    def on_event(self, event_type: str, obj: dict) -> None:
        for (_, name), role in self.informer.objects.items():
            if role.get("aggregationRule") is not None:
                self.queue.add(name)

    async def reconcile(self, name: Any) -> None:
        role = self.informer.objects.get(("", name))
        if role is None or role.get("aggregationRule") is None:
            return
        rules = aggregated_rules(role, list(self.informer.objects.values()), written_rules)
        if rules == written_rules(role):
            return

        def set_rules(current: Any) -> dict:
            if current is None or current.get("aggregationRule") is None:
                raise errors.not_found("clusterroles", "rbac.authorization.k8s.io", name)
            current["rules"] = rules
            return current
        try:
            await self.store.guaranteed_update("", name, set_rules)
        except errors.StatusError as e:
            if e.code != 404:  # deleted or no longer aggregated meanwhile: nothing to do
                raise
