"""PolicyRules: does a rule allow a request, do some rules cover others, and how upstream prints them.

Matching follows upstream's ``pkg/apis/rbac/v1`` helpers: ``*`` matches every
verb, group, resource or URL; ``*/<sub>`` matches that subresource of every
resource; a rule without resourceNames matches every name; a URL ending in
``*`` matches every path it prefixes.  Rules are compiled once (sets instead
of lists) when a role is indexed, so a check costs a few set lookups.

:func:`covers` is upstream's ``validation.Covers`` (escalation checks and
bootstrap reconciliation): every rule is broken down into one verb, group,
resource and name each, and each piece must be covered by one owner rule.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable, Optional

import orjson

from kapiserver.auth.authorizer import Attributes
from kapiserver.machinery.codec import exact_size

ALL = "*"


def _strings(rule: dict, key: str) -> list[str]:
    values = rule.get(key) or []
    return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []


@functools.lru_cache(maxsize=2048)
def _shared(values: tuple[str, ...]) -> frozenset[str]:
    """One frozenset per distinct list of values: the same verbs, groups and resources recur in
    most rules (the bootstrap roles' 423 rules make 2,115 sets of 166 distinct ones, each set
    about 200 bytes), so compiled rules share them."""
    return frozenset(values)


class CompiledRule:
    """One PolicyRule as sets, with the original rule kept (as its JSON: a tenth of the decoded
    rule's memory, and every role's rules are held all the time) for rules reviews and messages."""

    __slots__ = ("written", "verbs", "any_verb", "groups", "any_group", "resources", "any_resource",
                 "any_subresource_of", "names", "urls", "any_url", "url_prefixes")

    def __init__(self, raw: dict) -> None:
        self.written = exact_size(orjson.dumps(raw))  # (orjson's own buffer holds 4 KB or more)
        self.verbs = _shared(tuple(_strings(raw, "verbs")))
        self.any_verb = ALL in self.verbs
        self.groups = _shared(tuple(_strings(raw, "apiGroups")))
        self.any_group = ALL in self.groups
        resources = _strings(raw, "resources")
        self.resources = _shared(tuple(resources))
        self.any_resource = ALL in self.resources
        self.any_subresource_of = _shared(tuple(r[2:] for r in resources if r.startswith("*/")))
        names = _strings(raw, "resourceNames")
        self.names: Optional[frozenset[str]] = frozenset(names) if names else None  # mostly one rule's own
        urls = _strings(raw, "nonResourceURLs")
        self.urls = _shared(tuple(urls))
        self.any_url = ALL in self.urls
        self.url_prefixes = tuple(u.rstrip("*") for u in urls if u.endswith("*"))

    @property
    def raw(self) -> dict:
        """The rule as it was written (a new dict each time)."""
        return orjson.loads(self.written)

    def allows(self, a: Attributes) -> bool:
        """Upstream's RuleAllows."""
        if not self.any_verb and a.verb not in self.verbs:
            return False
        if a.resource_request:
            if not self.any_group and a.api_group not in self.groups:
                return False
            if not self.any_resource:
                if a.subresource:
                    if (f"{a.resource}/{a.subresource}" not in self.resources
                            and a.subresource not in self.any_subresource_of):
                        return False
                elif a.resource not in self.resources:
                    return False
            return self.names is None or a.name in self.names
        path = a.path
        if self.any_url or path in self.urls:
            return True
        return any(path.startswith(prefix) for prefix in self.url_prefixes)


def compile_rules(rules: Any) -> tuple[CompiledRule, ...]:
    if not isinstance(rules, list):
        return ()
    return tuple(CompiledRule(r) for r in rules if isinstance(r, dict))


def rule(verbs: Iterable[str], groups: Iterable[str] = (), resources: Iterable[str] = (),
         names: Iterable[str] = (), urls: Iterable[str] = ()) -> dict:
    """A PolicyRule dict with its lists sorted and its keys in the wire order (upstream's rule builder)."""
    out: dict = {"verbs": sorted(verbs)}
    if groups or resources:
        out["apiGroups"] = sorted(groups)
        out["resources"] = sorted(resources)
    if names:
        out["resourceNames"] = sorted(names)
    if urls:
        out["nonResourceURLs"] = sorted(urls)
    return out


# ------------------------------------------------------------------ covering


