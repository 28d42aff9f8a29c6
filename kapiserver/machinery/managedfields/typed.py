"""Walks of a JSON value against its type (structured-merge-diff's ``typed`` package).

* :func:`validate` — what an applied configuration must satisfy (declared
  fields, scalar types, well-formed and unique list keys);
* :func:`to_field_set` — the fields a value sets;
* :func:`compare` — the fields added, modified and removed between two values;
* :func:`merge` — an applied configuration merged into a live object;
* :func:`remove_items` — a value without the fields of a set;
* :func:`ensure_named_fields_are_members` and :func:`reconcile_with_schema`,
  the set adjustments the updater needs.

Values are plain decoded JSON.  :data:`MISSING` stands for an absent value,
distinct from JSON ``null`` (``None``).  Only :func:`validate` reports errors;
the other walks are lenient (a field no schema declares is treated as
untyped, a list item without its keys is skipped), because the objects they
see have already been through the kind's own validation.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional

from kapiserver.machinery.managedfields import fieldpath
from kapiserver.machinery.managedfields.fieldpath import Path, Set
from kapiserver.machinery.managedfields.schema import (ASSOCIATIVE, ATOMIC, DEDUCED, SCALAR_BOOLEAN, SCALAR_NUMERIC,
                                                       SCALAR_STRING, Atom, ListType, MapType, TypeRef,
                                                       is_untyped_deduced_map)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class ValidationErrors(Exception):
    """Upstream's ``typed.ValidationErrors``: (path, message) pairs."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        super().__init__(errors)
        self.errors = errors

    @staticmethod
    def _one(path: str, message: str) -> str:
        return f"{path}: {message}" if path else message

    def __str__(self) -> str:
        if len(self.errors) == 1:
            return self._one(*self.errors[0])
        return "\n".join(["errors:"] + ["  " + self._one(p, m) for p, m in self.errors])


class ItemError(ValueError):
    """A list item that has no path element (a missing key, a map in a set...)."""


# ------------------------------------------------------------------ memo

class _Memo(threading.local):
    """Results of walks over objects that one field-manager operation sees several times
    (the live object, the merged one and the pruned one share most of their subtrees):
    keyed by the identity of the value, kept only while the operation runs.  Per thread: the
    operation of a large write runs on a thread while the reactor runs those of small ones."""

    def __init__(self) -> None:
        self.depth = 0
        self.items: dict[int, tuple[Any, str]] = {}
        self.field_sets: dict[tuple[int, int], tuple[Any, tuple[bool, Optional[Set]]]] = {}
        self.ensured: dict[tuple[int, int], tuple[Set, Set]] = {}


_MEMO = _Memo()


@contextlib.contextmanager
def memo() -> Iterator[None]:
    """Remember walks of unchanged values for the duration of the block (values must not be
    modified inside it)."""
    _MEMO.depth += 1
    try:
        yield
    finally:
        _MEMO.depth -= 1
        if not _MEMO.depth:
            _MEMO.items.clear()
            _MEMO.field_sets.clear()
            _MEMO.ensured.clear()


# ------------------------------------------------------------------ Go formatting of values in messages

def _go_v(value: Any) -> str:
    """Go's ``%v`` of a decoded JSON value."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return fieldpath._go_float(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_v(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_v(v) for v in value) + "]"
    return str(value)


def _go_sharp_v(value: Any) -> str:
    """Go's ``%#v`` of a decoded JSON value."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return fieldpath.go_json(value)
    if isinstance(value, float):
        return fieldpath._go_float(value)
    if isinstance(value, dict):
        return "map[string]interface {}{" + ", ".join(f"{fieldpath.go_json(k)}:{_go_sharp_v(value[k])}"
                                                        for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp_v(v) for v in value) + "}"
    return str(value)


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    return "<nil>"


# ------------------------------------------------------------------ list items

