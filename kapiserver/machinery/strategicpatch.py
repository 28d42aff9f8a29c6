"""Strategic merge patch, the ``application/strategic-merge-patch+json`` PATCH type.

Like a JSON merge patch, except that lists marked in the schema with
``x-kubernetes-patch-strategy: merge`` are merged: lists of objects element by
element on ``x-kubernetes-patch-merge-key``, lists of scalars as a union.
Patches may carry directives: ``$patch`` (replace/delete, on maps and list
elements), ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and
``$setElementOrder/<field>``.  Semantics and error classes follow upstream's
``k8s.io/apimachinery/pkg/util/strategicpatch`` as used by the API server
(parallel lists merged, nulls for absent keys ignored).  Where the schema does
not describe a field, maps are merged and lists replaced.
"""
from __future__ import annotations

import copy
import json
from typing import Any, Callable, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.codec import copy_json
from kapiserver.machinery.jsonpatch import patch_not_applied

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
SET_ELEMENT_ORDER = "$setElementOrder/"
REPLACE, MERGE, DELETE = "replace", "merge", "delete"

Resolver = Callable[[str], dict]


class _PatchError(Exception):
    """An error upstream returns as a plain error: the client sees a 500."""


class _BadRequest(_PatchError):
    pass


class _Unprocessable(_PatchError):
    pass


def _go(value: Any) -> str:
    """Go's ``%v`` of decoded JSON, used inside upstream's messages."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _bad_patch_type(directive: Any, patch: dict) -> _PatchError:
    # upstream answers these as a 500 (a plain error); a client's typo is a 400 here
    return _BadRequest(f"unknown patch type: {_go(directive)} in map: {_go(patch)}")


def _no_merge_key(element: dict, key: str) -> _PatchError:
    return _PatchError(f"map: {_go(element)} does not contain declared merge key: {key}")


def _without_nulls(value: Any) -> Any:
    """``value`` with every null member of its maps dropped, at any depth (upstream's
    discardNullValuesFromPatch); changed in place, as the merge owns its copy of the patch."""
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for v in value.values():
            _without_nulls(v)
    elif isinstance(value, list):
        for v in value:
            _without_nulls(v)
    return value


_DROPPED = object()


def _without_directives(value: Any) -> Any:
    """``value`` without the maps that carry a ``$patch`` directive, at any depth (upstream's
    removeDirectives): such a member is dropped from its map and such an element from its list;
    :data:`_DROPPED` when ``value`` itself is one."""
    if isinstance(value, dict):
        if DIRECTIVE in value:
            return _DROPPED
        for key in list(value):
            kept = _without_directives(value[key])
            if kept is _DROPPED:
                del value[key]
            else:
                value[key] = kept
        return value
    if isinstance(value, list):
        return [kept for kept in map(_without_directives, value) if kept is not _DROPPED]
    return value


def _scalar_key(value: Any) -> tuple:
    """Equality as Go compares decoded JSON scalars (numbers are all float64)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    if isinstance(value, (dict, list)):  # a merge key that is not a scalar: compared by value (Go's DeepEqual)
        return (type(value).__name__, json.dumps(value, sort_keys=True))
    return (type(value).__name__, value)


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "slice"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "nil"
    return type(value).__name__


