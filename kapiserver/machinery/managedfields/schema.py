"""The merge semantics of a kind, compiled from its OpenAPI schema.

This is kube-openapi's ``schemaconv`` as upstream feeds structured-merge-diff:
an :class:`Atom` says whether a value may be a scalar, a list or a map, and
how lists and maps merge:

* lists: ``x-kubernetes-list-type`` ``atomic`` (the default), ``set``
  (items by value) or ``map`` with ``x-kubernetes-list-map-keys``; without a
  list type, ``x-kubernetes-patch-strategy: merge`` (with
  ``x-kubernetes-patch-merge-key``) makes a built-in list associative too;
* maps: granular (each field owned separately) unless
  ``x-kubernetes-map-type: atomic``; a map without declared properties, or
  under ``x-kubernetes-preserve-unknown-fields``, takes any field
  ("deduced"); one with properties and no ``additionalProperties`` rejects
  undeclared fields.

Named definitions (built-in kinds, ObjectMeta inside custom resources) are
compiled once, lazily, and shared; a ``$ref`` carrying its own
``x-kubernetes-map-type`` overrides the referenced map's relationship.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

SCALAR_NUMERIC, SCALAR_STRING, SCALAR_BOOLEAN, SCALAR_UNTYPED = "numeric", "string", "boolean", "untyped"
ATOMIC, ASSOCIATIVE, SEPARABLE, GRANULAR = "atomic", "associative", "separable", ""

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

# Defaults upstream's Go OpenAPI declares for list-map key fields that the
# published definitions drop: an item that omits such a key still has one
# (a container port without protocol is ``k:{"containerPort":80,"protocol":"TCP"}``).
BUILTIN_KEY_DEFAULTS: dict[tuple[str, str], Any] = {
    ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
    ("io.k8s.api.core.v1.ServicePort", "protocol"): "TCP",
    ("io.k8s.api.core.v1.LocalObjectReference", "name"): "",
}


_GO_ZERO: dict[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False}


class MapType:
    __slots__ = ("fields", "defaults", "elem", "relationship")

    def __init__(self, fields: dict[str, "TypeRef"], defaults: dict[str, Any], elem: Optional["TypeRef"],
                 relationship: str) -> None:
        self.fields = fields
        self.defaults = defaults
        # None: fields not declared are rejected (validation) / not typed
        self.elem = elem
        self.relationship = relationship

    def with_relationship(self, relationship: str) -> "MapType":
        return MapType(self.fields, self.defaults, self.elem, relationship)


class ListType:
    __slots__ = ("elem", "relationship", "keys")

    def __init__(self, elem: "TypeRef", relationship: str, keys: tuple[str, ...]) -> None:
        self.elem = elem
        self.relationship = relationship
        self.keys = keys

    def with_relationship(self, relationship: str) -> "ListType":
        return ListType(self.elem, relationship, self.keys)


class Atom:
    """What a value of this type may be; an untyped value may be any of the three."""

    __slots__ = ("scalar", "map", "list", "_scalar_only", "_map_only", "_list_only")

    def __init__(self, scalar: Optional[str] = None, map: Optional[MapType] = None,
                 list: Optional[ListType] = None) -> None:
        self.scalar = scalar
        self.map = map
        self.list = list
        self._scalar_only: Optional[Atom] = None
        self._map_only: Optional[Atom] = None
        self._list_only: Optional[Atom] = None

    def deduce(self, value: Any) -> "Atom":
        """The part of this atom a value selects (upstream's deduceAtom)."""
        if isinstance(value, dict):
            if self.map is not None and (self.scalar is not None or self.list is not None):
                if self._map_only is None:
                    self._map_only = Atom(map=self.map)
                return self._map_only
        elif isinstance(value, list):
            if self.list is not None and (self.scalar is not None or self.map is not None):
                if self._list_only is None:
                    self._list_only = Atom(list=self.list)
                return self._list_only
        elif isinstance(value, (str, int, float)):  # bool is an int
            if self.scalar is not None and (self.map is not None or self.list is not None):
                if self._scalar_only is None:
                    self._scalar_only = Atom(scalar=self.scalar)
                return self._scalar_only
        return self

    def same(self, other: "Atom") -> bool:
        return self is other or (self.scalar == other.scalar and self.map is other.map and self.list is other.list)


class TypeRef:
    """A reference to an atom: a named definition (resolved lazily) or an inlined one."""

    __slots__ = ("_atom", "_resolve")

    def __init__(self, atom: Optional[Atom] = None, resolve: Optional[Callable[[], Atom]] = None) -> None:
        self._atom = atom
        self._resolve = resolve

    @property
    def atom(self) -> Atom:
        found = self._atom
        if found is None:
            assert self._resolve is not None
            found = self._atom = self._resolve()
            self._resolve = None
        return found


# The two shared "untyped" types of kube-openapi: any atomic value, and a
# granular map of anything (what undeclared, schemaless content is).
UNTYPED_ATOMIC = TypeRef()
DEDUCED = TypeRef()
UNTYPED_ATOMIC._atom = Atom(SCALAR_UNTYPED, MapType({}, {}, UNTYPED_ATOMIC, ATOMIC),
                            ListType(UNTYPED_ATOMIC, ATOMIC, ()))
DEDUCED._atom = Atom(SCALAR_UNTYPED, MapType({}, {}, DEDUCED, SEPARABLE), ListType(UNTYPED_ATOMIC, ATOMIC, ()))


def is_untyped_deduced_map(m: MapType) -> bool:
    return m.elem is DEDUCED and not m.fields


def _map_relationship(ext: dict) -> str:
    kind = ext.get("x-kubernetes-map-type")
    if kind == "atomic":
        return ATOMIC
    if kind == "granular":
        return SEPARABLE
    return GRANULAR


def _list_relationship(node: dict) -> tuple[str, tuple[str, ...]]:
    list_type = node.get("x-kubernetes-list-type")
    if list_type is not None:
        if list_type == "set":
            return ASSOCIATIVE, ()
        if list_type == "map":
            keys = node.get("x-kubernetes-list-map-keys") or []
            return ASSOCIATIVE, tuple(k for k in keys if isinstance(k, str))
        return ATOMIC, ()
    strategy = node.get("x-kubernetes-patch-strategy")
    if strategy in ("merge", "merge,retainKeys"):
        merge_key = node.get("x-kubernetes-patch-merge-key")
        return ASSOCIATIVE, (merge_key,) if isinstance(merge_key, str) else ()
    return ATOMIC, ()


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


class Compiler:
    """Compiles OpenAPI schema nodes into atoms.

    ``lookup(name)`` returns a named definition (the built-in definitions);
    named atoms are cached per compiler, so one compiler serves every
    built-in kind.
    """

    def __init__(self, lookup: Callable[[str], dict], key_defaults: Optional[dict[tuple[str, str], Any]] = None,
                 go_zero_defaults: bool = False) -> None:
        self.lookup = lookup
        self.key_defaults = key_defaults or {}
        # Go types' definitions: a required string, number or boolean defaults to its zero value, as
        # kube-openapi declares for a field without omitempty (mustEnforceDefault), so a list item
        # that omits such a key has it anyway (a condition without type is k:{"type":""})
        self.go_zero_defaults = go_zero_defaults
        self._named: dict[tuple[str, str], TypeRef] = {}

    def named(self, name: str, relationship: Optional[str] = None) -> TypeRef:
        """The type of definition ``name``, its map relationship overridden if given."""
        cache_key = (name, relationship if relationship is not None else "-")
        found = self._named.get(cache_key)
        if found is None:
            if relationship is None:
                found = TypeRef(resolve=lambda: self._compile_named(name))
            else:
                base = self.named(name)

                def override() -> Atom:
                    atom = base.atom
                    if atom.map is not None:
                        return Atom(atom.scalar, atom.map.with_relationship(relationship), atom.list)
                    if atom.list is not None:
                        return Atom(atom.scalar, atom.map, atom.list.with_relationship(relationship))
                    return atom
                found = TypeRef(resolve=override)
            self._named[cache_key] = found
        return found

    def _compile_named(self, name: str) -> Atom:
        if name == QUANTITY:
            return Atom(SCALAR_UNTYPED)
        if name == RAW_EXTENSION:
            return UNTYPED_ATOMIC.atom
        try:
            node = self.lookup(name)
        except KeyError:
            return DEDUCED.atom
        return self.compile(node, False, name)

    def ref(self, node: Any, preserve_unknown: bool) -> TypeRef:
        """A property's type: a named reference (``$ref`` or ``allOf: [{$ref}]``) or an inlined atom."""
        if not isinstance(node, dict):
            return DEDUCED
        ref = node.get("$ref")
        if not isinstance(ref, str):
            all_of = node.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
                ref = all_of[0].get("$ref")
        if isinstance(ref, str):
            relationship = _map_relationship(node)
            return self.named(_ref_name(ref), relationship or None)
        return TypeRef(self.compile(node, preserve_unknown))

    def compile(self, node: dict, preserve_unknown: bool, name: str = "") -> Atom:
        if node.get("x-kubernetes-preserve-unknown-fields") is True:
            preserve_unknown = True
        typ = node.get("type")
        if isinstance(typ, list):
            typ = next((t for t in typ if t != "null"), "")
        if not typ:
            return Atom(SCALAR_UNTYPED, self._map(node, preserve_unknown, name), self._list(node, preserve_unknown))
        if typ == "object":
            return Atom(map=self._map(node, preserve_unknown, name))
        if typ == "array":
            return Atom(list=self._list(node, preserve_unknown))
        if typ in ("integer", "number"):
            return Atom(SCALAR_NUMERIC)
        if typ == "boolean":
            return Atom(SCALAR_BOOLEAN)
        if typ == "string":
            return Atom(SCALAR_STRING if node.get("format", "") in ("", "byte") else SCALAR_UNTYPED)
        return Atom(SCALAR_UNTYPED)

    def _map(self, node: dict, preserve_unknown: bool, name: str) -> MapType:
        props = node.get("properties") or {}
        fields: dict[str, TypeRef] = {}
        defaults: dict[str, Any] = {}
        required = node.get("required") if self.go_zero_defaults else None
        for prop, sub in props.items():
            fields[prop] = self.ref(sub, preserve_unknown)
            if isinstance(sub, dict) and "default" in sub:
                defaults[prop] = sub["default"]
            elif (name, prop) in self.key_defaults:
                defaults[prop] = self.key_defaults[(name, prop)]
            elif required and prop in required and isinstance(sub, dict) and sub.get("type") in _GO_ZERO:
                defaults[prop] = _GO_ZERO[sub["type"]]
        extra = node.get("additionalProperties")
        elem: Optional[TypeRef]
        if extra is None:
            elem = DEDUCED if (preserve_unknown or not props) else None
        elif isinstance(extra, dict):
            elem = self.ref(extra, preserve_unknown)
        elif extra is True:
            elem = DEDUCED
        else:
            elem = None
        return MapType(fields, defaults, elem, _map_relationship(node))

    def _list(self, node: dict, preserve_unknown: bool) -> ListType:
        relationship, keys = _list_relationship(node)
        items = node.get("items")
        if isinstance(items, list):
            items = items[0] if items else None
        elem = self.ref(items, preserve_unknown) if isinstance(items, dict) else UNTYPED_ATOMIC
        return ListType(elem, relationship, keys)


def crd_root(schema: Optional[dict]) -> dict:
    """A CRD version's structural schema as upstream publishes it for apply:
    ``apiVersion``/``kind`` strings and ObjectMeta at the root and in every
    ``x-kubernetes-embedded-resource``."""
    if not isinstance(schema, dict):
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                "properties": _type_meta_properties()}

    def walk(node: Any, root: bool) -> Any:
        if not isinstance(node, dict):
            return node
        out = dict(node)
        props = node.get("properties")
        if isinstance(props, dict):
            out["properties"] = {k: walk(v, False) for k, v in props.items()}
        if isinstance(node.get("items"), dict):
            out["items"] = walk(node["items"], False)
        if isinstance(node.get("additionalProperties"), dict):
            out["additionalProperties"] = walk(node["additionalProperties"], False)
        if root or node.get("x-kubernetes-embedded-resource") is True:
            out["properties"] = {**(out.get("properties") or {}), **_type_meta_properties()}
        return out
    return walk(schema, True)


def _type_meta_properties() -> dict:
    return {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"$ref": "#/definitions/" + OBJECT_META}}