def item_element(lt: ListType, item: Any) -> str:
    """The path element of an item of an associative list (ItemError if it has none)."""
    if _MEMO.depth and type(item) is dict:
        found = _MEMO.items.get(id(item))
        if found is not None and found[0] is item:
            return found[1]
        element = _item_element(lt, item)
        _MEMO.items[id(item)] = (item, element)
        return element
    return _item_element(lt, item)


def _item_element(lt: ListType, item: Any) -> str:
    if lt.keys:
        if item is None:
            raise ItemError("associative list with keys may not have a null element")
        if not isinstance(item, dict):
            raise ItemError("associative list with keys may not have non-map elements")
        values = {}
        for name in lt.keys:
            if name in item:
                values[name] = item[name]
                continue
            atom = lt.elem.atom
            if atom.map is None:
                raise ItemError(f"couldn't find default value for {name}: associative list may not have "
                                f"non-map types")
            default = atom.map.defaults.get(name)
            if default is None:
                raise ItemError(f'associative list with keys has an element that omits key field "{name}" '
                                f"(and doesn't have default value)")
            values[name] = default
        return fieldpath.key(values)
    if isinstance(item, dict):
        raise ItemError("associative list without keys has an element that's a map type")
    if isinstance(item, list):
        raise ItemError("not supported: associative list with lists as elements")
    if item is None:
        raise ItemError("associative list without keys has an element that's an explicit null")
    return fieldpath.value(item)


def _field_type(m: MapType, name: str) -> TypeRef:
    found = m.fields.get(name)
    if found is not None:
        return found
    return m.elem if m.elem is not None else DEDUCED


# ------------------------------------------------------------------ validate

def validate(value: Any, tr: TypeRef, allow_duplicates: bool = False) -> None:
    errs: list[tuple[str, str]] = []
    _validate(value, tr, "", errs, allow_duplicates)
    if errs:
        raise ValidationErrors(errs)


def _validate(value: Any, tr: TypeRef, path: str, errs: list, allow_dup: bool) -> None:
    atom = tr.atom.deduce(value)
    if atom.map is not None:
        if value is None:
            return
        if not isinstance(value, dict):
            errs.append((path, f"expected map, got &{{{_go_v(value)}}}"))
            return
        m = atom.map
        for k, v in value.items():
            ftr = m.fields.get(k)
            if ftr is None:
                ftr = m.elem
                if ftr is None:
                    errs.append((f"{path}.{k}", "field not declared in schema"))
                    return
            _validate(v, ftr, f"{path}.{k}", errs, allow_dup)
    elif atom.scalar is not None:
        if value is None:
            return
        kind = atom.scalar
        if kind == SCALAR_NUMERIC:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                errs.append((path, f"expected numeric (int or float), got {_go_type(value)}"))
        elif kind == SCALAR_STRING:
            if not isinstance(value, str):
                errs.append((path, f"expected string, got &value.valueUnstructured{{Value:{_go_sharp_v(value)}}}"))
        elif kind == SCALAR_BOOLEAN:
            if not isinstance(value, bool):
                errs.append((path, f"expected boolean, got &{{{_go_v(value)}}}"))
        elif isinstance(value, (dict, list)):
            errs.append((path, f"expected any scalar, got &{{{_go_v(value)}}}"))
    elif atom.list is not None:
        if value is None:
            return
        if not isinstance(value, list):
            errs.append((path, f"expected list, got &{{{_go_v(value)}}}"))
            return
        lt = atom.list
        seen: set[str] = set()
        for i, item in enumerate(value):
            if lt.relationship != ASSOCIATIVE:
                _validate(item, lt.elem, f"{path}[{i}]", errs, allow_dup)
                continue
            try:
                element = item_element(lt, item)
            except ItemError as e:
                errs.append((path, f"element {i}: {e}"))
                return
            if element in seen and not allow_dup:
                errs.append((path, f"duplicate entries for key {fieldpath.element_string(element)}"))
            seen.add(element)
            _validate(item, lt.elem, path + fieldpath.element_string(element), errs, allow_dup)
    else:
        errs.append((path, "schema error: invalid atom: inlined"))


