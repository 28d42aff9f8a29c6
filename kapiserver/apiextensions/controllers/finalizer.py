"""Finalizing a deleted CRD: delete every custom resource it defines, then drop the cleanup finalizer.

Upstream's finalizing controller: the Terminating condition tracks progress
(InstanceDeletionInProgress, then InstanceDeletionCompleted).  Custom
resources that have finalizers of their own are only marked; the CRD waits
for them, checking again a moment later.
"""
from __future__ import annotations

import copy
from typing import Callable, Optional

from kapiserver.apiextensions.conditions import TERMINATING, set_condition
from kapiserver.apiextensions.customresourcedefinitions import CLEANUP_FINALIZER
from kapiserver.apiextensions.state import CRDState
from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.store import Store


def list_everything() -> ListOptions:
    return ListOptions(parse_label_selector(""), parse_field_selector(""))


async def _set_terminating(crd_store: Store, name: str, reason: str, message: str) -> None:
    def mutate(current: Optional[dict]) -> dict:
        assert current is not None  # (no create: called with the stored CRD)
        new = copy.deepcopy(current)
        set_condition(new, TERMINATING, "True", reason, message)
        return new
    await crd_store.guaranteed_update("", name, mutate, subresource="status")


async def finalize(crd: dict, crd_store: Store, make_store: Callable, state: CRDState) -> bool:
    """Delete the CRD's instances; True once none is left and the finalizer was removed."""
    name = crd["metadata"]["name"]
    if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or ()):
        return True
    state.terminating = True
    from kapiserver.apiextensions.crd_validation import storage_version  # (with the first CRD, as server.py's)
    from kapiserver.apiextensions.custom_resource import resource_types
    types = resource_types(crd, state)
    storage = storage_version(crd)
    rtype = next((t for t in types if t.version == storage), types[0] if types else None)
    if rtype is not None:
        await _set_terminating(crd_store, name, "InstanceDeletionInProgress", "CustomResource deletion is in progress")
        store = make_store(rtype)
        listed = await store.list("", list_everything())
        for item in listed["items"]:
            md = item["metadata"]
            try:
                await store.delete(md.get("namespace", ""), md["name"], DeleteOptions())
            except errors.StatusError as e:
                if e.code != 404:
                    raise
        remaining = await store.list("", list_everything())
        if remaining["items"]:
            await _set_terminating(crd_store, name, "InstanceDeletionCheck",
                                   f"could not confirm zero CustomResources remaining: "
                                   f"{len(remaining['items'])} remaining")
            return False
    await _set_terminating(crd_store, name, "InstanceDeletionCompleted", "removed all instances")

    def drop_finalizer(current: Optional[dict]) -> dict:
        assert current is not None  # (no create: called with the stored CRD)
        new = copy.deepcopy(current)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or []
                                         if f != CLEANUP_FINALIZER]
        return new
    await crd_store.guaranteed_update("", name, drop_finalizer)
    return True