class _Schema:
    """Walks an OpenAPI schema, following ``$ref`` and single-element ``allOf``."""

    def __init__(self, resolve: Optional[Resolver]) -> None:
        self.resolve = resolve

    def deref(self, schema: Any) -> Optional[dict]:
        seen = 0
        while isinstance(schema, dict) and seen < 64:
            seen += 1
            if "$ref" in schema and self.resolve is not None:
                schema = self.resolve(schema["$ref"])
                continue
            all_of = schema.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and "properties" not in schema:
                schema = all_of[0]
                continue
            return schema
        return None

    def field(self, schema: Optional[dict], key: str) -> Optional[dict]:
        """The schema of property ``key`` (un-dereferenced: it carries the patch extensions)."""
        node = self.deref(schema)
        if node is None:
            return None
        props = node.get("properties")
        if isinstance(props, dict) and key in props:
            return props[key]
        extra = node.get("additionalProperties")
        return extra if isinstance(extra, dict) else None

    def items(self, field_schema: Optional[dict]) -> Optional[dict]:
        node = self.deref(field_schema)
        items = node.get("items") if node else None
        return items if isinstance(items, dict) else None

    @staticmethod
    def strategy(field_schema: Optional[dict]) -> tuple[str, str]:
        """(strategy, merge key) of a field; strategy is merge, replace or ''."""
        if not isinstance(field_schema, dict):
            return "", ""
        raw = field_schema.get("x-kubernetes-patch-strategy") or ""
        parts = [p for p in str(raw).split(",") if p and p != "retainKeys"]
        return (parts[0] if parts else ""), str(field_schema.get("x-kubernetes-patch-merge-key") or "")