# ------------------------------------------------------------------ field sets

def to_field_set(value: Any, tr: TypeRef) -> Set:
    """The set of fields ``value`` sets, as upstream's ToFieldSet computes it."""
    _, children = _fs(value, tr)
    return children if children is not None else Set()


def _fs(value: Any, tr: TypeRef) -> tuple[bool, Optional[Set]]:
    """(is this node itself a member, the set below it)."""
    if _MEMO.depth and (type(value) is dict or type(value) is list):
        key = (id(value), id(tr))
        found = _MEMO.field_sets.get(key)
        if found is not None and found[0] is value:
            return found[1]
        result = _fs_walk(value, tr)
        _MEMO.field_sets[key] = (value, result)
        return result
    return _fs_walk(value, tr)


def _fs_walk(value: Any, tr: TypeRef) -> tuple[bool, Optional[Set]]:
    atom = tr.atom.deduce(value)
    m = atom.map
    if m is not None:
        if m.relationship == ATOMIC:
            return True, None
        if not isinstance(value, dict) or not value:
            return False, None
        members: set[str] = set()
        children: dict[str, Set] = {}
        fields = m.fields
        for k, v in value.items():
            ftr = fields.get(k)
            declared = ftr is not None
            if ftr is None:
                ftr = m.elem if m.elem is not None else DEDUCED
            is_member, below = _fs(v, ftr)
            element = "f:" + k
            if is_member or v is None or not declared or (type(v) is dict and not v):
                members.add(element)
            if below is not None:
                children[element] = below
        return False, Set(members, children) if members or children else None
    if atom.scalar is not None:
        return True, None
    lt = atom.list
    if lt is None:
        return False, None
    if lt.relationship != ASSOCIATIVE:
        return True, None
    if not isinstance(value, list) or not value:
        return False, None
    elements: list[Optional[str]] = []
    seen: set[str] = set()
    duplicates: set[str] = set()
    for item in value:
        try:
            found: Optional[str] = item_element(lt, item)
        except ItemError:
            found = None
        elements.append(found)
        if found is not None:
            if found in seen:
                duplicates.add(found)
            seen.add(found)
    members = set(duplicates)
    children = {}
    for item, element in zip(value, elements):
        if element is None or element in duplicates:
            continue
        _, below = _fs(item, lt.elem)
        members.add(element)
        if below is not None:
            children[element] = below
    return False, Set(members, children) if members or children else None


# ------------------------------------------------------------------ compare

class Comparison:
    __slots__ = ("removed", "modified", "added")

    def __init__(self) -> None:
        self.removed = Set()
        self.modified = Set()
        self.added = Set()

    def is_same(self) -> bool:
        return self.removed.empty() and self.modified.empty() and self.added.empty()

    def filtered(self, keep) -> "Comparison":
        """This comparison with ``keep`` (a set filter) applied to each of its sets."""
        if keep is None:
            return self
        out = Comparison()
        out.removed, out.modified, out.added = keep(self.removed), keep(self.modified), keep(self.added)
        return out


def compare(lhs: Any, rhs: Any, tr: TypeRef) -> Comparison:
    c = Comparison()
    _cmp(lhs, rhs, tr, (), c)
    return c


def _leaf(lhs: Any, rhs: Any, path: Path, c: Comparison) -> None:
    if lhs is MISSING:
        c.added.insert(path)
    elif rhs is MISSING:
        c.removed.insert(path)
    elif lhs != rhs or type(lhs) is not type(rhs) and (type(lhs) is bool or type(rhs) is bool):
        c.modified.insert(path)


