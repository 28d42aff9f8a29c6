"""PATCH of one object: JSON patch, merge patch, strategic merge patch, server-side apply.

The patch is applied to the current object inside the Store's
compare-and-swap loop, so concurrent patches never lose an update.  An
apply (``application/apply-patch+yaml``) merges the configuration with the
kind's structured-merge semantics and records its manager's fields; it
creates the object when it does not exist.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable, NamedTuple, Optional

import orjson

from kapiserver.endpoints.request_context import context_of
from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.endpoints import request_decoder
from kapiserver.machinery import errors, limits, yamljson
from kapiserver.machinery.jsonvalues import go_json_type
from kapiserver.machinery.jsonpatch import apply_json_patch, strict_json_patch_problem
from kapiserver.machinery.managedfields.fieldmanager import FieldManager, validate_field_manager
from kapiserver.machinery.mergepatch import apply_merge_patch
from kapiserver.machinery.strategicpatch import apply_strategic_merge_patch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
# served only with CBOR (upstream's CBORServingAndStorage gate): answered 415 like any unknown type
APPLY_PATCH_CBOR = "application/apply-patch+cbor"

_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def supported_media_types(scope: RequestScope) -> list[str]:
    supported = [JSON_PATCH, MERGE_PATCH]
    if scope.rtype.strategic_merge_patch:
        supported.append(STRATEGIC_MERGE_PATCH)
    supported.append(APPLY_PATCH)
    return supported


def check_media_type(scope: RequestScope) -> str:
    """The request's patch type, or 415 listing the ones this resource takes."""
    media = scope.content_type()
    supported = supported_media_types(scope)
    if media not in supported:
        raise errors.StatusError(415, "UnsupportedMediaType",
                                 "the body of the request was in an unknown format - accepted media types "
                                 f"include: {', '.join(supported)}")
    return media


def patch_options(scope: RequestScope, apply: bool) -> tuple[str, bool]:
    """(field manager, force) from the query, validated as upstream's ValidatePatchOptions."""
    raw_force = scope.arg("force")
    force: Optional[bool] = None
    if raw_force is not None:
        force = _GO_BOOLS.get(raw_force)
        if force is None:
            raise errors.bad_request(f'strconv.ParseBool: parsing "{raw_force}": invalid syntax')
    causes = []
    name = scope.arg("fieldManager") or ""
    if apply and not name:
        causes.append(errors.field_required("fieldManager", "is required for apply patch"))
    if not apply and force is not None:
        causes.append(errors.field_forbidden("force", "may not be specified for non-apply patch"))
    causes += validate_field_manager(name)
    if causes:
        raise errors.invalid("PatchOptions", "meta.k8s.io", "", causes)
    return (name if apply else scope.field_manager("PatchOptions")), bool(force)


class Patcher(NamedTuple):
    """The request's (non-apply) patch: :meth:`apply` gives a current object with it applied
    (a new value sharing nothing with the current one: the Store changes it in place)."""

    apply: Callable[[Optional[dict]], Any]
    # the top-level fields the patch can change (None: any); the result's other fields are
    # copies of the current object's, so its decoding does not look at them again
    changed: Optional[frozenset[str]]
    # upstream converts a strategic merge patch's result from a map into the resource's own type,
    # so whatever strings it ends with as apiVersion and kind are not read (another type does not
    # convert); JSON and merge patches' results are decoded as JSON, where they are read
    type_meta_read: bool = True


def _top_field_of_pointer(path: Any) -> Optional[str]:
    """The top-level field a JSON pointer names (None for the whole document or a malformed one)."""
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return path[1:].split("/", 1)[0].replace("~1", "/").replace("~0", "~")


def _json_patch_changes(ops: list) -> Optional[frozenset[str]]:
    """The top-level fields a JSON patch's operations can change (None: any)."""
    changed: set[str] = set()
    for op in ops:
        if not isinstance(op, dict):
            return None
        kind = op.get("op")
        if kind == "test":
            continue
        for pointer in ((op.get("path"), op.get("from")) if kind == "move" else (op.get("path"),)):
            field_name = _top_field_of_pointer(pointer)
            if field_name is None:
                return None
            changed.add(field_name)
    return frozenset(changed)


def _merge_patch_changes(patch: dict) -> Optional[frozenset[str]]:
    """The top-level fields a merge patch (JSON or strategic) can change: its own, unless a
    strategic directive (``$patch``, ``$retainKeys``, ``$setElementOrder/...``) reaches others."""
    if any(k.startswith("$") for k in patch):
        return None
    return frozenset(patch)


def _unmarshal_error(value: Any, go_type: str) -> str:
    return f"json: cannot unmarshal {go_json_type(value)} into Go value of type {go_type}"