class _Merger:
    def __init__(self, schema: _Schema) -> None:
        self.schema = schema

    # ------------------------------------------------------------ maps

    def merge_map(self, original: Optional[dict], patch: dict, schema: Optional[dict]) -> dict:
        if DIRECTIVE in patch:
            directive = patch[DIRECTIVE]
            if directive == REPLACE:
                return {k: v for k, v in patch.items() if k != DIRECTIVE}
            if directive == DELETE:
                return {}
            raise _bad_patch_type(directive, patch)
        result = dict(original) if original else {}
        patch = dict(patch)
        if RETAIN_KEYS in patch:
            retain = patch.pop(RETAIN_KEYS)
            if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
                raise _BadRequest("invalid patch format of retainKeys")
            for key in [k for k in patch if not k.startswith("$")]:
                if key not in retain and patch[key] is not None:
                    raise _Unprocessable("patch content doesn't match retainKeys list")
            result = {k: v for k, v in result.items() if k in retain}
        for key in [k for k in patch if k.startswith(SET_ELEMENT_ORDER)]:
            self._set_element_order(result, patch, key, schema)
        for key, value in patch.items():
            delete_list = key.startswith(DELETE_FROM_PRIMITIVE_LIST)
            if delete_list:
                key = key[len(DELETE_FROM_PRIMITIVE_LIST):]
                if not isinstance(value, list):
                    raise _BadRequest("invalid patch format of primitive list")
                if isinstance(result.get(key), list):
                    removed = {_scalar_key(v) for v in value if not isinstance(v, (dict, list))}
                    result[key] = [v for v in result[key]
                                   if isinstance(v, (dict, list)) or _scalar_key(v) not in removed]
                continue
            if key.startswith("$"):
                continue  # directives already handled
            if value is None:
                result.pop(key, None)
                continue
            current = result.get(key)
            if key not in result or isinstance(current, dict) != isinstance(value, dict) or \
                    isinstance(current, list) != isinstance(value, list):
                # upstream's mergeMap takes the patch's value as it is where the original has nothing
                # of that shape to merge it into: its nulls and directives dropped, no merge keys
                # looked at
                kept = _without_directives(_without_nulls(value))
                if kept is _DROPPED:
                    result.pop(key, None)
                else:
                    result[key] = kept
                continue
            field_schema = self.schema.field(schema, key)
            if isinstance(value, dict):
                strategy, _ = self.schema.strategy(field_schema)
                if strategy == REPLACE:
                    result[key] = self.merge_map(None, value, field_schema)
                else:
                    result[key] = self.merge_map(current if isinstance(current, dict) else None, value,
                                                 field_schema)
            elif isinstance(value, list):
                result[key] = self.merge_list(current if isinstance(current, list) else [], value, field_schema)
            else:
                result[key] = value
        return result

    # ------------------------------------------------------------ lists

    def merge_list(self, original: list, patch: list, field_schema: Optional[dict]) -> list:
        strategy, merge_key = self.schema.strategy(field_schema)
        if strategy != MERGE:
            return copy.deepcopy(patch)
        if not original and not patch:
            return []
        kind = self._element_kind(original, patch)
        items = self.schema.items(field_schema)
        if kind != "map":
            merged = self._dedupe(original + patch)
            patch_items, server_only = self._partition(merged, patch, "")
            return self._normalize(patch_items, server_only, patch, original, "")
        if not merge_key:
            raise _PatchError("cannot merge lists without merge key for type map")
        original, patch = self._special_elements(original, patch, merge_key)
        merged = list(original)
        for element in patch:
            if merge_key not in element:
                raise _no_merge_key(element, merge_key)
            at = self._find(merged, merge_key, element[merge_key])
            if at is None:
                merged.append(self.merge_map(None, element, items))
            else:
                merged[at] = self.merge_map(merged[at], element, items)
        patch_items, server_only = self._partition(merged, patch, merge_key)
        return self._normalize(patch_items, server_only, patch, original, merge_key)

    def _special_elements(self, original: list, patch: list, merge_key: str) -> tuple[list, list]:
        """Apply ``$patch`` list elements; returns the new original and the plain patch elements."""
        plain, replace = [], False
        for element in patch:
            if DIRECTIVE not in element:
                plain.append(element)
                continue
            directive = element[DIRECTIVE]
            if directive == DELETE:
                if merge_key not in element:
                    raise _no_merge_key(element, merge_key)
                original = [o for o in original
                            if not (merge_key in o and _scalar_key(o[merge_key]) == _scalar_key(element[merge_key]))]
            elif directive == REPLACE:
                replace = True
            elif directive == MERGE:
                raise _PatchError("merging lists cannot yet be specified in the patch")
            else:
                raise _bad_patch_type(directive, element)
        if replace:
            return plain, []
        return original, plain

    @staticmethod
    def _element_kind(*lists: list) -> str:
        kind = None
        for values in lists:
            for value in values:
                current = _kind(value)
                if kind is None:
                    if current == "slice":
                        raise _Unprocessable("lists of lists are not supported")
                    kind = current
                elif current != kind:
                    raise _PatchError(f"list element types are not identical: {_go(list(lists))}")
        if kind is None:
            raise _PatchError("no elements in any of the given slices")
        return kind

    @staticmethod
    def _dedupe(values: list) -> list:
        seen, out = set(), []
        for v in values:
            key = _scalar_key(v)
            if key not in seen:
                seen.add(key)
                out.append(v)
        return out

    @staticmethod
    def _find(values: list, merge_key: str, wanted: Any) -> Optional[int]:
        for i, v in enumerate(values):
            if not isinstance(v, dict):
                raise _PatchError(f"value for key {i} is not a map.")
            if merge_key in v and _scalar_key(v[merge_key]) == _scalar_key(wanted):
                return i
        return None

    @staticmethod
    def _identity(value: Any, merge_key: str) -> Any:
        if merge_key:
            if not isinstance(value, dict) or merge_key not in value:
                return None
            return _scalar_key(value[merge_key])
        return _scalar_key(value) if not isinstance(value, (dict, list)) else None

    def _partition(self, merged: list, by: list, merge_key: str) -> tuple[list, list]:
        wanted = {self._identity(v, merge_key) for v in by}
        wanted.discard(None)
        patch_items: list = []
        server_only: list = []
        for v in merged:
            if merge_key and (not isinstance(v, dict) or merge_key not in v):
                raise _no_merge_key(v if isinstance(v, dict) else {}, merge_key)
            (patch_items if self._identity(v, merge_key) in wanted else server_only).append(v)
        return patch_items, server_only

    def _normalize(self, patch_items: list, server_only: list, patch_order: list, server_order: list,
                   merge_key: str) -> list:
        """Patch items in patch order, server-only items interleaved by their place in the original."""
        def positions(order: list) -> dict:
            out: dict = {}
            for i, v in enumerate(order):
                out.setdefault(self._identity(v, merge_key), i)
            return out

        patch_pos, server_pos = positions(patch_order), positions(server_order)
        big = len(patch_order) + len(server_order) + 1
        left = sorted(server_only, key=lambda v: server_pos.get(self._identity(v, merge_key), big))
        right = sorted(patch_items, key=lambda v: patch_pos.get(self._identity(v, merge_key), big))
        out, i, j = [], 0, 0
        while i < len(left) or j < len(right):
            if j >= len(right):
                out.append(left[i])
                i += 1
            elif i >= len(left):
                out.append(right[j])
                j += 1
            else:
                li = server_pos.get(self._identity(left[i], merge_key))
                ri = server_pos.get(self._identity(right[j], merge_key))
                if li is not None and ri is not None and li < ri:
                    out.append(left[i])
                    i += 1
                else:
                    out.append(right[j])
                    j += 1
        return out

    def _set_element_order(self, result: dict, patch: dict, directive_key: str, schema: Optional[dict]) -> None:
        """Merge the list named by ``$setElementOrder/<field>`` and order it as the directive says."""
        order = patch.pop(directive_key)
        key = directive_key[len(SET_ELEMENT_ORDER):]
        if not isinstance(order, list):
            raise _BadRequest("invalid patch format of setElementOrder list")
        field_schema = self.schema.field(schema, key)
        _, merge_key = self.schema.strategy(field_schema)
        in_original, in_patch = isinstance(result.get(key), list), key in patch
        if in_patch and not isinstance(patch[key], list):
            raise _BadRequest("invalid patch format of setElementOrder list")
        original: list = result[key] if in_original else []
        patch_list = patch.pop(key) if in_patch else []
        self._check_order(patch_list, order, merge_key)
        if not in_original and not in_patch:
            return
        merged = self.merge_list(original, patch_list, field_schema) if in_patch else original
        if not merged:
            result[key] = merged
            return
        patch_items, server_only = self._partition(merged, order, merge_key)
        result[key] = self._normalize(patch_items, server_only, order, original, merge_key)

    def _check_order(self, patch_list: list, order: list, merge_key: str) -> None:
        """Every (non-directive) patch element appears in the order list, in the same relative order."""
        elements = [e for e in patch_list if not (isinstance(e, dict) and DIRECTIVE in e)]
        p = s = 0
        while p < len(elements) and s < len(order):
            if self._identity(elements[p], merge_key) == self._identity(order[s], merge_key):
                p += 1
            s += 1
        if p < len(elements):
            raise _PatchError(f"The order in patch list:\n{_go(patch_list)}\n doesn't match "
                              f"{SET_ELEMENT_ORDER} list:\n{_go(order)}\n")