def _cmp(lhs: Any, rhs: Any, tr: TypeRef, path: Path, c: Comparison) -> None:
    atom = tr.atom
    if lhs is not MISSING and rhs is not MISSING:
        if lhs is rhs or (lhs == rhs and type(lhs) is type(rhs)):  # equal subtrees: nothing to find
            return
        al, ar = atom.deduce(lhs), atom.deduce(rhs)
        if not al.same(ar):
            _cmp_atom(al, lhs, rhs, path, c)
        leaf = _cmp_atom(ar, lhs, rhs, path, c)
    else:
        leaf = _cmp_atom(atom.deduce(rhs if lhs is MISSING else lhs), lhs, rhs, path, c)
    if not leaf:
        if lhs is MISSING:
            c.added.insert(path)
        elif rhs is MISSING:
            c.removed.insert(path)


def _cmp_atom(atom: Atom, lhs: Any, rhs: Any, path: Path, c: Comparison) -> bool:
    """Compare under one atom; True when the node was compared as a leaf."""
    m = atom.map
    if m is not None:
        lm = lhs if isinstance(lhs, dict) else None
        rm = rhs if isinstance(rhs, dict) else None
        if m.relationship == ATOMIC or (not lm and not rm):
            _leaf(lhs, rhs, path, c)
            return True
        if lm:
            for k, lv in lm.items():
                _cmp(lv, rm.get(k, MISSING) if rm else MISSING, _field_type(m, k), path + ("f:" + k,), c)
        if rm:
            for k, rv in rm.items():
                if lm is None or k not in lm:
                    _cmp(MISSING, rv, _field_type(m, k), path + ("f:" + k,), c)
        return False
    if atom.scalar is not None:
        _leaf(lhs, rhs, path, c)
        return True
    lt = atom.list
    if lt is None:
        return False
    ll = lhs if isinstance(lhs, list) else None
    rl = rhs if isinstance(rhs, list) else None
    if lt.relationship != ASSOCIATIVE or (not ll and not rl):
        _leaf(lhs, rhs, path, c)
        return True
    order: list[str] = []
    lvalues: dict[str, list] = {}
    rvalues: dict[str, list] = {}
    for items, values, other in ((ll, lvalues, None), (rl, rvalues, lvalues)):
        for item in items or ():
            try:
                element = item_element(lt, item)
            except ItemError:
                continue
            found = values.get(element)
            if found is not None:
                found.append(item)
            else:
                values[element] = [item]
                if other is None or element not in other:
                    order.append(element)
    for element in order:
        lvs = lvalues.get(element, ())
        rvs = rvalues.get(element, ())
        sub = path + (element,)
        if len(lvs) <= 1 and len(rvs) <= 1:
            _cmp(lvs[0] if lvs else MISSING, rvs[0] if rvs else MISSING, lt.elem, sub, c)
        elif len(lvs) >= 2 and len(rvs) >= 2:
            if lvs != rvs:
                c.modified.insert(sub)
        elif len(lvs) >= 2:
            if rvs:
                _cmp(MISSING, rvs[0], lt.elem, sub, c)
            c.removed.insert(sub)
        else:
            if lvs:
                _cmp(lvs[0], MISSING, lt.elem, sub, c)
            c.added.insert(sub)
    return False


# ------------------------------------------------------------------ merge

def merge(lhs: Any, rhs: Any, tr: TypeRef) -> Any:
    """``rhs`` (an applied configuration) merged into ``lhs`` (the live object)."""
    out = _merge(lhs, rhs, tr)
    return {} if out is MISSING else out


