"""Ownership bookkeeping of updates and applies (structured-merge-diff's merge.Updater).

``managers`` maps a manager key (opaque here, hashable) to the
:class:`~.fieldpath.VersionedSet` it owns.  An update gives its manager the
fields it changed and takes them away from everyone else; an apply merges
the configuration, makes the applier own exactly what it applied, removes
what it applied last time and no longer does (unless someone else owns it),
and fails with :class:`Conflicts` when it would change a field another
manager owns, unless forced.

Every API version of a kind is taken to have the same field paths, which
holds for the kinds served here (CRD versions are relabelled, not
restructured), so managers of other versions are compared on the same
objects instead of converted ones.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Optional

from kapiserver.machinery.managedfields.fieldpath import Path, Set, VersionedSet
from kapiserver.machinery.managedfields.schema import TypeRef
from kapiserver.machinery.managedfields.typed import (Comparison, compare, ensure_named_fields_are_members, merge,
                                                      reconcile_with_schema, remove_items, to_field_set)

Managers = dict[Hashable, VersionedSet]
_RECONCILE_CACHE_SIZE = 4096
SetFilter = Callable[[Set], Set]


class Conflicts(Exception):
    """Fields an apply would change that other managers own: (manager key, path) pairs."""

    def __init__(self, conflicts: list[tuple[Hashable, Path]]) -> None:
        super().__init__(conflicts)
        self.conflicts = conflicts

    @classmethod
    def from_managers(cls, sets: dict[Hashable, Set], order: Callable[[Hashable], Any]) -> "Conflicts":
        return cls([(manager, path) for manager in sorted(sets, key=order) for path in sets[manager].paths()])


class Updater:
    def __init__(self, root: TypeRef, ignore: Optional[SetFilter] = None,
                 manager_order: Callable[[Hashable], Any] = str) -> None:
        self.root = root
        # fields the operation's strategy resets (status on the main resource...): never owned
        self.ignore = ignore
        self.manager_order = manager_order
        self._reconcile_cache: dict[int, tuple[Set, Optional[Set]]] = {}

    def _filter(self, s: Set) -> Set:
        return self.ignore(s) if self.ignore is not None else s

    def _reconcile(self, managers: Managers) -> Managers:
        out = {}
        for manager, vs in managers.items():
            reconciled = self._reconciled(vs.set)
            out[manager] = vs if reconciled is None else vs.with_set(reconciled)
        return out

    def _reconciled(self, s: Set) -> Optional[Set]:
        """reconcile_with_schema, remembered for the (shared, parsed-once) sets of stored entries."""
        cached = self._reconcile_cache.get(id(s))
        if cached is not None and cached[0] is s:
            return cached[1]
        result = reconcile_with_schema(s, self.root)
        if len(self._reconcile_cache) >= _RECONCILE_CACHE_SIZE:
            self._reconcile_cache.pop(next(iter(self._reconcile_cache)), None)
        self._reconcile_cache[id(s)] = (s, result)
        return result

    def _update(self, old: Any, new: Any, managers: Managers, workflow: Hashable, force: bool
                ) -> tuple[Managers, Comparison]:
        comparison = compare(old, new, self.root).filtered(self.ignore)
        changed = comparison.modified.union(comparison.added)
        conflicts: dict[Hashable, Set] = {}
        out = dict(managers)
        for manager, vs in managers.items():
            if manager == workflow:
                continue
            conflict = vs.set.intersection(changed)
            if not conflict.empty():
                conflicts[manager] = conflict
        if conflicts and not force:
            raise Conflicts.from_managers(conflicts, self.manager_order)
        for manager, conflict in conflicts.items():
            out[manager] = out[manager].with_set(out[manager].set.difference(conflict))
        if not comparison.removed.empty():
            for manager in managers:
                if manager != workflow:
                    out[manager] = out[manager].with_set(out[manager].set.difference(comparison.removed))
        return {m: vs for m, vs in out.items() if not vs.set.empty()}, comparison

    def update(self, live: Any, new: Any, version: str, managers: Managers, manager: Hashable) -> Managers:
        """The managers after a non-apply write of ``new`` over ``live`` by ``manager``."""
        managers = self._reconcile(managers)
        managers, comparison = self._update(live, new, managers, manager, True)
        previous = managers.get(manager)
        fields = previous.set if previous is not None else Set()
        fields = (fields.difference(comparison.removed).union(comparison.modified).union(comparison.added))
        fields = self._filter(fields)
        managers = dict(managers)
        if fields.empty():
            managers.pop(manager, None)
        else:
            managers[manager] = VersionedSet(fields, version, False)
        return managers

    def apply(self, live: Any, config: Any, version: str, managers: Managers, manager: Hashable, force: bool
              ) -> tuple[Optional[Any], Managers]:
        """(the merged object, or None when it equals ``live``; the managers after the apply)."""
        managers = self._reconcile(managers)
        new = merge(live, config, self.root)
        last = managers.get(manager)
        applied = self._filter(to_field_set(config, self.root))
        managers = dict(managers)
        managers[manager] = VersionedSet(applied, version, True)
        new = self._prune(new, managers, manager, last)
        managers, _ = self._update(live, new, managers, manager, force)
        if new == live:
            return None, managers
        return new, managers

    # ------------------------------------------------------------ pruning

    def _ensure(self, s: Set) -> Set:
        return ensure_named_fields_are_members(s, self.root)

    def _prune(self, merged: Any, managers: Managers, applier: Hashable, last: Optional[VersionedSet]) -> Any:
        """Remove what ``applier`` applied last time and not now, unless another manager owns it."""
        if last is None or last.set.empty():
            return merged
        pruned = remove_items(merged, self._ensure(last.set), self.root)
        owned = Set()
        for vs in managers.values():
            owned = owned.union(vs.set)
        pruned = self._add_back(merged, pruned, owned)
        return self._add_back_dangling(merged, pruned, last.set)

    def _add_back(self, merged: Any, pruned: Any, owned: Set) -> Any:
        """What pruning removed that some manager (the applier's new configuration included) still owns."""
        merged_set = self._ensure(to_field_set(merged, self.root))
        pruned_set = self._ensure(to_field_set(pruned, self.root))
        keep = pruned_set.union(self._ensure(owned))
        return remove_items(merged, merged_set.difference(keep), self.root)

    def _add_back_dangling(self, merged: Any, pruned: Any, last: Set) -> Any:
        """Only what the applier owned may go: unowned items, and items only updaters touched, stay."""
        pruned_set = self._ensure(to_field_set(pruned, self.root))
        merged_set = self._ensure(to_field_set(merged, self.root))
        gone = merged_set.difference(pruned_set).intersection(self._ensure(last))
        return remove_items(merged, gone, self.root)
