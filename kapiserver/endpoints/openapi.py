"""The ``/openapi/v2`` and ``/openapi/v3`` documents, generated from resource types.

Schemas come from the built-in definitions (:mod:`kapiserver.machinery.openapi_definitions`)
or, for custom resources, from the CRD's schema under upstream's component
name ``<reversed group>.<version>.<Kind>``.  Paths and operations are derived
from each :class:`ResourceType` the way kube-apiserver's installer lays them
out (collection, item, all-namespaces list, legacy ``watch/`` paths, status
and scale subresources).  Clients depend on details here: kubectl finds a
kind's schema through ``x-kubernetes-group-version-kind`` and decides whether
the server does field validation by looking for a ``fieldValidation``
parameter on the kind's PATCH operation.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable, Optional

import orjson
from twisted.internet import defer, threads
from twisted.python import failure

from kapiserver.apiextensions.openapi import TypeMetaDocs
from kapiserver.apiextensions.openapi import kind_schema as crd_kind_schema
from kapiserver.machinery import openapi_v2_protobuf
from kapiserver.machinery.openapi_definitions import (DELETE_OPTIONS, INT_OR_STRING, LIST_META, OBJECT_META, PATCH,
                                                      QUANTITY, SCALE, STATUS, WATCH_EVENT, Definitions, iter_refs,
                                                      ref_name, to_v3)
from kapiserver.registry.resource_type import ResourceType
from kapiserver import kube_version

INFO_VERSION = kube_version.OPENAPI_INFO_VERSION
API_RESOURCE_LIST = "io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList"
SCALE_GVK = {"group": "autoscaling", "kind": "Scale", "version": "v1"}

# Always part of a group-version document (the operations reference them).
META_SCHEMAS = (STATUS, DELETE_OPTIONS, WATCH_EVENT, PATCH, API_RESOURCE_LIST, OBJECT_META, LIST_META)

PRODUCES = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"]
PRODUCES_WATCH = PRODUCES + ["application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"]
PRODUCES_CRD = ["application/json", "application/yaml"]
PRODUCES_CRD_WATCH = PRODUCES_CRD + ["application/json;stream=watch"]
PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
PATCH_TYPES_CRD = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]


# ------------------------------------------------------------------ parameters

def _q(name: str, typ: str, description: str) -> dict:
    return {"name": name, "in": "query", "type": typ, "description": description, "uniqueItems": True}


QUERY = {p["name"]: p for p in (
    _q("pretty", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent "
       "indicates a browser or command-line HTTP tool (curl and wget)."),
    _q("dryRun", "string", "When present, the request is validated and admitted but not persisted. The only "
       "valid value is All."),
    _q("fieldManager", "string", "The name of the actor making the change, recorded in managedFields. At most "
       "128 printable characters. Required for apply patches."),
    _q("fieldValidation", "string", "What to do with fields the schema does not know and with duplicate fields: "
       "Ignore drops them silently, Warn (the default) drops them and sends a Warning header for each, Strict "
       "fails the request with BadRequest."),
    _q("force", "boolean", "Apply patches only: take ownership of fields other managers own instead of "
       "failing with a conflict. Must be unset for other patch types."),
    _q("labelSelector", "string", "Only objects whose labels match this selector. Defaults to everything."),
    _q("fieldSelector", "string", "Only objects whose fields match this selector. Defaults to everything."),
    _q("limit", "integer", "The most objects a list returns; when more exist the list carries a continue "
       "token for the next chunk."),
    _q("continue", "string", "The continue token of a previous chunked list, to fetch the next chunk."),
    _q("resourceVersion", "string", "Which version of the data the request may be served from; see "
       "resourceVersionMatch. For a watch, where to start watching from."),
    _q("resourceVersionMatch", "string", "How resourceVersion applies to a list: Exact or NotOlderThan. "
       "Requires resourceVersion."),
    _q("watch", "boolean", "Stream add, update and delete notifications for the described objects instead "
       "of listing them."),
    _q("timeoutSeconds", "integer", "How long a list or watch call may last, whatever the activity."),
    _q("allowWatchBookmarks", "boolean", "Ask for BOOKMARK watch events, which carry only a resourceVersion. "
       "Servers may send them at their own pace."),
    _q("sendInitialEvents", "boolean", "With watch=true, begin the stream with ADDED events for the current "
       "objects followed by a BOOKMARK annotated k8s.io/initial-events-end. Requires resourceVersionMatch="
       "NotOlderThan."),
    _q("gracePeriodSeconds", "integer", "Seconds before the object is deleted; zero deletes at once. Defaults "
       "to the kind's own grace period."),
    _q("orphanDependents", "boolean", "Deprecated, use propagationPolicy: whether dependents are orphaned "
       "instead of garbage collected."),
    _q("propagationPolicy", "string", "How dependents are garbage collected: Orphan, Background or "
       "Foreground."),
    _q("ignoreStoreReadErrorWithClusterBreakingPotential", "boolean", "Delete an object that cannot be "
       "decoded from storage, skipping the usual checks. Dangerous."),
)}

PATH_NAME = {"name": "name", "in": "path", "required": True, "type": "string", "uniqueItems": True}
PATH_NAMESPACE = {"name": "namespace", "in": "path", "required": True, "type": "string", "uniqueItems": True,
                  "description": "object name and auth scope, such as for teams and projects"}

LIST_PARAMS = ("allowWatchBookmarks", "continue", "fieldSelector", "labelSelector", "limit", "resourceVersion",
               "resourceVersionMatch", "sendInitialEvents", "timeoutSeconds", "watch")
WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
DELETE_PARAMS = ("dryRun", "gracePeriodSeconds", "ignoreStoreReadErrorWithClusterBreakingPotential",
                 "orphanDependents", "propagationPolicy")
DELETECOLLECTION_PARAMS = ("continue", "dryRun", "fieldSelector", "gracePeriodSeconds",
                           "ignoreStoreReadErrorWithClusterBreakingPotential", "labelSelector", "limit",
                           "orphanDependents", "propagationPolicy", "resourceVersion", "resourceVersionMatch",
                           "sendInitialEvents", "timeoutSeconds")


# ------------------------------------------------------------------ naming

def _words(group: str) -> list[str]:
    if not group:
        return ["core"]
    if group.endswith(".k8s.io"):
        group = group[: -len(".k8s.io")]
    return [w for w in group.replace("-", ".").split(".") if w]


def op_group_name(group: str, version: str) -> str:
    """``CoreV1``, ``CoordinationV1``, ``CertManagerIoV1``: the group part of operation ids."""
    return "".join(w[:1].upper() + w[1:] for w in _words(group)) + version[:1].upper() + version[1:]


def tag_name(group: str, version: str) -> str:
    """``core_v1``, ``rbacAuthorization_v1``: the operations' tag."""
    words = _words(group)
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:]) + "_" + version


