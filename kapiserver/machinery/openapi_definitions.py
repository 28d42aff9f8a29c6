"""The built-in OpenAPI definitions, as upstream publishes them.

The schemas of built-in kinds come from the ``kubernetes-validate`` package,
which ships upstream's definitions rewritten for JSON-Schema validators:
optional fields typed ``["T", "null"]``, ``$ref`` into ``#/$defs/``,
``enum`` constraints injected on ``apiVersion``/``kind`` and the two
"either" scalars (IntOrString, Quantity) as ``oneOf``.  :func:`normalize`
undoes all of that so what we serve on ``/openapi/v2`` is upstream's
swagger; :meth:`Definitions.v3_schema` gives the OpenAPI v3 form.

Loading takes ~0.1 s, so the server loads it lazily on first use
(:func:`load_definitions` caches the result for the process).  Each schema
is parsed and normalized when it is first asked for: a start reads about 50
of the 638.  Parsing the whole file took 9 ms of every start's CPU and held
2.4 MiB of schemas no start reads; :class:`RawDefinitions` finds where each
schema is in the package's pretty-printed file and parses one when asked.
"""
from __future__ import annotations

import copy
import functools
import importlib.util
import os
import threading
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Union

import orjson

from kapiserver import kube_version


DEFINITIONS_FILE = f"{kube_version.SCHEMA_DIRECTORY}/_definitions.json"

V2_PREFIX = "#/definitions/"
V3_PREFIX = "#/components/schemas/"
DEFS_PREFIX = "#/$defs/"

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
LIST_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
STATUS = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
DELETE_OPTIONS = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
WATCH_EVENT = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"
PATCH = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
SCALE = "io.k8s.api.autoscaling.v1.Scale"

# The package drops the descriptions of the two replaced scalars; ours say
# what a client may send.
_INT_OR_STRING_DESCRIPTION = (
    "IntOrString holds either an int32 or a string; JSON and YAML carry the inner value as is, so a field "
    "of this type accepts a number (8080) or a name (\"http\").")
_QUANTITY_DESCRIPTION = (
    "Quantity is a fixed-point number written as a string such as \"1.5\", \"500m\", \"2Gi\" or \"1e3\": "
    "a signed decimal number followed by an optional binary suffix (Ki, Mi, Gi, Ti, Pi, Ei), decimal suffix "
    "(m, k, M, G, T, P, E) or exponent (e<n>, E<n>). At most 3 decimal places are kept and values are "
    "re-emitted in canonical form (1.5 as \"1500m\", 1.5Gi as \"1536Mi\").")