def apply_strategic_merge_patch(original: dict, patch: dict, schema: Optional[dict],
                                resolve_ref: Optional[Resolver]) -> dict:
    """``original`` with ``patch`` applied (a new dict; the inputs are untouched).

    ``schema`` describes the object (it may be a ``$ref``); ``resolve_ref``
    maps a ref string to its definition.  Errors are StatusErrors shaped as
    upstream's: bad directive formats 400, lists of lists and retainKeys
    mismatches 422, other merge failures (which upstream answers with a
    500 of reason Unknown) 422 as well: they are the client's patch, not a
    server fault.
    """
    if not isinstance(patch, dict):
        raise errors.bad_request("invalid JSON document")
    merger = _Merger(_Schema(resolve_ref))
    try:
        # the merge works on copies of its own (the patch is applied again when a conflict makes the
        # Store retry), so what it returns shares nothing with the inputs
        return merger.merge_map(copy_json(original) if original else {}, copy_json(patch), schema)
    except _BadRequest as e:
        raise errors.bad_request(str(e)) from None
    except _Unprocessable as e:
        raise patch_not_applied(str(e)) from None
    except _PatchError as e:
        raise errors.StatusError(422, "Invalid", str(e), {"causes": [
            {"reason": errors.INVALID, "message": str(e), "field": "patch"}]}) from None