def _decoded_patch(body: bytes, media: str, strict: bool) -> Any:
    """The patch document as upstream's patchers decode it (after reading the object: a missing
    object is a 404 whatever the patch).  ``strict``: fieldValidation Warn or Strict, where
    upstream first unmarshals a JSON or merge patch strictly, into its Go type."""
    try:
        patch: Any = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        problem = request_decoder.go_json_error(body, e)
        if media == STRATEGIC_MERGE_PATCH:
            raise errors.bad_request(problem) from None
        if media == MERGE_PATCH and not strict:
            raise errors.bad_request("Invalid JSON Patch") from None
        raise errors.bad_request(f"error decoding patch: {problem}") from None
    limits.check_body_depth(patch, "patch")
    if media == JSON_PATCH:
        refused = strict_json_patch_problem(patch) if strict else None
        if refused:
            raise errors.bad_request(f"error decoding patch: {refused}")
        return [] if patch is None else patch  # a null patch has no operations
    if media == STRATEGIC_MERGE_PATCH:
        if patch is None:
            return {}  # nothing to merge
        if not isinstance(patch, dict):
            raise errors.bad_request(_unmarshal_error(patch, "map[string]interface {}"))
        return patch
    if patch is not None and not isinstance(patch, dict) and strict:
        raise errors.bad_request(f"error decoding patch: {_unmarshal_error(patch, 'map[string]interface {}')}")
    if not isinstance(patch, dict):
        raise errors.bad_request("Invalid JSON Patch")  # evanphx's MergePatch: null, or not an object
    return patch


def _refusal(refused: errors.StatusError) -> Callable[[Optional[dict]], Any]:
    def refuse(current: Optional[dict]) -> Any:
        raise refused
    return refuse


def patcher(scope: RequestScope) -> Patcher:
    """The request's (non-apply) patch, ready to apply to a current object.  A patch that does not
    decode is refused when it is applied, as upstream's: a missing object is a 404 first."""
    media = check_media_type(scope)
    body = scope.body_bytes()
    audit = context_of(scope.request).audit
    if audit is not None:
        audit.log_request_patch(body)
    try:
        patch = _decoded_patch(body, media, scope.field_validation() != "Ignore")
    except errors.StatusError as refused:
        return Patcher(_refusal(refused), None)
    if media == JSON_PATCH:
        return Patcher(lambda current: apply_json_patch(current or {}, patch), _json_patch_changes(patch)
                       if isinstance(patch, list) else None)
    if media == MERGE_PATCH:
        return Patcher(lambda current: apply_merge_patch(current or {}, patch), frozenset(patch))
    schema = {"$ref": f"#/definitions/{scope.rtype.schema_name}"} if scope.rtype.schema_name else scope.rtype.schema
    resolve = scope.schema_resolver
    return Patcher(lambda current: apply_strategic_merge_patch(current or {}, patch, schema if resolve else None,
                                                               resolve or (lambda ref: {})),
                   _merge_patch_changes(patch), type_meta_read=False)


def decode_apply_configuration(scope: RequestScope) -> Any:
    """The applied configuration: YAML (JSON bodies, what most clients send, parse as such)."""
    body = scope.body_bytes()
    stripped = body.strip()
    if stripped.startswith(b"{"):
        try:
            parsed = orjson.loads(stripped)
            limits.check_body_depth(parsed, "patch")
            return parsed
        except orjson.JSONDecodeError:
            pass
    try:  # YAML as sigs.k8s.io/yaml reads it, bounded (machinery/yamljson.py)
        config = yamljson.yaml_to_json(body) if stripped else {}
    except yamljson.YAMLError as e:
        raise errors.bad_request(f"error decoding YAML: {e}") from None
    except limits.TooDeep as e:
        raise errors.bad_request(f"error decoding YAML: {e}") from None
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise errors.bad_request("error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
                                 f"unmarshal {'array' if isinstance(config, list) else 'string'} into Go value of "
                                 "type map[string]interface {}")
    return _json_values(config)


def apply_duplicate_keys(scope: RequestScope) -> None:
    """Keys given twice in an apply body: upstream decodes it again with go-yaml's strict mode
    (``yaml.UnmarshalStrict``) under ``fieldValidation`` Strict (400) or Warn (a warning), after the
    apply itself. JSON bodies are YAML too, so duplicates there count the same way."""
    mode = scope.field_validation()
    if mode == "Ignore":
        return
    duplicates: list[str] = []
    try:
        yamljson.yaml_to_json(scope.body_bytes(), duplicates)
    except (yamljson.YAMLError, limits.TooDeep):
        return  # the first decoding already answered for what does not parse
    if not duplicates:
        return
    if mode == "Strict":
        raise errors.bad_request("error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal "
                                 "errors:\n  " + "\n  ".join(duplicates))
    scope.warnings.extend(duplicates)  # one warning a line, as upstream's parseYAMLWarnings


