"""The scale subresource: an autoscaling/v1 Scale view of the object.

``spec.replicas`` maps to the CRD's specReplicasPath, ``status.replicas``
to statusReplicasPath and ``status.selector`` to labelSelectorPath.  Built-in
kinds (Deployments, ReplicaSets, StatefulSets) point labelSelectorPath at
``.spec.selector``, a LabelSelector object (or a plain map), shown as its selector string.  PUT and
PATCH change only the replicas, through the main resource's update (so the
generation moves as for any spec change), inside the Store's
compare-and-swap loop; a resourceVersion in the Scale is a precondition.

Field ownership goes through the Scale, as upstream's scale handler does:
the Scale shows the owners of the replicas path, its field manager records
the write (an update, or a server-side apply of a Scale), and the result
is carried back to the parent's managedFields.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from kapiserver.admission.resources import SCALE_KIND
from kapiserver.endpoints.scope import RequestScope, Response
from kapiserver.machinery import errors, jsonpath, labels
from kapiserver.machinery.managedfields import scale as scale_fields
from kapiserver.registry.context import SubresourceView
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
    assert paths is not None  # only kinds with a scale subresource get here
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
    assert scope.rtype.scale is not None
    jsonpath.set_path(new, scope.rtype.scale.spec_replicas_path, replicas or 0)
    rv = (scale.get("metadata") or {}).get("resourceVersion")
    if rv:
        new["metadata"]["resourceVersion"] = rv
    return new


def _replicas_into(rtype: ResourceType, scale: dict, obj: dict) -> None:
    """The replicas of a Scale mutating admission returned, into the parent object."""
    assert rtype.scale is not None
    replicas = (scale.get("spec") or {}).get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool):
        jsonpath.set_path(obj, rtype.scale.spec_replicas_path, replicas)


# A change of the Scale: the old Scale (with its managedFields) -> (new Scale, its managedFields).
ScaleChange = Callable[[dict], tuple[Any, Optional[list]]]


async def _update(scope: RequestScope, manager: str, change: ScaleChange) -> Response:
    info = scope.info
    rtype = scope.rtype
    assert rtype.scale is not None
    path = scale_fields.replicas_path(rtype.scale.spec_replicas_path)

    def mutate(current: Optional[dict]) -> dict:
        assert current is not None
        parent_entries = (current.get("metadata") or {}).get("managedFields")
        old_scale = to_scale(rtype, current)
        owners = scale_fields.to_subresource(parent_entries, path)
        if owners:
            old_scale["metadata"]["managedFields"] = owners
        new_scale, scale_entries = change(old_scale)
        new = _apply_scale(scope, new_scale, current)
        entries = scale_fields.to_parent(parent_entries, scale_entries, path, rtype.api_version)
        if entries:
            new["metadata"]["managedFields"] = entries
        else:
            new["metadata"].pop("managedFields", None)
        return new
    ctx = scope.context(manager, managed_fields_set=True)
    ctx.admission_view = SubresourceView("scale", SCALE_KIND, lambda obj: to_scale(rtype, obj),
                                         lambda scale, obj: _replicas_into(rtype, scale, obj))
    result, _ = await scope.generic_store().guaranteed_update(info.namespace, info.name, mutate, "", ctx)
    return Response(200, to_scale(scope.rtype, result), convertible=False)


def _requested(scale: Any) -> Any:
    md = scale.get("metadata") if isinstance(scale, dict) else None
    return md.get("managedFields") if isinstance(md, dict) else None


async def get_scale(scope: RequestScope) -> Response:
    info = scope.info
    obj = await scope.generic_store().get(info.namespace, info.name)
    return Response(200, to_scale(scope.rtype, obj), convertible=False)


async def update_scale(scope: RequestScope) -> Response:
    scope.check_write_options("UpdateOptions")
    manager = scope.field_manager("UpdateOptions")
    body = await scope.decode_body(SCALE_DEFINITION, "Scale", SCALE_API_VERSION)
    fm = scope.generic_store().field_manager("scale")
    return await _update(scope, manager, lambda old: (body, fm.update(old, body, _requested(body), manager)
                                                      if isinstance(body, dict) else None))


async def patch_scale(scope: RequestScope) -> Response:
    from kapiserver.endpoints.handlers import patch as patch_handler  # with the first PATCH (see rest.patch)
    scope.check_write_options("PatchOptions")
    fm = scope.generic_store().field_manager("scale")
    if patch_handler.check_media_type(scope) == patch_handler.APPLY_PATCH:
        manager, force = patch_handler.patch_options(scope, apply=True)
        config = patch_handler.decode_apply_configuration(scope)
        return await _update(scope, manager, lambda old: fm.apply(old, config, manager, force))
    manager, _ = patch_handler.patch_options(scope, apply=False)
    request_patch = patch_handler.patcher(scope)

    def change(old: dict) -> tuple[Any, Optional[list]]:
        new = request_patch.apply(old)
        return new, fm.update(old, new, _requested(new), manager) if isinstance(new, dict) else None
    return await _update(scope, manager, change)
