"""Type checking of ValidatingAdmissionPolicy expressions (upstream's TypeChecker), as far
as kapiserver's CEL engine allows: it has no type checker, so the expressions are
scanned for field selections on ``object``, ``oldObject`` and ``params`` and
each path is walked in the schema of every kind the policy matches.  A field
the schema does not have is reported as cel-go's checker words it::

    apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'
     | object.spec.replicass > 5
     | ...........^

Only kinds named exactly by ``matchConstraints.resourceRules`` are checked
(no wildcards, at most 10), as upstream.  Paths through maps, preserved
unknown fields, int-or-string values, comprehension variables and function
results are not followed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from kapiserver.admission.resources import ResourceMapper
from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.registry.resource_type import ResourceType

MAX_TYPES_TO_CHECK = 10
OBJECT_META_REF = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_TOKEN = re.compile(r"""\s*(?:(?P<str>[rRbB]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"))"""
                    r"""|(?P<ident>[A-Za-z_]\w*)|(?P<num>\d[\w.]*)|(?P<op>\.\?|\[\?|.))""", re.S)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    offset: int


def _tokens(source: str) -> list[_Token]:
    out = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None or m.end() == pos:
            break
        kind = m.lastgroup or "op"
        if kind:
            out.append(_Token(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return out


@dataclass(frozen=True)
class Selection:
    """A field selection ``<root>.a.b`` found in an expression; ``offsets`` of each step's dot."""

    root: str
    steps: tuple[tuple[str, int], ...]  # (field name or None for an index, offset of the '.')


def selections(source: str, roots: tuple[str, ...]) -> list[Selection]:
    tokens = _tokens(source)
    found = []
    for i, tok in enumerate(tokens):
        if tok.kind != "ident" or tok.text not in roots:
            continue
        if i > 0 and tokens[i - 1].text in (".", ".?"):
            continue
        if i + 1 < len(tokens) and tokens[i + 1].text == "(":
            continue
        steps: list[tuple[str, int]] = []
        j = i + 1
        while j < len(tokens):
            t = tokens[j]
            if t.text in (".", ".?") and j + 1 < len(tokens) and tokens[j + 1].kind == "ident":
                if j + 2 < len(tokens) and tokens[j + 2].text == "(":
                    break  # a method call: the rest is its result
                steps.append((tokens[j + 1].text, t.offset))
                j += 2
                continue
            if t.text in ("[", "[?"):
                # an index: a string literal names a field, anything else just descends
                depth, k = 1, j + 1
                while k < len(tokens) and depth:
                    depth += {"[": 1, "[?": 1, "]": -1}.get(tokens[k].text, 0)
                    k += 1
                inner = tokens[j + 1:k - 1]
                key = inner[0].text[1:-1] if len(inner) == 1 and inner[0].kind == "str" else ""
                steps.append(("[" + key, t.offset))
                j = k
                continue
            break
        if steps:
            found.append(Selection(tok.text, tuple(steps)))
    return found


class _Schemas:
    def __init__(self, resolve: Callable[[str], dict]) -> None:
        self.resolve = resolve

    def deref(self, schema: Any) -> Optional[dict]:
        for _ in range(32):
            if not isinstance(schema, dict):
                return None
            if "$ref" in schema:
                schema = self.resolve(schema["$ref"])
                continue
            if schema.get("allOf") and not schema.get("properties"):
                schema = schema["allOf"][0]
                continue
            return schema
        return None


def _location(source: str, offset: int) -> tuple[int, int, str]:
    line = source.count("\n", 0, offset) + 1
    start = source.rfind("\n", 0, offset) + 1
    end = source.find("\n", offset)
    return line, offset - start + 1, source[start:end if end >= 0 else len(source)]


def _undefined(source: str, name: str, offset: int) -> str:
    line, col, text = _location(source, offset)
    return f"ERROR: <input>:{line}:{col}: undefined field '{name}'\n | {text}\n | {'.' * (col - 1)}^"


def check_selection(selection: Selection, schema: dict, schemas: _Schemas, source: str, is_crd: bool
                    ) -> Optional[str]:
    """The first undefined field of ``selection`` in ``schema`` (its cel-go error), or None."""
    current: Optional[dict] = schemas.deref(schema)
    root = True
    for name, offset in selection.steps:
        if current is None:
            return None
        if current.get("x-kubernetes-preserve-unknown-fields") or current.get("x-kubernetes-int-or-string"):
            return None
        index = name.startswith("[")
        key = name[1:] if index else name
        typ = current.get("type")
        if typ == "array" or (index and not key):
            if not index:
                return None  # a field selection on a list: a different error, not reported here
            current = schemas.deref(current.get("items"))
            root = False
            continue
        props = current.get("properties")
        additional = current.get("additionalProperties")
        if root and key in ("apiVersion", "kind"):
            return None
        if root and key == "metadata" and (is_crd or not props or "metadata" not in props):
            current = schemas.deref({"$ref": OBJECT_META_REF})
            root = False
            continue
        if isinstance(props, dict) and key in props:
            current = schemas.deref(props[key])
        elif isinstance(additional, dict):
            current = schemas.deref(additional)
        elif additional is True or (not props and typ in (None, "object")):
            return None
        elif index:
            return None  # indexing an object with a key it lacks is a runtime error, not a type error
        else:
            return _undefined(source, key, offset)
        root = False
    return None


def type_schema(rtype: ResourceType) -> Optional[dict]:
    if rtype.schema is not None:
        return rtype.schema
    if rtype.schema_name:
        return {"$ref": f"#/definitions/{rtype.schema_name}"}
    return None


class TypeChecker:
    def __init__(self, mapper: ResourceMapper, resolve: Callable[[str], dict]) -> None:
        self.mapper = mapper
        self.schemas = _Schemas(resolve)

    def types_to_check(self, policy: dict) -> list[tuple[GroupVersionKind, ResourceType]]:
        constraints = (policy.get("spec") or {}).get("matchConstraints") or {}
        found: dict[GroupVersionKind, ResourceType] = {}
        for rule in constraints.get("resourceRules") or ():
            groups = list(rule.get("apiGroups") or [])
            versions = list(rule.get("apiVersions") or [])
            if any("*" in g for g in groups) or any("*" in v for v in versions):
                continue
            resources = [r for r in rule.get("resources") or [] if "*" not in r and "/" not in r]
            for group in sorted(groups):
                for version in sorted(versions):
                    for resource in sorted(resources):
                        rtype = self.mapper.resource_type(GroupVersionResource(group, version, resource))
                        if rtype is None:
                            continue
                        found[GroupVersionKind(rtype.group, rtype.version, rtype.kind)] = rtype
                        if len(found) >= MAX_TYPES_TO_CHECK:
                            break
        return sorted(found.items(), key=lambda kv: (kv[0].group, kv[0].version, kv[0].kind))

    def check_expression(self, source: str, types: list[tuple[GroupVersionKind, ResourceType]],
                         params: Optional[ResourceType]) -> str:
        """upstream's TypeCheckingResults.String(): one ``<gvk>: <issues>\\n`` per kind with issues."""
        results = []
        roots = ("object", "oldObject", "params") if params is not None else ("object", "oldObject")
        found = selections(source, roots)
        for gvk, rtype in types:
            issues = []
            for selection in found:
                target = params if selection.root == "params" else rtype
                assert target is not None
                schema = type_schema(target)
                if schema is None:
                    continue
                issue = check_selection(selection, schema, self.schemas, source, target.is_crd)
                if issue:
                    issues.append(issue)
            if issues:
                results.append(f"{gvk}: " + "\n".join(issues) + "\n")
        return "\n".join(results)

    def check(self, policy: dict) -> list[dict]:
        """``status.typeChecking.expressionWarnings`` of ``policy``."""
        types = self.types_to_check(policy)
        if not types:
            return []
        spec = policy.get("spec") or {}
        params = None
        param_kind = spec.get("paramKind")
        if isinstance(param_kind, dict):
            group, _, version = (param_kind.get("apiVersion") or "").rpartition("/")
            params = self.mapper.for_kind(group, version, param_kind.get("kind") or "")
        warnings = []
        for i, validation in enumerate(spec.get("validations") or []):
            for field_name in ("expression", "messageExpression"):
                source = (validation or {}).get(field_name) or ""
                if not source:
                    continue
                text = self.check_expression(source, types, params)
                if text:
                    warnings.append({"fieldRef": f"spec.validations[{i}].{field_name}", "warning": text})
        return warnings