def breakdown(r: dict) -> list[dict]:
    """Upstream's BreakdownRule: rules with at most one verb, group, resource and name each."""
    out: list[dict] = []
    verbs = _strings(r, "verbs")
    names = _strings(r, "resourceNames")
    for group in _strings(r, "apiGroups"):
        for resource in _strings(r, "resources"):
            for verb in verbs:
                if names:
                    out.extend({"verbs": [verb], "apiGroups": [group], "resources": [resource],
                                "resourceNames": [name]} for name in names)
                else:
                    out.append({"verbs": [verb], "apiGroups": [group], "resources": [resource]})
    for url in _strings(r, "nonResourceURLs"):
        out.extend({"verbs": [verb], "nonResourceURLs": [url]} for verb in verbs)
    return out


def _resources_cover(owner: set[str], wanted: list[str]) -> bool:
    if ALL in owner or owner.issuperset(wanted):
        return True
    for path in wanted:
        if path in owner:
            continue
        if "/" not in path or "*/" + path.split("/", 1)[1] not in owner:
            return False
    return True


def _url_covers(owner: str, path: str) -> bool:
    return owner == path or (owner.endswith("*") and path.startswith(owner.rstrip("*")))


def _rule_covers(owner: dict, sub: dict) -> bool:
    owner_verbs, owner_groups = set(_strings(owner, "verbs")), set(_strings(owner, "apiGroups"))
    if not (ALL in owner_verbs or owner_verbs.issuperset(_strings(sub, "verbs"))):
        return False
    if not (ALL in owner_groups or owner_groups.issuperset(_strings(sub, "apiGroups"))):
        return False
    if not _resources_cover(set(_strings(owner, "resources")), _strings(sub, "resources")):
        return False
    owner_urls = _strings(owner, "nonResourceURLs")
    if not all(any(_url_covers(o, p) for o in owner_urls) for p in _strings(sub, "nonResourceURLs")):
        return False
    owner_names, sub_names = set(_strings(owner, "resourceNames")), _strings(sub, "resourceNames")
    if not sub_names:
        return not owner_names
    return not owner_names or owner_names.issuperset(sub_names)


def covers(owner_rules: list[dict], servant_rules: list[dict]) -> tuple[bool, list[dict]]:
    """Whether ``owner_rules`` allow everything ``servant_rules`` do; and the broken-down rules they miss.

    A servant rule that is one of the owner rules is covered without being broken down (every
    rule of a stored bootstrap role at a restart's reconciliation: 19 → 3 ms a start).
    """
    missing = [sub for servant in servant_rules if not _covers_itself(servant, owner_rules)
               for sub in breakdown(servant) if not any(_rule_covers(owner, sub) for owner in owner_rules)]
    return not missing, missing


def _covers_itself(servant: dict, owner_rules: list[dict]) -> bool:
    """``servant`` is one of ``owner_rules``, and so covered by it.

    Every rule covers its own pieces but one with resourceNames and nonResourceURLs both:
    its URL pieces name nothing, and a rule with names covers only pieces with names, as
    upstream's ruleCovers has it.
    """
    return servant in owner_rules and not (_strings(servant, "resourceNames") and _strings(servant, "nonResourceURLs"))


def compact_rules(rules: list[dict]) -> list[dict]:
    """Upstream's CompactRules: single group/resource(/name) rules merged across verbs."""
    compacted: list[dict] = []
    simple: dict[tuple, dict] = {}
    for r in rules:
        names = _strings(r, "resourceNames")
        is_simple = (not r.get("nonResourceURLs") and len(names) <= 1 and len(_strings(r, "apiGroups")) == 1
                     and len(_strings(r, "resources")) == 1
                     and set(r) <= {"verbs", "apiGroups", "resources", "resourceNames"})
        if not is_simple:
            compacted.append(r)
            continue
        key = (r["apiGroups"][0], r["resources"][0], bool(names), names[0] if names else "")
        if key in simple:
            simple[key]["verbs"] = simple[key]["verbs"] + _strings(r, "verbs")
        else:
            simple[key] = {k: list(v) for k, v in r.items()}
    return compacted + list(simple.values())


def go_quote(value: str) -> str:
    """Go's ``%q`` of a string (strconv.Quote): printable characters as they are."""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x80 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_quote_list(values: Iterable[str]) -> str:
    """Go's ``%q`` of a []string: ``["a" "b"]``."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def compact_string(r: dict) -> str:
    """A rule as upstream's escalation messages print it: ``{APIGroups:[""], Resources:["pods"], Verbs:["get"]}``."""
    parts = []
    for key, label in (("apiGroups", "APIGroups"), ("resources", "Resources"), ("nonResourceURLs", "NonResourceURLs"),
                       ("resourceNames", "ResourceNames"), ("verbs", "Verbs")):
        values = _strings(r, key)
        if values:
            parts.append(f"{label}:{go_quote_list(values)}")
    return "{" + ", ".join(parts) + "}"