def _json_values(value: Any) -> Any:
    """YAML timestamps and the like as the strings JSON would carry."""
    if isinstance(value, dict):
        return {str(k): _json_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_values(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def applied(scope: RequestScope, fm: FieldManager, current: Optional[dict], config: Any, manager: str,
            force: bool) -> tuple[dict, Optional[list]]:
    """``current`` (None: the object does not exist yet) with ``config`` applied, and its managedFields;
    name and namespace checked against the URL as upstream's patcher does."""
    info = scope.info
    obj, entries = fm.apply(current if current is not None else {}, config, manager, force)
    found = obj.get("metadata")
    md: dict = dict(found) if isinstance(found, dict) else {}
    if current is None and md.get("uid"):
        raise errors.conflict(scope.rtype.plural, scope.rtype.group, info.name,
                              f"uid mismatch: the provided object specified uid {md['uid']}, and no existing "
                              "object was found")
    name = md.get("name")
    if not name:
        raise errors.bad_request(f"the name of the object ({info.name} based on URL) was undeterminable: name must "
                                 "be provided")
    if name != info.name:
        raise errors.bad_request(f"the name of the object ({name}) does not match the name on the URL ({info.name})")
    if scope.rtype.namespaced and info.namespace:
        if md.get("namespace") and md["namespace"] != info.namespace:
            raise errors.namespace_mismatch()
        md["namespace"] = info.namespace
    if current is not None and not md.get("resourceVersion"):
        # the configuration is applied to the live object and carries its resourceVersion, as upstream's
        # patcher: no precondition, and kinds that refuse unconditional updates (ValidatingAdmissionPolicy,
        # kube-controller-manager applies its status) accept it
        md["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
    if entries:
        md["managedFields"] = entries
    else:
        md.pop("managedFields", None)
    return {**obj, "metadata": md}, entries


async def apply(scope: RequestScope) -> Response:
    info = scope.info
    manager, force = patch_options(scope, apply=True)
    config = decode_apply_configuration(scope)
    fm = scope.generic_store().field_manager(info.subresource)

    checked: list[bool] = []

    def mutate(current: Optional[dict]) -> dict:
        warnings = len(scope.warnings)
        result = scope.decode_patched(applied(scope, fm, current, config, manager, force)[0])
        if not checked:
            apply_duplicate_keys(scope)
        if checked:  # report unknown fields once, not per conflict retry
            del scope.warnings[warnings:]
        checked.append(True)
        return result
    ctx = scope.context(manager, managed_fields_set=True)
    # not mutate_keeps_current: an apply that changes nothing returns the object it was given
    result = await scope.generic_store().guaranteed_update_result(info.namespace, info.name, mutate, info.subresource, ctx,
                                                        create_if_missing=True, force_allow_create=True)
    return Response(201 if result.created else 200, result.answer())


async def patch(scope: RequestScope) -> Response:
    info = scope.info
    scope.check_write_options("PatchOptions")
    if check_media_type(scope) == APPLY_PATCH:
        return await apply(scope)
    manager, _ = patch_options(scope, apply=False)
    request_patch = patcher(scope)
    checked: list[bool] = []

    def mutate(current: Optional[dict]) -> dict:
        result = request_patch.apply(current)
        if not request_patch.type_meta_read:
            for field_name, own in (("apiVersion", scope.rtype.api_version), ("kind", scope.rtype.kind)):
                if result.get(field_name) is None or isinstance(result[field_name], str):
                    result[field_name] = own  # the conversion only needs a string there
        elif isinstance(result, dict) and not result.get("apiVersion") and not scope.rtype.is_crd:
            # upstream decodes such JSON into an object without a name, and its checkName says so
            raise errors.bad_request(f"the name of the object ({info.name} based on URL) was undeterminable: name "
                                     "must be provided")
        warnings = len(scope.warnings)
        # the patchers never change ``current``
        result = scope.decode_patched(result, current, request_patch.changed)
        if checked:  # report unknown fields once, not per conflict retry
            del scope.warnings[warnings:]
        checked.append(True)
        check_name(result, info.name)
        return result
    # the patchers' results share nothing with the object they patch (they copy what they keep)
    result = await scope.generic_store().guaranteed_update_result(info.namespace, info.name, mutate, info.subresource,
                                                        scope.context(manager), mutate_keeps_current=True)
    return Response(200, result.answer())


def check_name(obj: dict, name: str) -> None:
    """Upstream's checkName: a patch cannot move an object to another name (another namespace is the
    Store's refusal, BeforeUpdate's, for every update)."""
    found = obj.get("metadata")
    md: dict = found if isinstance(found, dict) else {}
    body_name = md.get("name") or ""
    if body_name != name:
        raise errors.bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")