def _merge(lhs: Any, rhs: Any, tr: TypeRef) -> Any:
    # a side that is absent leaves the other one as it is (what the full walk would rebuild)
    if rhs is MISSING:
        return lhs
    if lhs is MISSING:
        return rhs
    atom = tr.atom.deduce(rhs)
    m = atom.map
    if m is not None:
        lm = lhs if isinstance(lhs, dict) else None
        rm = rhs if isinstance(rhs, dict) else None
        if m.relationship == ATOMIC or (not lm and not rm):
            return rhs
        out = {}
        if lm:
            for k, lv in lm.items():
                merged = _merge(lv, rm.get(k, MISSING) if rm else MISSING, _field_type(m, k))
                if merged is not MISSING:
                    out[k] = merged
        if rm:
            for k, rv in rm.items():
                if lm is None or k not in lm:
                    out[k] = rv
        return out if out else MISSING
    if atom.scalar is not None:
        return rhs
    lt = atom.list
    if lt is None:
        return rhs
    ll = lhs if isinstance(lhs, list) else None
    rl = rhs if isinstance(rhs, list) else None
    if lt.relationship != ASSOCIATIVE or (not ll and not rl):
        return rhs
    return _merge_list(lt, ll or [], rl or [])


def _index(lt: ListType, items: list, allow_duplicates: bool) -> tuple[list[str], dict[str, Any], list[int]]:
    elements: list[str] = []
    positions: list[int] = []
    observed: dict[str, Any] = {}
    for i, item in enumerate(items):
        try:
            element = item_element(lt, item)
        except ItemError:
            continue
        if element in observed:
            if not allow_duplicates:
                continue
            observed[element] = None  # a duplicated live item merges as null, as upstream
        else:
            observed[element] = item
        elements.append(element)
        positions.append(i)
    return elements, observed, positions


def _merge_list(lt: ListType, ll: list, rl: list) -> Any:
    """Upstream's associative-list merge: live items keep their places, applied
    items follow the applied order, new ones come after the shared one before them."""
    elem = lt.elem
    rhs_elements, observed_rhs, _ = _index(lt, rl, False)
    lhs_elements, observed_lhs, lhs_positions = _index(lt, ll, True)
    shared = [e for e in rhs_elements if e in observed_lhs]
    shared_at = 0
    next_shared = shared[0] if shared else None
    if shared:
        shared_at = 1
    merged_rhs: set[str] = set()
    out: list = []
    li = ri = 0
    llen, rlen = len(lhs_elements), len(rhs_elements)
    while li < llen or ri < rlen:
        if li < llen and ri < rlen:
            element = lhs_elements[li]
            if element == rhs_elements[ri]:
                merged_rhs.add(element)
                merged = _merge(observed_lhs[element], observed_rhs[element], elem)
                if merged is not MISSING:
                    out.append(merged)
                li += 1
                ri += 1
                next_shared = None
                if shared_at < len(shared):
                    next_shared = shared[shared_at]
                    shared_at += 1
                continue
            if element in observed_rhs and next_shared is not None and next_shared != element:
                li += 1
                continue
        if li < llen:
            element = lhs_elements[li]
            if element not in observed_rhs:
                out.append(ll[lhs_positions[li]])
                li += 1
                continue
            elif element in merged_rhs:
                li += 1
        if ri < rlen:
            element = rhs_elements[ri]
            merged_rhs.add(element)
            merged = _merge(observed_lhs.get(element, MISSING), observed_rhs[element], elem)
            if merged is not MISSING:
                out.append(merged)
            ri += 1
            if next_shared is not None and next_shared == element:
                next_shared = None
                if shared_at < len(shared):
                    next_shared = shared[shared_at]
                    shared_at += 1
    return out if out else MISSING


# ------------------------------------------------------------------ remove

def remove_items(value: Any, to_remove: Set, tr: TypeRef) -> Any:
    """``value`` without the paths of ``to_remove`` (a container left empty is dropped)."""
    if to_remove.empty():
        return value
    out = _remove(value, to_remove, tr)
    return {} if out is MISSING else out


