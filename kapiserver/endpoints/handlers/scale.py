"""The scale subresource: an autoscaling/v1 Scale view of the object.

``spec.replicas`` maps to the CRD's specReplicasPath, ``status.replicas``
to statusReplicasPath and ``status.selector`` to labelSelectorPath.  Built-in
kinds (Deployments, ReplicaSets, StatefulSets) point labelSelectorPath at
``.spec.selector``, a LabelSelector object (or a plain map), shown as its selector string.  PUT and
PATCH change only the replicas, through the main resource's update (so the
generation moves as for any spec change), inside the Store's
compare-and-swap loop; a resourceVersion in the Scale is a precondition.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from kapiserver.endpoints.handlers.patch import patcher
from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.machinery import errors, jsonpath, labels
from kapiserver.registry.resource_type import ResourceType

SCALE_API_VERSION = "autoscaling/v1"
SCALE_DEFINITION = "io.k8s.api.autoscaling.v1.Scale"


def _value(obj: dict, path: str) -> Any:
    if not path:
        return None
    try:
        values = jsonpath.evaluate(obj, path)
    except jsonpath.JSONPathError:
        return None
    return values[0] if values else None


def to_scale(rtype: ResourceType, obj: dict) -> dict:
    """The Scale of a custom resource."""
    paths = rtype.scale
    md = obj.get("metadata") or {}
    scale_md = {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp") if k in md}
    spec_replicas = _value(obj, paths.spec_replicas_path)
    status_replicas = _value(obj, paths.status_replicas_path)
    status: dict = {"replicas": status_replicas if isinstance(status_replicas, int) else 0}
    selector = _value(obj, paths.label_selector_path)
    if isinstance(selector, dict) and not rtype.is_crd:
        selector = labels.selector_string(selector)
    if isinstance(selector, str) and selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": SCALE_API_VERSION, "metadata": scale_md,
            "spec": {"replicas": spec_replicas} if isinstance(spec_replicas, int) else {}, "status": status}


def _apply_scale(scope: RequestScope, scale: Any, current: dict) -> dict:
    """``current`` with the replicas of ``scale`` (validated as upstream does)."""
    if not isinstance(scale, dict):
        raise errors.bad_request("the body of the request must be a Scale object")
    name = scope.info.name
    replicas = (scale.get("spec") or {}).get("replicas")
    causes = []
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool)):
        raise errors.bad_request(f"Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal "
                                 f"{type(replicas).__name__} into Go struct field ScaleSpec.spec.replicas of type int32")
    if replicas is not None and replicas < 0:
        causes.append(errors.field_invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    scale_name = (scale.get("metadata") or {}).get("name")
    if scale_name and scale_name != name:
        causes.append(errors.field_invalid("metadata.name", scale_name, "must match the name on the URL"))
    if causes:
        raise errors.invalid("Scale", "autoscaling", name, causes)
    new = copy.deepcopy(current)
    jsonpath.set_path(new, scope.rtype.scale.spec_replicas_path, replicas or 0)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv:
        new["metadata"]["resourceVersion"] = rv
    return new


async def _update(scope: RequestScope, to_scale_body: Callable[[dict], Any]) -> Response:
    info = scope.info

    def mutate(current: Optional[dict]) -> dict:
        return _apply_scale(scope, to_scale_body(current), current)
    result, _ = await scope.store.guaranteed_update(info.namespace, info.name, mutate, "", scope.context())
    return Response(200, to_scale(scope.rtype, result), convertible=False)


async def get_scale(scope: RequestScope) -> Response:
    info = scope.info
    obj = await scope.store.get(info.namespace, info.name)
    return Response(200, to_scale(scope.rtype, obj), convertible=False)


async def update_scale(scope: RequestScope) -> Response:
    scope.check_write_options("UpdateOptions")
    body = scope.decode_object(SCALE_DEFINITION, "Scale", SCALE_API_VERSION)
    return await _update(scope, lambda current: body)


async def patch_scale(scope: RequestScope) -> Response:
    scope.check_write_options("PatchOptions")
    apply = patcher(scope)
    return await _update(scope, lambda current: apply(to_scale(scope.rtype, current)))