def crd_schema_name(group: str, version: str, kind: str) -> str:
    """Upstream's component name of a custom kind: ``io.cert-manager.v1.Certificate``."""
    return ".".join(reversed(group.split("."))) + f".{version}.{kind}"


def group_version_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the key in the v3 index."""
    return f"api/{version}" if not group else f"apis/{group}/{version}"


# ------------------------------------------------------------------ schemas

class _Schemas:
    """The schema names of a set of resource types, and the extra (custom) schemas they need."""

    def __init__(self, types: list[ResourceType], defs: Definitions) -> None:
        self.defs = defs
        self.kind_name: dict[int, str] = {}
        self.list_name: dict[int, str] = {}
        self.extra: dict[str, dict] = {}  # v2-style refs
        self.extra_v3: dict[str, dict] = {}  # where the v3 schema differs (still v2-style refs)
        for rtype in types:
            self._add(rtype)

    def _add(self, rtype: ResourceType) -> None:
        gvk = [{"group": rtype.group, "kind": rtype.kind, "version": rtype.version}]
        lgvk = [{"group": rtype.group, "kind": rtype.list_kind, "version": rtype.version}]
        if rtype.schema_name and rtype.schema_name in self.defs:
            name = rtype.schema_name
            list_name = name.rsplit(".", 1)[0] + "." + rtype.list_kind
        else:
            name = rtype.schema_name or crd_schema_name(rtype.group, rtype.version, rtype.kind)
            list_name = name.rsplit(".", 1)[0] + "." + rtype.list_kind
            self.extra[name] = self._custom_kind_schema(rtype, gvk, v2=True)
            self.extra_v3[name] = self._custom_kind_schema(rtype, gvk, v2=False)
        if list_name not in self.defs:
            self.extra[list_name] = self._list_schema(rtype, name, lgvk)
            if rtype.is_crd:
                self.extra[list_name]["x-kubernetes-selectable-fields"] = _selectable_fields(rtype)
        self.kind_name[id(rtype)] = name
        self.list_name[id(rtype)] = list_name

    def _description(self, schema: str, prop: str) -> str:
        try:
            return self.defs.get(schema)["properties"][prop].get("description", "")
        except KeyError:
            return ""

    def _custom_kind_schema(self, rtype: ResourceType, gvk: list, v2: bool) -> dict:
        """A custom resource's kind as upstream's CRD OpenAPI builder publishes it."""
        docs = TypeMetaDocs(self._description(STATUS, "apiVersion"), self._description(STATUS, "kind"),
                            self._description("io.k8s.api.core.v1.ConfigMap", "metadata"))
        schema = crd_kind_schema(rtype.schema, docs, v2=v2)
        schema["x-kubernetes-group-version-kind"] = gvk
        schema["x-kubernetes-selectable-fields"] = _selectable_fields(rtype)
        return schema

    def _list_schema(self, rtype: ResourceType, item: str, gvk: list) -> dict:
        return {
            "description": f"{rtype.list_kind} is a list of {rtype.kind}",
            "properties": {
                "apiVersion": {"description": self._description(STATUS, "apiVersion"), "type": "string"},
                "items": {"description": f"List of {rtype.plural}. More info: https://git.k8s.io/community/"
                          "contributors/devel/sig-architecture/api-conventions.md",
                          "items": {"$ref": "#/definitions/" + item}, "type": "array"},
                "kind": {"description": self._description(STATUS, "kind"), "type": "string"},
                "metadata": {"$ref": "#/definitions/" + LIST_META,
                             "description": self._description(STATUS, "metadata")},
            },
            "required": ["items"],
            "type": "object",
            "x-kubernetes-group-version-kind": gvk,
        }

    def closure(self, roots: Iterable[str]) -> set[str]:
        """Every schema name the roots need (built-in and custom)."""
        roots = set(roots)
        extra_roots = {r for r in roots if r in self.extra}
        builtin = {r for r in roots if r not in self.extra}
        for name in extra_roots:
            for ref in iter_refs(self.extra[name]):
                try:
                    target = ref_name(ref)
                except KeyError:
                    continue
                (builtin if target not in self.extra else extra_roots).add(target)
        return self.defs.closure(builtin) | extra_roots

    def v2(self, name: str) -> dict:
        return self.extra[name] if name in self.extra else self.defs.get(name)

    def v3(self, name: str) -> dict:
        if name in self.extra:
            return to_v3(self.extra_v3.get(name, self.extra[name]))
        if name == INT_OR_STRING:
            base = self.defs.get(name)
            return {"description": base.get("description", ""), "format": "int-or-string",
                    "oneOf": [{"type": "integer"}, {"type": "string"}]}
        if name == QUANTITY:
            base = self.defs.get(name)
            return {"description": base.get("description", ""), "oneOf": [{"type": "string"}, {"type": "number"}]}
        return self.defs.v3_schema(name)


def _selectable_fields(rtype: ResourceType) -> list[dict]:
    """``x-kubernetes-selectable-fields`` of a custom resource (upstream adds it, if empty, to every CRD kind)."""
    return [{"fieldPath": path.lstrip(".")} for path in rtype.selectable_fields]


# ------------------------------------------------------------------ operations

class _Op:
    """One operation, rendered later as v2 or v3."""

    def __init__(self, method: str, op_id: str, action: str, tag: str, gvk: Optional[dict],
                 params: Iterable[str], responses: dict[str, Optional[str]], body: Optional[str] = None,
                 body_required: bool = True, consumes: Optional[list] = None, produces: Optional[list] = None,
                 description: str = "") -> None:
        self.method, self.op_id, self.action, self.tag, self.gvk = method, op_id, action, tag, gvk
        self.params = tuple(params)
        self.responses = responses
        self.body, self.body_required = body, body_required
        self.consumes = consumes or ["*/*"]
        self.produces = produces or PRODUCES
        self.description = description

    def v2(self) -> dict:
        params = [dict(QUERY[p]) for p in self.params]
        if self.body:
            params.insert(0, {"name": "body", "in": "body", "required": self.body_required,
                              "schema": {"$ref": "#/definitions/" + self.body}})
        op: dict[str, Any] = {"consumes": self.consumes, "description": self.description,
                              "operationId": self.op_id, "produces": self.produces, "schemes": ["https"],
                              "tags": [self.tag]}
        if params:
            op["parameters"] = params
        op["responses"] = {code: ({"description": _STATUS_TEXT[code], "schema": _schema_v2(s)}
                                  if s else {"description": _STATUS_TEXT[code]})
                           for code, s in self.responses.items()}
        if self.action:
            op["x-kubernetes-action"] = self.action
        if self.gvk:
            op["x-kubernetes-group-version-kind"] = self.gvk
        return op

    def v3(self) -> dict:
        op: dict[str, Any] = {"tags": [self.tag], "description": self.description, "operationId": self.op_id}
        if self.params:
            op["parameters"] = [_param_v3(QUERY[p]) for p in self.params]
        if self.body:
            ref = {"schema": {"$ref": "#/components/schemas/" + self.body}}
            op["requestBody"] = {"content": {ct: ref for ct in self.consumes}}
            if self.body_required:
                op["requestBody"]["required"] = True
        responses = {}
        for code, schema in self.responses.items():
            resp: dict[str, Any] = {"description": _STATUS_TEXT[code]}
            if schema:
                resp["content"] = {ct: {"schema": _schema_v3(schema)} for ct in self.produces}
            responses[code] = resp
        op["responses"] = responses
        if self.action:
            op["x-kubernetes-action"] = self.action
        if self.gvk:
            op["x-kubernetes-group-version-kind"] = self.gvk
        return op

    def refs(self) -> set[str]:
        names = {s for s in self.responses.values() if s and s != STRING}
        if self.body:
            names.add(self.body)
        return names


_STATUS_TEXT = {"200": "OK", "201": "Created", "202": "Accepted", "401": "Unauthorized"}
STRING = "<string>"  # a response that is text (logs, connect streams), not an object


def _schema_v2(name: str) -> dict:
    return {"type": "string"} if name == STRING else {"$ref": "#/definitions/" + name}


def _schema_v3(name: str) -> dict:
    return {"type": "string"} if name == STRING else {"$ref": "#/components/schemas/" + name}


def _param_v3(p: dict) -> dict:
    out = {"name": p["name"], "in": p["in"]}
    if p.get("description"):
        out["description"] = p["description"]
    if p.get("required"):
        out["required"] = True
    out["schema"] = {"type": p["type"], "uniqueItems": True}
    return out


class _PathItem:
    def __init__(self, path_params: list[dict]) -> None:
        self.path_params = path_params
        self.ops: list[_Op] = []

    def v2(self) -> dict:
        item: dict[str, Any] = {op.method: op.v2() for op in self.ops}
        item["parameters"] = [dict(p) for p in self.path_params] + [dict(QUERY["pretty"])]
        return item

    def v3(self) -> dict:
        item: dict[str, Any] = {op.method: op.v3() for op in self.ops}
        item["parameters"] = [_param_v3(p) for p in self.path_params] + [_param_v3(QUERY["pretty"])]
        return item


def _paths(types: list[ResourceType], schemas: _Schemas) -> dict[str, _PathItem]:
    """Every path of the given resource types (one group-version or several)."""
    paths: dict[str, _PathItem] = {}

    def add(path: str, params: list[dict], op: _Op) -> None:
        paths.setdefault(path, _PathItem(params)).ops.append(op)

    seen_gv: set[tuple[str, str]] = set()
    for r in sorted(types, key=lambda t: (t.group, t.version, t.plural)):
        if r.group_version not in seen_gv:
            seen_gv.add(r.group_version)
            base = "/" + group_version_path(r.group, r.version)
            gvn = op_group_name(r.group, r.version)
            paths.setdefault(base + "/", _PathItem([])).ops.append(_Op(
                "get", f"get{gvn}APIResources", "", tag_name(r.group, r.version), None, (),
                {"200": API_RESOURCE_LIST, "401": None}, produces=PRODUCES,
                description="get available resources"))
        _resource_paths(r, schemas, add)
    return paths


def _resource_paths(r: ResourceType, schemas: _Schemas, add) -> None:
    base = "/" + group_version_path(r.group, r.version)
    gvn = op_group_name(r.group, r.version)
    tag = tag_name(r.group, r.version)
    gvk = {"group": r.group, "kind": r.kind, "version": r.version}
    kind_s, list_s = schemas.kind_name[id(r)], schemas.list_name[id(r)]
    verbs = set(r.verbs)
    produces = PRODUCES_CRD if r.is_crd else PRODUCES
    produces_watch = PRODUCES_CRD_WATCH if r.is_crd else PRODUCES_WATCH
    patch_types = PATCH_TYPES if r.strategic_merge_patch else PATCH_TYPES_CRD
    scope = "Namespaced" if r.namespaced else ""
    ns_params = [PATH_NAMESPACE] if r.namespaced else []
    coll = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/{r.plural}"
    item = coll + "/{name}"
    item_params = [PATH_NAME] + ns_params
    kind = r.kind
    plural_kind = f"objects of kind {kind}"

    def op(method, verb, action, params, responses, body=None, suffix="", **kw):
        return _Op(method, f"{verb}{gvn}{scope}{kind}{suffix}", action, tag, gvk, params, responses, body, **kw)

    def delete_collection(*args, **kw):  # upstream's id: deleteCoreV1CollectionNamespacedPod
        made = op(*args, **kw)
        made.op_id = f"delete{gvn}Collection{scope}{kind}"
        return made

    if "list" in verbs:
        add(coll, ns_params, op("get", "list", "list", LIST_PARAMS, {"200": list_s, "401": None},
                                produces=produces_watch, description=f"list or watch {plural_kind}"))
    if "create" in verbs:
        add(coll, ns_params, op("post", "create", "post", WRITE_PARAMS,
                                {"200": kind_s, "201": kind_s, "202": kind_s, "401": None}, body=kind_s,
                                produces=produces, description=f"create a {kind}"))
    if "deletecollection" in verbs:
        add(coll, ns_params, delete_collection("delete", "deleteCollection", "deletecollection",
                                               DELETECOLLECTION_PARAMS, {"200": STATUS, "401": None},
                                               body=DELETE_OPTIONS, body_required=False, produces=produces,
                                               description=f"delete collection of {kind}"))
    deleted = kind_s if r.return_deleted_object else STATUS
    if "get" in verbs:
        add(item, item_params, op("get", "read", "get", (), {"200": kind_s, "401": None}, produces=produces,
                                  description=f"read the specified {kind}"))
    if "update" in verbs:
        add(item, item_params, op("put", "replace", "put", WRITE_PARAMS, {"200": kind_s, "201": kind_s,
                                  "401": None}, body=kind_s, produces=produces,
                                  description=f"replace the specified {kind}"))
    if "delete" in verbs:
        add(item, item_params, op("delete", "delete", "delete", DELETE_PARAMS,
                                  {"200": deleted, "202": deleted, "401": None}, body=DELETE_OPTIONS,
                                  body_required=False, produces=produces, description=f"delete a {kind}"))
    if "patch" in verbs:
        add(item, item_params, op("patch", "patch", "patch", WRITE_PARAMS + ("force",),
                                  {"200": kind_s, "201": kind_s, "401": None}, body=PATCH, consumes=patch_types,
                                  produces=produces, description=f"partially update the specified {kind}"))
    if r.namespaced and "list" in verbs:
        add(f"{base}/{r.plural}", [], _Op("get", f"list{gvn}{kind}ForAllNamespaces", "list", tag, gvk, LIST_PARAMS,
                                          {"200": list_s, "401": None}, produces=produces_watch,
                                          description=f"list or watch {plural_kind}"))
    if "watch" in verbs:
        wcoll = f"{base}/watch/namespaces/{{namespace}}/{r.plural}" if r.namespaced else f"{base}/watch/{r.plural}"
        add(wcoll, ns_params, op("get", "watch", "watchlist", LIST_PARAMS, {"200": WATCH_EVENT, "401": None},
                                 suffix="List", produces=produces_watch,
                                 description=f"watch individual changes to a list of {kind}. deprecated: use "
                                 "the 'watch' parameter with a list operation instead."))
        add(wcoll + "/{name}", item_params, op("get", "watch", "watch", LIST_PARAMS,
                                               {"200": WATCH_EVENT, "401": None}, produces=produces_watch,
                                               description=f"watch changes to an object of kind {kind}. "
                                               "deprecated: use the 'watch' parameter with a list operation "
                                               "instead, filtered to a single item with the 'fieldSelector' "
                                               "parameter."))
        if r.namespaced:
            add(f"{base}/watch/{r.plural}", [], _Op(
                "get", f"watch{gvn}{kind}ListForAllNamespaces", "watchlist", tag, gvk, LIST_PARAMS,
                {"200": WATCH_EVENT, "401": None}, produces=produces_watch,
                description=f"watch individual changes to a list of {kind}. deprecated: use the 'watch' "
                "parameter with a list operation instead."))
    subs = []
    if r.has_status:
        subs.append(("status", "Status", kind_s, gvk))
    if r.scale is not None:
        subs.append(("scale", "Scale", SCALE, SCALE_GVK))
    for sub_path, path_ops in _extra_subresource_paths(r, item, item_params, gvn, scope, tag, kind_s, produces,
                                                       patch_types):
        for params, one in path_ops:
            add(sub_path, params, one)
    for sub, suffix, schema, sgvk in subs:
        path = f"{item}/{sub}"
        add(path, item_params, _Op("get", f"read{gvn}{scope}{kind}{suffix}", "get", tag, sgvk, (),
                                   {"200": schema, "401": None}, produces=produces,
                                   description=f"read {sub} of the specified {kind}"))
        add(path, item_params, _Op("put", f"replace{gvn}{scope}{kind}{suffix}", "put", tag, sgvk, WRITE_PARAMS,
                                   {"200": schema, "201": schema, "401": None}, body=schema, produces=produces,
                                   description=f"replace {sub} of the specified {kind}"))
        add(path, item_params, _Op("patch", f"patch{gvn}{scope}{kind}{suffix}", "patch", tag, sgvk,
                                   WRITE_PARAMS + ("force",), {"200": schema, "201": schema, "401": None},
                                   body=PATCH, consumes=patch_types, produces=produces,
                                   description=f"partially update {sub} of the specified {kind}"))


_CONNECT_METHODS = {"get": "get", "create": "post", "update": "put", "patch": "patch", "delete": "delete"}


def _extra_subresource_paths(r: ResourceType, item: str, item_params: list[dict], gvn: str, scope: str, tag: str,
                             kind_s: str, produces: list, patch_types: list) -> list[tuple[str, list]]:
    """Paths and operations of ``r.extra_subresources``, laid out as upstream's installer does."""
    out: list[tuple[str, list]] = []
    for sub in sorted(r.extra_subresources, key=lambda s: s.name):
        path = f"{item}/{sub.name}"
        suffix = sub.name[:1].upper() + sub.name[1:]
        sgvk = {"group": sub.group if sub.kind else r.group, "kind": sub.kind or r.kind,
                "version": sub.version or r.version}
        ops: list = []
        if sub.create is not None:
            schema = sub.body_schema or kind_s
            ops.append((item_params, _Op("post", f"create{gvn}{scope}{r.kind}{suffix}", "post", tag, sgvk, WRITE_PARAMS,
                                         {"200": schema, "201": schema, "202": schema, "401": None}, body=schema,
                                         produces=produces, description=sub.description)))
        elif sub.connect is not None and sub.name == "log":
            ops.append((item_params, _Op("get", f"read{gvn}{scope}{r.kind}{suffix}", "get", tag, sgvk, (),
                                         {"200": STRING, "401": None}, produces=["text/plain"] + produces,
                                         description=sub.description)))
        elif sub.connect is not None:
            methods = [_CONNECT_METHODS[v] for v in ("get", "update", "create", "delete", "patch") if v in sub.verbs]
            if sub.name == "proxy":
                methods += ["options", "head"]
            for with_path in ((False, True) if sub.name == "proxy" else (False,)):
                for method in methods:
                    name = method[:1].upper() + method[1:]
                    ops_path = path + "/{path}" if with_path else path
                    params = item_params + ([{"name": "path", "in": "path", "required": True, "type": "string",
                                              "uniqueItems": True, "description": "path to the resource"}]
                                            if with_path else [])
                    out.append((ops_path, [(params, _Op(
                        method, f"connect{gvn}{name}{scope}{r.kind}{suffix}{'WithPath' if with_path else ''}",
                        "connect", tag, sgvk, (), {"200": STRING, "401": None}, produces=["*/*"],
                        description=f"connect {method.upper()} requests to {sub.name} of {r.kind}"))]))
            continue
        else:
            verbs = set(sub.verbs)
            if "get" in verbs:
                ops.append((item_params, _Op("get", f"read{gvn}{scope}{r.kind}{suffix}", "get", tag, sgvk, (),
                                             {"200": kind_s, "401": None}, produces=produces,
                                             description=f"read {sub.name} of the specified {r.kind}")))
            if "update" in verbs:
                ops.append((item_params, _Op("put", f"replace{gvn}{scope}{r.kind}{suffix}", "put", tag, sgvk,
                                             WRITE_PARAMS, {"200": kind_s, "201": kind_s, "401": None}, body=kind_s,
                                             produces=produces,
                                             description=f"replace {sub.name} of the specified {r.kind}")))
            if "patch" in verbs:
                ops.append((item_params, _Op("patch", f"patch{gvn}{scope}{r.kind}{suffix}", "patch", tag, sgvk,
                                             WRITE_PARAMS + ("force",), {"200": kind_s, "201": kind_s, "401": None},
                                             body=PATCH, consumes=patch_types, produces=produces,
                                             description=f"partially update {sub.name} of the specified {r.kind}")))
        out.append((path, ops))
    return out


