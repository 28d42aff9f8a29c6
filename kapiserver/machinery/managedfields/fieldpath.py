"""Field paths, sets of them, and their ``FieldsV1`` serialization.

A path element is kept in its serialized form, the key it has in a
``fieldsV1`` object, so identity is plain string equality:

* ``f:<name>`` — a field of a map (``f:spec``);
* ``k:{"name":"nginx"}`` — an item of a list of maps, by its list-map keys
  (key names sorted, values in Go's JSON encoding);
* ``v:"a"`` — an item of a set (a list of scalars), by value;
* ``i:3`` — an item of a list by index (parsed, never produced: upstream
  tracks only associative lists).

A :class:`Set` is a trie: ``members`` are the element strings that are in
the set at this level, ``children`` the sets below an element.  An element
may be both (``.`` in ``fieldsV1``: the map itself and some of its fields).
Serialization orders elements as upstream does (fields, keys, values,
indices; each by value), so the bytes match kube-apiserver's.
"""
from __future__ import annotations

import decimal
import functools
import heapq
import json
import re
from typing import Any, Collection, Iterator, Optional

import orjson

Path = tuple[str, ...]

FIELD, KEY, VALUE, INDEX = "f:", "k:", "v:", "i:"
_KIND_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}


class PathElementError(ValueError):
    """A ``fieldsV1`` key that is not a valid path element."""


# ------------------------------------------------------------------ Go's JSON

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


_NEEDS_ESCAPE = re.compile(r'[^\x20-\x7e]|["\\<>&]')


def _go_string(s: str) -> str:
    if not _NEEDS_ESCAPE.search(s):
        return '"' + s + '"'
    out = []
    for c in s:
        esc = _ESCAPES.get(c)
        if esc is not None:
            out.append(esc)
        elif ord(c) < 0x20:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _go_float(f: float) -> str:
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    if f != 0 and (abs(f) < 1e-6 or abs(f) >= 1e21):
        mantissa, _, exp = repr(f).partition("e")
        return f"{mantissa}e{int(exp):+d}" if exp else repr(f)
    return format(decimal.Decimal(repr(f)), "f")


def go_json(value: Any) -> str:
    """``value`` as Go's encoding/json writes it: compact, map keys sorted, HTML escaped."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_go_string(k) + ":" + go_json(value[k]) for k in sorted(value)) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


# ------------------------------------------------------------------ path elements

def field(name: str) -> str:
    return FIELD + name


def key(values: dict) -> str:
    """The element of a list-map item whose key fields have ``values``."""
    if len(values) == 1:  # the usual single key (name, mountPath...): no sorting, no generic walk
        for name, v in values.items():
            return 'k:{' + _go_string(name) + ":" + (_go_string(v) if type(v) is str else go_json(v)) + "}"
    return KEY + go_json(values)


def value(v: Any) -> str:
    return VALUE + go_json(v)


@functools.lru_cache(maxsize=16384)
def canonical(element: str) -> Optional[str]:
    """A ``fieldsV1`` key in the form this module produces; None for an unknown
    element type (upstream skips those).  Raises PathElementError when malformed."""
    if len(element) < 2:
        raise PathElementError("key must be 2 characters long:")
    if element[1] != ":":
        raise PathElementError(f"missing colon: {element}")
    kind = element[0]
    if kind == "f":
        return element
    if kind == "i":
        try:
            return INDEX + str(int(element[2:]))
        except ValueError as e:
            raise PathElementError(str(e)) from None
    if kind not in "kv":
        return None
    try:
        parsed = orjson.loads(element[2:])
    except orjson.JSONDecodeError as e:
        raise PathElementError(str(e)) from None
    if kind == "k":
        if not isinstance(parsed, dict):
            raise PathElementError(f"expected an object in {element}")
        return key(parsed)
    return value(parsed)


@functools.lru_cache(maxsize=4096)
def _parsed(element: str) -> Any:
    return json.loads(element[2:])


def _value_rank(v: Any) -> tuple:
    """A sort key giving upstream's total order of values: numbers, strings,
    booleans, lists, maps, null."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, (int, float)):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, list):
        return (3, tuple(_value_rank(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k, _value_rank(v[k])) for k in sorted(v)))
    return (5,)