def _normalize_node(node: Any) -> Any:
    """One schema node back to upstream's form (recursive)."""
    if isinstance(node, list):
        return [_normalize_node(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            out[key] = kept[0] if len(kept) == 1 else kept
        elif key == "$ref" and isinstance(value, str) and value.startswith(DEFS_PREFIX):
            out[key] = V2_PREFIX + value[len(DEFS_PREFIX):]
        elif key == "properties" and isinstance(value, dict):
            props = {}
            for name, prop in value.items():
                prop = _normalize_node(prop)
                if name in ("apiVersion", "kind") and isinstance(prop, dict):
                    prop.pop("enum", None)  # injected by the package, not upstream's
                props[name] = prop
            out[key] = props
        else:
            out[key] = _normalize_node(value)
    return out


# the two "either" scalars, as upstream declares them (the package's oneOf replaced)
_REPLACED: dict[str, dict] = {
    INT_OR_STRING: {"description": _INT_OR_STRING_DESCRIPTION, "format": "int-or-string", "type": "string"},
    QUANTITY: {"description": _QUANTITY_DESCRIPTION, "type": "string"},
}


def ref_name(ref: str) -> str:
    """The definition name a ``$ref`` points to, whichever document style it uses."""
    for prefix in (V2_PREFIX, V3_PREFIX, DEFS_PREFIX):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    raise KeyError(ref)


def iter_refs(node: Any) -> Iterable[str]:
    """Every ``$ref`` string inside a schema."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            ref = cur.get("$ref")
            if isinstance(ref, str):
                yield ref
            stack.extend(v for v in cur.values() if isinstance(v, (dict, list)))
        elif isinstance(cur, list):
            stack.extend(v for v in cur if isinstance(v, (dict, list)))


def to_v3(node: Any) -> Any:
    """A v2-style schema in OpenAPI v3 form, the way kube-openapi converts it.

    Refs point into ``#/components/schemas/``; a ``$ref`` with sibling
    keywords (a description) becomes ``allOf: [{$ref}]`` since v3 ignores
    siblings of ``$ref``.
    """
    if isinstance(node, list):
        return [to_v3(x) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: to_v3(prop) for name, prop in value.items()}
        elif key == "$ref" and isinstance(value, str):
            out[key] = V3_PREFIX + ref_name(value) if value.startswith(("#/definitions/", "#/$defs/")) else value
        else:
            out[key] = to_v3(value)
    if "$ref" in out and len(out) > 1:
        ref = out.pop("$ref")
        out = {"allOf": [{"$ref": ref}], **out}
    return out


GVK = "x-kubernetes-group-version-kind"
# the package's file as ``json.dumps(indent=2)`` writes it: the definitions are the keys of
# "$defs", the only lines that start with four spaces and a quote
_DEFS_HEADER = b'{\n  "$defs": {\n'
_ENTRY = b'\n    "'
_DEFS_END = b"\n  }"
_GVK_ENTRY = b'\n      "' + GVK.encode() + b'": '
_GVK_END = b"\n      ]"
Span = tuple[int, int]


def locate(data: bytes) -> Optional[dict[str, Span]]:
    """Where each schema's JSON is in the package's file (name -> byte span), found without
    parsing it; None when the file is not laid out as :data:`_DEFS_HEADER` describes."""
    if not data.startswith(_DEFS_HEADER):
        return None
    spans: dict[str, Span] = {}
    at = len(_DEFS_HEADER) - 1
    while True:
        name_end = data.find(b'": ', at + len(_ENTRY))
        start = name_end + 3
        following = data.find(_ENTRY, start)
        end = following - 1 if following >= 0 else data.find(_DEFS_END, start)
        name = data[at + len(_ENTRY):name_end]
        if (name_end < 0 or end < 0 or b"\\" in name or b"\n" in name or data[start:start + 1] != b"{"
                or data[end - 1:end] != b"}" or (following >= 0 and data[end:following] != b",")):
            return None
        spans[name.decode()] = (start, end)
        if following < 0:
            return spans
        at = following


class RawDefinitions(Mapping[str, dict]):
    """The package's schemas by name, each parsed when read: from its span of the file
    (read again for it), or, when the file is not laid out as expected, from the whole file
    parsed at once."""

    def __init__(self, data: bytes, read_span: Optional[Callable[[Span], bytes]]) -> None:
        spans = locate(data) if read_span is not None else None
        self._read_span = read_span
        self._entries: dict[str, Union[Span, dict]] = \
            dict(spans) if spans is not None else orjson.loads(data)["$defs"]

    def __getitem__(self, name: str) -> dict:
        entry = self._entries[name]
        if isinstance(entry, dict):
            return entry
        assert self._read_span is not None
        return orjson.loads(self._read_span(entry))

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def group_version_kinds(self) -> dict[str, list]:
        """Each schema's ``x-kubernetes-group-version-kind`` (if it has one), without parsing the
        rest of the schemas: the file read once, each list parsed from its lines."""
        spans = {name: entry for name, entry in self._entries.items() if not isinstance(entry, dict)}
        found = {name: entry[GVK] for name, entry in self._entries.items()
                 if isinstance(entry, dict) and entry.get(GVK)}
        if spans:
            assert self._read_span is not None
            first = min(start for start, _ in spans.values())
            data = self._read_span((first, max(end for _, end in spans.values())))
            for name, (start, end) in spans.items():
                at = data.find(_GVK_ENTRY, start - first, end - first)
                if at >= 0:
                    close = data.find(_GVK_END, at, end - first)
                    found[name] = orjson.loads(data[at + len(_GVK_ENTRY):close + len(_GVK_END)])
        return found


class Definitions:
    """Upstream's named schemas (v2 form: refs ``#/definitions/<name>``), from the package's
    ``$defs`` (``raw``), each turned back into upstream's form when first asked for."""

    def __init__(self, raw: RawDefinitions) -> None:
        # the package's form of the schemas not asked for yet; a normalized schema is put into
        # _defs before its raw form leaves _raw, so every name is always in one of them
        self._raw = raw
        self._order = list(raw)  # the package's order (the first owner of a kind is the first listed)
        self._defs: dict[str, dict] = {}
        for name, schema in _REPLACED.items():
            if name in raw:
                self._defs[name] = dict(schema)
                del raw[name]
        self._lock = threading.Lock()  # decoders on threads ask for schemas too
        self._gvk: dict[tuple[str, str, str], str] | None = None
        self._v3: dict[str, dict] = {}
        # (schema, property) -> description, and the schema last read for one (property_description)
        self._descriptions: dict[tuple[str, str], str] = {}
        self._last_read: tuple[str, dict] = ("", {})

    def get(self, name: str) -> dict:
        """The schema named ``name`` (KeyError if unknown). Do not mutate it."""
        found = self._defs.get(name)
        if found is None:
            with self._lock:
                found = self._defs.get(name)
                if found is None:
                    found = self._defs[name] = _normalize_node(self._raw[name])
                    del self._raw[name]
        return found

    def property_description(self, name: str, prop: str) -> str:
        """The description of property ``prop`` of schema ``name`` ("" when it has none; KeyError
        if there is no such schema), read without keeping the schema: the built-in kinds' table
        columns take their descriptions from about 60 schemas as they are imported, and half of
        those nothing else reads (about 0.2 MiB, normalized and kept).  A kind's columns are made
        together, so the schema last read serves the next columns' descriptions."""
        key = (name, prop)
        found = self._descriptions.get(key)
        if found is None:
            schema = self._defs.get(name)
            if schema is None:
                with self._lock:
                    schema = self._defs.get(name)
                    if schema is None:
                        if self._last_read[0] != name:
                            self._last_read = (name, self._raw[name])
                        schema = self._last_read[1]
            found = self._descriptions[key] = \
                ((schema.get("properties") or {}).get(prop) or {}).get("description", "")
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._raw or name in self._defs  # (in this order: see _raw)

    def names(self) -> list[str]:
        with self._lock:
            return sorted([*self._raw, *self._defs])

    def resolve_ref(self, ref: str) -> dict:
        """The schema a ``$ref`` points to: ``#/definitions/X``, ``#/components/schemas/X`` or ``#/$defs/X``."""
        return self.get(ref_name(ref))

    def gvk_index(self) -> dict[tuple[str, str, str], str]:
        """(group, version, kind) → definition name, from ``x-kubernetes-group-version-kind``
        (which normalizing leaves as it is, so the raw schemas are read as they are)."""
        if self._gvk is None:
            index: dict[tuple[str, str, str], str] = {}
            with self._lock:
                unread = self._raw.group_version_kinds()
                kinds = [(name, self._defs[name].get(GVK) or [] if name in self._defs else unread.get(name) or [])
                         for name in self._order]
            for name, listed in kinds:
                for gvk in listed:
                    key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                    # meta types (WatchEvent, DeleteOptions) list every group; keep the first owner
                    index.setdefault(key, name)
            self._gvk = index
        return self._gvk

    def v3_schema(self, name: str) -> dict:
        """The schema named ``name`` in OpenAPI v3 form (cached)."""
        found = self._v3.get(name)
        if found is None:
            found = self._v3[name] = to_v3(self.get(name))
        return found

    def closure(self, roots: Iterable[str]) -> set[str]:
        """Names of ``roots`` and of every definition they reference, transitively."""
        seen: set[str] = set()
        todo = [r for r in roots if r in self]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            for ref in iter_refs(self.get(name)):
                try:
                    target = ref_name(ref)
                except KeyError:
                    continue
                if target not in seen and target in self:
                    todo.append(target)
        return seen

    def copy(self, name: str) -> dict:
        """A deep copy of one schema, safe to modify."""
        return copy.deepcopy(self.get(name))


def _span_reader(path: str, size: int) -> Callable[[Span], bytes]:
    def read_span(span: Span) -> bytes:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size != size:  # reinstalled under a running server: spans are stale
                raise RuntimeError(f"{path} changed while the server ran; restart it")
            f.seek(span[0])
            return f.read(span[1] - span[0])
    return read_span


def read_raw() -> RawDefinitions:
    """The package's ``$defs`` as shipped.

    The file is located without importing ``kubernetes_validate`` (whose
    import pulls in jsonschema and costs more than reading the file).
    """
    spec = importlib.util.find_spec("kubernetes_validate")
    locations = list(spec.submodule_search_locations or ()) if spec else []
    path = os.path.join(locations[0], DEFINITIONS_FILE) if locations else ""
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        return RawDefinitions(data, _span_reader(path, len(data)))
    # installed as a zip: importlib.resources reads it (imported only then), parsed whole
    from importlib import resources
    return RawDefinitions(resources.files("kubernetes_validate").joinpath(DEFINITIONS_FILE).read_bytes(), None)


@functools.lru_cache(maxsize=1)
def load_definitions() -> Definitions:
    """The process-wide built-in definitions (loaded on first call, ~0.1 s)."""
    return Definitions(read_raw())