def _needed_schemas(paths: dict[str, _PathItem], schemas: _Schemas) -> list[str]:
    roots: set[str] = set(META_SCHEMAS)
    for item in paths.values():
        for op in item.ops:
            roots |= op.refs()
    return sorted(n for n in schemas.closure(roots) if n in schemas.extra or n in schemas.defs)


_SECURITY_V2 = {"BearerToken": {"description": "Bearer Token authentication", "in": "header",
                                "name": "authorization", "type": "apiKey"}}
_SECURITY_V3 = {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication",
                                "name": "authorization", "in": "header"}}


# ------------------------------------------------------------------ documents

def build_openapi_v2(types: list[ResourceType], defs: Definitions, version: str = INFO_VERSION) -> dict:
    """The swagger 2.0 document of ``/openapi/v2`` for every served type."""
    schemas = _Schemas(types, defs)
    paths = _paths(types, schemas)
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": {p: paths[p].v2() for p in sorted(paths)},
        "definitions": {n: schemas.v2(n) for n in _needed_schemas(paths, schemas)},
        "securityDefinitions": _SECURITY_V2,
        "security": [{"BearerToken": []}],
    }


def build_openapi_v3_group_version(group: str, version: str, types: list[ResourceType], defs: Definitions,
                                   info_version: str = INFO_VERSION) -> dict:
    """The OpenAPI 3.0 document of ``/openapi/v3/api/v1`` or ``/openapi/v3/apis/<group>/<version>``."""
    mine = [t for t in types if t.group == group and t.version == version]
    schemas = _Schemas(mine, defs)
    paths = _paths(mine, schemas)
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": info_version},
        "paths": {p: paths[p].v3() for p in sorted(paths)},
        "components": {
            "schemas": {n: schemas.v3(n) for n in _needed_schemas(paths, schemas)},
            "securitySchemes": _SECURITY_V3,
        },
        "security": [{"BearerToken": []}],
    }