@functools.lru_cache(maxsize=16384)
def sort_key(element: str) -> tuple:
    kind = element[0]
    if kind == "f":
        return (0, element[2:])
    if kind == "k":
        fields = _parsed(element)
        return (1, tuple((name, _value_rank(fields[name])) for name in sorted(fields)))
    if kind == "v":
        return (2, _value_rank(_parsed(element)))
    return (3, int(element[2:]))


# A larger collection of elements is sorted a slice at a time (see ordered).
_SORT_SLICE = 1024


def ordered(elements: Collection[str]) -> list[str]:
    """``elements`` in upstream's order (:func:`sort_key`).

    One ``sorted`` call holds the GIL throughout: the keys of a list of 100,000 items (a Pod's env
    vars) compare as nested tuples for ~0.3 s, and no other thread (the reactor) runs meanwhile.
    A large collection is sorted in slices and the sorted slices merged by ``heapq.merge``, whose
    Python loop lets other threads in.  Keys are computed once; equal keys keep string order.
    """
    if len(elements) <= _SORT_SLICE:
        return sorted(elements, key=sort_key)
    keyed = [(sort_key(element), element) for element in elements]
    runs = [sorted(keyed[start:start + _SORT_SLICE]) for start in range(0, len(keyed), _SORT_SLICE)]
    return [element for _, element in heapq.merge(*runs)]


