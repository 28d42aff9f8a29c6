"""Keeps a PolicyIndex current: one informer per RBAC kind, over the kinds' Stores.

The authorizer then answers from memory; no request reads storage to be
authorized.  ``synced`` fires once all four kinds have been listed.  After an
informer re-lists (its watch expired), objects deleted meanwhile are dropped
from the index as well.
"""
from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime

from kapiserver.auth.rbac.policy_index import PolicyIndex
from kapiserver.registry.informer import Informer, keys_only

GROUP = "rbac.authorization.k8s.io"


class PolicyInformers:
    def __init__(self, index: PolicyIndex, store: Callable[[str, str, str], Any], reactor: IReactorTime) -> None:
        self.index = index
        kinds = (
            ("roles", index.set_role, lambda key: index.delete_role(*key), index.roles),
            ("clusterroles", index.set_cluster_role, lambda key: index.delete_cluster_role(key[1]),
             index.cluster_roles),
            ("rolebindings", index.set_role_binding, lambda key: index.delete_role_binding(*key),
             index.role_bindings),
            ("clusterrolebindings", index.set_cluster_role_binding,
             lambda key: index.delete_cluster_role_binding(key[1]), index.cluster_role_bindings),
        )
        self.informers: list[Informer] = []
        for plural, put, drop, indexed in kinds:
            informer = Informer(store(GROUP, "v1", plural), self._handler(put, drop), reactor, keep=keys_only)
            informer.after_list = self._sweeper(informer, drop, indexed)
            self.informers.append(informer)
        self.synced: defer.Deferred = defer.gatherResults([i.synced for i in self.informers])

    @staticmethod
    def _handler(put: Callable[[dict], None], drop: Callable[[tuple[str, str]], None]):
        def on_event(event_type: str, obj: dict) -> None:
            if event_type == "DELETED":
                md = obj.get("metadata") or {}
                drop((md.get("namespace") or "", md.get("name") or ""))
            else:
                put(obj)
        return on_event

    @staticmethod
    def _sweeper(informer: Informer, drop: Callable[[tuple[str, str]], None], indexed: dict):
        def sweep() -> None:
            for key in list(indexed):
                full = key if isinstance(key, tuple) else ("", key)
                if full not in informer.objects:
                    drop(full)
        return sweep

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()