def merge_v2_part(doc: dict, part: dict) -> None:
    """Add an extension server's paths and definitions to ``doc``; what ``doc`` has already stays."""
    for key in ("paths", "definitions"):
        target = doc.setdefault(key, {})
        for name, value in (part.get(key) or {}).items():
            target.setdefault(name, value)


def document_hash(body: bytes) -> str:
    """Upstream's document hash: SHA-512, upper-case hex."""
    return hashlib.sha512(body).hexdigest().upper()


def build_openapi_v3_index(docs: dict[str, bytes]) -> dict:
    """The ``/openapi/v3`` index: each group-version path with its content-hashed URL."""
    return {"paths": {path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={document_hash(body)}"}
                      for path, body in sorted(docs.items())}}


def _dumps(doc: dict) -> bytes:
    return orjson.dumps(doc)


class OpenAPIService:
    """Caches the serialized documents; ``set_types`` marks them stale (CRD changes)."""

    def __init__(self, defs: Definitions, info_version: str = INFO_VERSION) -> None:
        self.defs = defs
        self.info_version = info_version
        self._types: list[ResourceType] = []
        self._v2: Optional[bytes] = None
        self._v2_etag = ""
        # the protobuf form of the current v2 document: (etag, bytes), and the
        # encodings under way by etag (requests arriving meanwhile wait for it)
        self._v2_protobuf: Optional[tuple[str, bytes]] = None
        self._v2_protobuf_waiting: dict[str, list[defer.Deferred]] = {}
        self._v3: dict[str, tuple[bytes, str]] = {}
        self._v3_paths: dict[str, tuple[str, str]] = {}
        self._index: Optional[bytes] = None
        # extension API servers' documents (the aggregator's OpenAPI controller): v2 parts
        # (paths and the definitions they use) merged in, v3 group-version documents served as they are
        self._aggregated_v2: list[dict] = []
        self._aggregated_v3: dict[str, bytes] = {}

    def set_aggregated(self, v2_parts: list[dict], v3_documents: dict[str, bytes]) -> None:
        """The extension servers' documents changed: rebuilt on next request (local paths win)."""
        self._aggregated_v2 = list(v2_parts)
        self._aggregated_v3 = dict(v3_documents)
        self._v2 = None
        self._index = None

    def set_types(self, types: list[ResourceType]) -> None:
        """The served types changed: documents are rebuilt on next request."""
        self._types = list(types)
        self._v2 = None
        self._index = None
        self._v3 = {}
        self._v3_paths = {group_version_path(t.group, t.version): (t.group, t.version) for t in self._types}

    def v2_bytes(self) -> bytes:
        if self._v2 is None:
            doc = build_openapi_v2(self._types, self.defs, self.info_version)
            for part in self._aggregated_v2:
                merge_v2_part(doc, part)
            self._v2 = _dumps(doc)
            self._v2_etag = document_hash(self._v2)
        return self._v2

    def v2_etag(self) -> str:
        """The ETag of ``/openapi/v2`` (upstream's: the SHA-512 of the JSON), shared by both encodings."""
        self.v2_bytes()
        return self._v2_etag

    def v2_protobuf(self) -> defer.Deferred:
        """The v2 document as gnostic's protobuf ``Document`` (a Deferred of bytes).

        Encoded once per document, in a thread (about ten times the cost of the
        JSON), and kept with the ETag of the JSON it was made from.
        """
        body, etag = self.v2_bytes(), self.v2_etag()
        if self._v2_protobuf is not None and self._v2_protobuf[0] == etag:
            return defer.succeed(self._v2_protobuf[1])
        waiting = self._v2_protobuf_waiting.get(etag)
        result: defer.Deferred = defer.Deferred()
        if waiting is not None:
            waiting.append(result)
            return result
        self._v2_protobuf_waiting[etag] = [result]

        def done(encoded: Any) -> None:
            if not isinstance(encoded, failure.Failure):
                self._v2_protobuf = (etag, encoded)
            for d in self._v2_protobuf_waiting.pop(etag, []):
                d.callback(encoded) if not isinstance(encoded, failure.Failure) else d.errback(encoded)
        threads.deferToThread(lambda: openapi_v2_protobuf.encode_document(orjson.loads(body))).addBoth(done)
        return result

    def v3_bytes(self, path: str) -> Optional[tuple[bytes, str]]:
        """The document at ``/openapi/v3/<path>`` and its ETag (the hash), or None if not served."""
        path = path.strip("/")
        found = self._v3.get(path)
        if found is None and path in self._aggregated_v3 and path not in self._v3_paths:
            body = self._aggregated_v3[path]
            return body, document_hash(body)
        if found is None:
            gv = self._v3_paths.get(path)
            if gv is None:
                return None
            body = _dumps(build_openapi_v3_group_version(gv[0], gv[1], self._types, self.defs,
                                                         self.info_version))
            found = self._v3[path] = (body, document_hash(body))
        return found

    def v3_index_bytes(self) -> bytes:
        if self._index is None:
            docs = {}
            for path in self._v3_paths:
                found = self.v3_bytes(path)
                assert found is not None  # every served path has a document
                docs[path] = found[0]
            for path, body in self._aggregated_v3.items():
                docs.setdefault(path, body)
            self._index = _dumps(build_openapi_v3_index(docs))
        return self._index