def _value_string(v: Any) -> str:
    """Go's ``value.ToString`` (how conflict messages print values)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(_value_string(x) for x in v) + "]"
    return "".join(f"{k}={_value_string(v[k])}" for k in v)


def element_string(element: str) -> str:
    """``.name``, ``[name="nginx"]``, ``[="a"]`` or ``[3]``, as upstream prints path elements."""
    kind = element[0]
    if kind == "f":
        return "." + element[2:]
    if kind == "k":
        fields = _parsed(element)
        return "[" + ",".join(f"{name}={_value_string(fields[name])}" for name in fields) + "]"
    if kind == "v":
        return "[=" + _value_string(_parsed(element)) + "]"
    return "[" + element[2:] + "]"


def path_string(path: Path) -> str:
    return "".join(element_string(e) for e in path)


# ------------------------------------------------------------------ sets

class Set:
    """A set of paths (see the module docstring).  Operations return new sets
    and may share unchanged subtrees with their inputs: never mutate a set
    obtained from another one."""

    __slots__ = ("members", "children", "_fields")

    def __init__(self, members: Optional[set[str]] = None, children: Optional[dict[str, "Set"]] = None) -> None:
        self.members: set[str] = members if members is not None else set()
        self.children: dict[str, Set] = children if children is not None else {}
        self._fields: Optional[dict] = None

    @classmethod
    def of(cls, *paths: Path) -> "Set":
        s = cls()
        for p in paths:
            s.insert(p)
        return s

    def insert(self, path: Path) -> None:
        if not path:
            return
        self._fields = None
        node = self
        for element in path[:-1]:
            child = node.children.get(element)
            if child is None:
                child = node.children[element] = Set()
            node = child
        node.members.add(path[-1])

    def has(self, path: Path) -> bool:
        if not path:
            return False
        node: Optional[Set] = self
        for element in path[:-1]:
            node = node.children.get(element)  # type: ignore[union-attr]
            if node is None:
                return False
        return path[-1] in node.members  # type: ignore[union-attr]

    def with_prefix(self, element: str) -> "Set":
        return self.children.get(element) or EMPTY

    def empty(self) -> bool:
        # sets never hold an empty child set (every operation drops them), so this is O(1)
        return not self.members and not self.children

    def __bool__(self) -> bool:
        return not self.empty()

    def size(self) -> int:
        return len(self.members) + sum(c.size() for c in self.children.values())

    def union(self, other: "Set") -> "Set":
        if not other.members and not other.children:
            return self
        if not self.members and not self.children:
            return other
        children = dict(self.children)
        for element, child in other.children.items():
            mine = children.get(element)
            children[element] = child if mine is None else mine.union(child)
        return Set(self.members | other.members, children)

    def intersection(self, other: "Set") -> "Set":
        children = {}
        for element, child in self.children.items():
            theirs = other.children.get(element)
            if theirs is not None:
                both = child.intersection(theirs)
                if not both.empty():
                    children[element] = both
        return Set(self.members & other.members, children)

    def difference(self, other: "Set") -> "Set":
        """Paths of self that are not in other (exact paths: a member of other
        does not remove what is below it here)."""
        if not other.members and not other.children:
            return self
        children = {}
        for element, child in self.children.items():
            theirs = other.children.get(element)
            if theirs is None:
                children[element] = child
            else:
                rest = child.difference(theirs)
                if not rest.empty():
                    children[element] = rest
        return Set(self.members - other.members, children)

    def recursive_difference(self, other: "Set") -> "Set":
        """Like difference, but a member of other also removes everything below it."""
        children = {}
        for element, child in self.children.items():
            if element in other.members:
                continue
            theirs = other.children.get(element)
            if theirs is None:
                children[element] = child
            else:
                rest = child.recursive_difference(theirs)
                if not rest.empty():
                    children[element] = rest
        return Set(self.members - other.members, children)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Set):
            return NotImplemented
        if self.members != other.members:
            return False
        mine = {k: v for k, v in self.children.items() if not v.empty()}
        theirs = {k: v for k, v in other.children.items() if not v.empty()}
        return mine.keys() == theirs.keys() and all(mine[k] == theirs[k] for k in mine)

    __hash__ = None  # type: ignore[assignment]

    def paths(self, prefix: Path = ()) -> Iterator[Path]:
        """Every path, in upstream's iteration order (this level's members, then children)."""
        for element in ordered(self.members):
            yield prefix + (element,)
        for element in ordered(self.children.keys()):
            yield from self.children[element].paths(prefix + (element,))

    def __repr__(self) -> str:
        return "Set(" + ", ".join(path_string(p) for p in self.paths()) + ")"

    # ------------------------------------------------------------ FieldsV1

    def to_fields(self) -> dict:
        """The ``fieldsV1`` object of this set, ordered as upstream serializes it (computed once
        per set; the result is shared: do not modify it)."""
        if self._fields is None:
            self._fields = self._emit(False)
        return self._fields

    def _emit(self, include_self: bool) -> dict:
        out: dict[str, Any] = {}
        if include_self and (self.members or self.children):
            out["."] = {}
        elements = self.members | self.children.keys() if self.children else self.members
        for element in ordered(elements):
            child = self.children.get(element)
            if child is None or child.empty():
                out[element] = {}
            else:
                out[element] = child._emit(element in self.members)
        return out

    @classmethod
    def from_fields(cls, fields: Any) -> "Set":
        """Parse a ``fieldsV1`` object (PathElementError if malformed).

        The same fieldsV1 comes back on every write of an object, so parsed sets
        are cached (by their JSON) and shared: never mutate the result.
        """
        if not isinstance(fields, dict):
            raise PathElementError("fieldsV1 must be a JSON object")
        return _parse_fields(orjson.dumps(fields))


@functools.lru_cache(maxsize=4096)
def _parse_fields(raw: bytes) -> Set:
    found, _ = _read(orjson.loads(raw))
    return found if found is not None else Set()


def _read(node: dict) -> tuple[Optional[Set], bool]:
    children: Optional[Set] = None
    is_member = False
    for raw, sub in node.items():
        if raw == ".":
            is_member = True
            continue
        element = canonical(raw)
        if element is None:
            continue
        if not isinstance(sub, dict):
            raise PathElementError(f"expected an object under {raw}")
        grandchildren, child_is_member = _read(sub)
        if child_is_member or grandchildren is not None:
            if children is None:
                children = Set()
            if child_is_member:
                children.members.add(element)
            if grandchildren is not None:
                existing = children.children.get(element)
                children.children[element] = grandchildren if existing is None else existing.union(grandchildren)
    if children is None:
        is_member = True
    return children, is_member


EMPTY = Set()


class VersionedSet:
    """A manager's fields: the set, the API version it is expressed in, and
    whether it came from an apply (upstream's fieldpath.VersionedSet)."""

    __slots__ = ("set", "api_version", "applied")

    def __init__(self, fields: Set, api_version: str, applied: bool) -> None:
        self.set = fields
        self.api_version = api_version
        self.applied = applied

    def with_set(self, fields: Set) -> "VersionedSet":
        return VersionedSet(fields, self.api_version, self.applied)

    def __repr__(self) -> str:
        return f"VersionedSet({self.set!r}, {self.api_version!r}, applied={self.applied})"
