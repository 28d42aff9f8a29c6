"""PATCH of one object: JSON patch, merge patch, strategic merge patch.

The patch is applied to the current object inside the Store's
compare-and-swap loop, so concurrent patches never lose an update.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import orjson

from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.endpoints import request_decoder
from kapiserver.machinery import errors, limits
from kapiserver.machinery.jsonpatch import apply_json_patch
from kapiserver.machinery.mergepatch import apply_merge_patch
from kapiserver.machinery.strategicpatch import apply_strategic_merge_patch

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


def _unsupported(scope: RequestScope, media: str) -> errors.StatusError:
    supported = [JSON_PATCH, MERGE_PATCH]
    if scope.rtype.strategic_merge_patch:
        supported.append(STRATEGIC_MERGE_PATCH)
    return errors.StatusError(415, "UnsupportedMediaType",
                              f"the body of the request was in an unknown format - accepted media types "
                              f"include: {', '.join(supported)}" + (
                                  " (server-side apply is not implemented by kapiserver yet)"
                                  if media == APPLY_PATCH else ""))


def patcher(scope: RequestScope) -> Callable[[Optional[dict]], dict]:
    """A function applying the request's patch to a current object."""
    media = scope.content_type()
    body = scope.body_bytes()
    if media == STRATEGIC_MERGE_PATCH and not scope.rtype.strategic_merge_patch:
        raise _unsupported(scope, media)
    if media not in (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        raise _unsupported(scope, media)
    if not body.strip():
        raise errors.bad_request("the body of the request was empty")
    try:
        patch: Any = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise errors.bad_request(f"error decoding patch: {request_decoder.go_json_error(body, e)}") from None
    limits.check_body_depth(patch, "patch")
    if patch is None:
        raise errors.bad_request("the body of the request was empty")
    if media == JSON_PATCH:
        if not isinstance(patch, list):
            raise errors.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        return lambda current: apply_json_patch(current or {}, patch)
    if not isinstance(patch, dict):
        raise errors.bad_request("error decoding patch: the patch must be a JSON object")
    if media == MERGE_PATCH:
        return lambda current: apply_merge_patch(current or {}, patch)
    schema = {"$ref": f"#/definitions/{scope.rtype.schema_name}"} if scope.rtype.schema_name else scope.rtype.schema
    resolve = scope.schema_resolver
    return lambda current: apply_strategic_merge_patch(current or {}, patch, schema if resolve else None,
                                                       resolve or (lambda ref: {}))


async def patch(scope: RequestScope) -> Response:
    info = scope.info
    scope.check_write_options("PatchOptions")
    apply = patcher(scope)
    checked: list[bool] = []

    def mutate(current: Optional[dict]) -> dict:
        result = apply(current)
        if not isinstance(result, dict):
            raise errors.bad_request("the patch did not produce an object")
        warnings = len(scope.warnings)
        result = scope.decode_patched(result)
        if checked:  # report unknown fields once, not per conflict retry
            del scope.warnings[warnings:]
        checked.append(True)
        check_name(result, info.name, info.namespace)
        return result
    result, _ = await scope.store.guaranteed_update(info.namespace, info.name, mutate, info.subresource,
                                                    scope.context())
    return Response(200, result)


def check_name(obj: dict, name: str, namespace: str) -> None:
    """Upstream's checkName: a patch or update cannot move an object to another name or namespace."""
    found = obj.get("metadata")
    md: dict = found if isinstance(found, dict) else {}
    body_name = md.get("name") or ""
    if body_name != name:
        raise errors.bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")
    body_namespace = md.get("namespace") or ""
    if namespace and body_namespace and body_namespace != namespace:
        raise errors.bad_request(f"the namespace of the object ({body_namespace}) does not match the namespace on "
                                 f"the request ({namespace})")
