"""Naming and establishing: which names of a CRD are accepted, and when it is Established.

Upstream's naming controller: a name is in use when another CRD of the same
group has accepted it (or, here, a built-in resource of that group serves
it).  Each requested name that conflicts keeps its previously accepted
value; the NamesAccepted condition says why.  A CRD whose names are accepted
is Established (upstream's establishing controller), and stays so; with
several API servers the caller holds Established back for a few seconds
(``establish=False``), so that every server serves the CRD (they do once its
names are accepted) before clients are told it is ready.
"""
from __future__ import annotations

from typing import Iterable, Optional

from kapiserver.apiextensions.conditions import ESTABLISHED, NAMES_ACCEPTED, is_true, set_condition
from kapiserver.registry.resource_type import ResourceType


def _used_names(crd: dict, others: Iterable[dict], builtins: Iterable[ResourceType]) -> tuple[set, set]:
    group = crd["spec"]["group"]
    names: set[str] = set()
    kinds: set[str] = set()
    for other in others:
        if other["metadata"]["name"] == crd["metadata"]["name"] or (other.get("spec") or {}).get("group") != group:
            continue
        accepted = (other.get("status") or {}).get("acceptedNames") or {}
        names.update(n for n in [accepted.get("plural"), accepted.get("singular"), *(accepted.get("shortNames") or ())]
                     if n)
        kinds.update(k for k in (accepted.get("kind"), accepted.get("listKind")) if k)
    for rtype in builtins:
        if rtype.group == group:
            names.update([rtype.plural, rtype.singular, *rtype.short_names])
            kinds.update([rtype.kind, rtype.list_kind])
    return names, kinds


def accepted_names(crd: dict, others: Iterable[dict], builtins: Iterable[ResourceType]) -> tuple[dict, Optional[tuple[str, str]]]:
    """The names to accept and the first conflict as (reason, message), None when there is none."""
    requested = crd["spec"]["names"]
    current = (crd.get("status") or {}).get("acceptedNames") or {}
    used, used_kinds = _used_names(crd, others, builtins)
    out = dict(current)
    conflict: Optional[tuple[str, str]] = None

    def take(field: str, value, pool: set, reason: str) -> None:
        nonlocal conflict
        if value is None or value == current.get(field):
            if value is not None:
                out[field] = value
            return
        clash = [v for v in (value if isinstance(value, list) else [value]) if v in pool]
        if clash:
            if conflict is None:
                conflict = (reason, f'"{clash[0]}" is already in use')
            return
        out[field] = value

    take("plural", requested.get("plural"), used, "PluralConflict")
    take("singular", requested.get("singular"), used, "SingularConflict")
    take("shortNames", requested.get("shortNames"), used, "ShortNamesConflict")
    take("kind", requested.get("kind"), used_kinds, "KindConflict")
    take("listKind", requested.get("listKind"), used_kinds, "ListKindConflict")
    if requested.get("categories") is not None or "categories" in out:
        if requested.get("categories"):
            out["categories"] = requested["categories"]
        else:
            out.pop("categories", None)
    return out, conflict


def apply_naming(crd: dict, others: Iterable[dict], builtins: Iterable[ResourceType], establish: bool = True) -> None:
    """Set status.acceptedNames, NamesAccepted and Established on ``crd`` (in place)."""
    names, conflict = accepted_names(crd, others, builtins)
    status = crd.setdefault("status", {})
    status["acceptedNames"] = names
    if conflict is None:
        set_condition(crd, NAMES_ACCEPTED, "True", "NoConflicts", "no conflicts found")
    else:
        set_condition(crd, NAMES_ACCEPTED, "False", *conflict)
    if is_true(crd, ESTABLISHED):
        return
    if conflict is None:
        if establish:
            set_condition(crd, ESTABLISHED, "True", "InitialNamesAccepted", "the initial names have been accepted")
    else:
        set_condition(crd, ESTABLISHED, "False", "NotAccepted", "not all names are accepted")