def _remove(value: Any, to_remove: Set, tr: TypeRef) -> Any:
    atom = tr.atom.deduce(value)
    m = atom.map
    if m is not None:
        if not isinstance(value, dict):
            return value
        if not value or m.relationship == ATOMIC:
            return MISSING
        members, children = to_remove.members, to_remove.children
        out = {}
        for k, v in value.items():
            element = "f:" + k
            if element in members:
                continue
            below = children.get(element)
            if below is not None and not below.empty():
                v = _remove(v, below, _field_type(m, k))
                if v is MISSING:
                    continue
            out[k] = v
        return out if out else MISSING
    if atom.scalar is not None:
        return value
    lt = atom.list
    if lt is None:
        return value
    if not isinstance(value, list):
        return value
    if not value or lt.relationship != ASSOCIATIVE:
        return MISSING
    items = []
    for item in value:
        try:
            element = item_element(lt, item)
        except ItemError:
            items.append(item)
            continue
        if element in to_remove.members:
            continue
        below = to_remove.children.get(element)
        if below is not None and not below.empty():
            item = _remove(item, below, lt.elem)
            if item is MISSING:
                continue
        items.append(item)
    return items if items else MISSING


# ------------------------------------------------------------------ set adjustments

def ensure_named_fields_are_members(s: Set, tr: Optional[TypeRef]) -> Set:
    """``s`` where every declared field that has children is also a member itself."""
    if not s.children or tr is None:
        return s
    if _MEMO.depth:
        key = (id(s), id(tr))
        found = _MEMO.ensured.get(key)
        if found is not None and found[0] is s:
            return found[1]
        result = _ensure(s, tr)
        _MEMO.ensured[key] = (s, result)
        return result
    return _ensure(s, tr)


def _ensure(s: Set, tr: TypeRef) -> Set:
    atom = tr.atom
    m, lt = atom.map, atom.list
    members = s.members
    added = False
    children = {}
    for element, child in s.children.items():
        ctr: Optional[TypeRef] = None
        if element.startswith("f:") and m is not None:
            ctr = m.fields.get(element[2:])
            if ctr is not None:
                if not added:
                    members = set(members)
                    added = True
                members.add(element)
            else:
                ctr = m.elem
        elif element.startswith("k:") and lt is not None:
            ctr = lt.elem
        children[element] = ensure_named_fields_are_members(child, ctr)
    return Set(members, children)


def reconcile_with_schema(s: Set, tr: TypeRef) -> Optional[Set]:
    """``s`` adjusted to the schema's current atomic/granular choices (None when unchanged):
    a granular ownership below what is now atomic becomes ownership of the atomic node."""
    to_remove, to_add = Set(), Set()
    _reconcile(s, tr, (), False, to_remove, to_add)
    if to_remove.empty() and to_add.empty():
        return None
    return s.recursive_difference(to_remove).union(to_add)


def _reconcile(s: Optional[Set], tr: TypeRef, path: Path, is_atomic: bool, to_remove: Set, to_add: Set) -> None:
    atom = tr.atom
    m = atom.map
    if m is not None:
        if is_untyped_deduced_map(m):
            return
        if not is_atomic and m.relationship == ATOMIC:
            if s is not None and not s.empty():
                to_remove.insert(path)
                to_add.insert(path)
            return
        if s is None:
            return
        for element, is_member in _elements(s):
            ftr: Optional[TypeRef] = m.elem
            if element.startswith("f:"):
                ftr = m.fields.get(element[2:]) or m.elem
            if ftr is None:
                continue
            child = s.children.get(element)
            _reconcile(child, ftr, path + (element,), is_member and child is None, to_remove, to_add)
        return
    if atom.scalar is not None:
        return
    lt = atom.list
    if lt is None:
        return
    if not is_atomic and lt.relationship == ATOMIC:
        to_remove.insert(path)
        to_add.insert(path)
        return
    if s is None:
        return
    for element, is_member in _elements(s):
        child = s.children.get(element)
        _reconcile(child, lt.elem, path + (element,), is_member and child is None, to_remove, to_add)


def _elements(s: Set):
    for element in s.children:
        if element not in s.members:
            yield element, False
    for element in s.members:
        yield element, True
