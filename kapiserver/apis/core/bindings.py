"""Bindings (core/v1): assigning a pod to a node, what a scheduler does.

Served twice, as upstream does: ``POST namespaces/{ns}/bindings`` (the legacy
create-only resource, the pod named by the Binding's name) and
``POST namespaces/{ns}/pods/{name}/binding``.  The pod gets ``spec.nodeName``,
the Binding's annotations and a ``PodScheduled: True`` condition, written
straight to the pod (no pod update validation, as upstream's BindingREST);
the answer is a Success Status.  Nothing stores Bindings themselves.
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.apis.core.pod_conditions import update_pod_condition
from kapiserver.apis.deps import RegistryDeps
from kapiserver.machinery import errors, meta
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.context import Context
from kapiserver.registry.resource_type import ResourceType, Strategy
from kapiserver.registry.store import WriteResult
from kapiserver.registry.subresources import ObjectStore, Subresource, SubresourceRequest

SCHEMA = "io.k8s.api.core.v1.Binding"
SUBRESOURCE = "binding"


def _problems(binding: dict) -> list[errors.Cause]:
    """upstream's ValidatePodBinding."""
    target = as_dict(binding.get("target"))
    problems = []
    kind = target.get("kind") or ""
    if kind and kind != "Node":
        problems.append(errors.field_not_supported("target.kind", kind, ["Node", "<empty>"]))
    if not target.get("name"):
        problems.append(errors.field_required("target.name"))
    return problems


async def bind(pods: ObjectStore, namespace: str, name: str, binding: dict, ctx: Context) -> dict:
    """Assign pod ``name`` to the Binding's target node; the Success Status upstream answers."""
    md = as_dict(binding.get("metadata"))
    if md.get("namespace") and md["namespace"] != namespace:  # upstream's create handler checks it first
        raise errors.namespace_mismatch()
    if name != (md.get("name") or ""):
        raise errors.bad_request("name in URL does not match name in Binding object")
    problems = _problems(binding)
    if problems:  # upstream answers a 500 without a reason here; a client error is a 422 (docs/compatibility.md)
        raise errors.invalid("Binding", "", name, problems)
    node = binding["target"]["name"]
    annotations = as_dict(md.get("annotations"))

    def assign(pod: Optional[dict]) -> dict:
        assert pod is not None
        pmd = pod["metadata"]
        if md.get("uid") and md["uid"] != pmd.get("uid"):
            raise errors.conflict("pods", "", name, f"Precondition failed: UID in precondition: {md['uid']}, "
                                                    f"UID in object meta: {pmd.get('uid')}")
        spec = pod.setdefault("spec", {})
        why = ""
        if pmd.get("deletionTimestamp"):
            why = f"pod {name} is being deleted, cannot be assigned to a host"
        elif spec.get("nodeName"):
            why = f'pod {name} is already assigned to node "{spec["nodeName"]}"'
        elif spec.get("schedulingGates"):
            why = f"pod {name} has non-empty .spec.schedulingGates"
        if why:
            raise errors.conflict("pods/binding", "", name, why)
        spec["nodeName"] = node
        if annotations:
            pmd.setdefault("annotations", {}).update(annotations)
        status = pod.get("status")
        if not isinstance(status, dict):
            status = pod["status"] = {}
        update_pod_condition(status, {"type": "PodScheduled", "status": "True"})
        return pod
    await pods.guaranteed_update(namespace, name, assign, SUBRESOURCE, ctx,
                                 precondition_rv=md.get("resourceVersion") or "")
    return errors.status_object("Success", code=201)


async def _bind_subresource(request: SubresourceRequest) -> tuple[int, dict]:
    return 201, await bind(request.store, request.namespace, request.name, request.body, request.ctx)


def binding_subresource() -> Subresource:
    """``pods/{name}/binding``."""
    return Subresource(SUBRESOURCE, ("create",), kind="Binding", create=_bind_subresource, body_schema=SCHEMA,
                       description="create binding of a Pod")


class BindingStore:
    """``namespaces/{ns}/bindings``: create only (a :class:`Creater`, nothing stored),
    binding the pod the Binding names."""

    def __init__(self, rtype: ResourceType, server: RegistryDeps) -> None:
        self.rtype = rtype
        self.server = server

    async def create_result(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> WriteResult:
        obj = self.rtype.check_kind(obj)
        name = meta.metadata(obj).get("name") or ""
        # the answer is the binding's Status, not what was stored (the Pod)
        return WriteResult(await bind(self.server.store("", "v1", "pods"), namespace, name, obj, ctx or Context()),
                           None)


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Binding", plural="bindings", singular="binding", namespaced=True,
        strategy=Strategy(), verbs=("create",), schema_name=SCHEMA, table_convertor=False,
        make_store=lambda rtype, server: BindingStore(rtype, server),
    )
