"""The PVC and PV protection controllers (kube-controller-manager's
``persistentvolumeclaim-protection-controller`` and ``persistentvolume-protection-controller``).

They pair with the StorageObjectInUseProtection admission plugin: every claim
and volume carries the ``kubernetes.io/pvc-protection`` /
``kubernetes.io/pv-protection`` finalizer (added here too to those created
without it, as upstream), and a deleted one keeps it while it is in use:

* a claim is in use while a pod scheduled to a node (``spec.nodeName``) names
  it in a ``persistentVolumeClaim`` volume (or an ``ephemeral`` volume
  creating it, while the pod runs); a terminating claim in use is checked
  again every ``RECHECK_SECONDS`` (upstream is told by a pod informer);
* a volume is in use while it is ``Bound``.

Once unused, the finalizer is removed and the object goes away.
"""
from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IReactorTime

from kapiserver.controllers.informer_controller import InformerController
from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.options import ListOptions
from kapiserver.registry.store import Store

PVC_PROTECTION = "kubernetes.io/pvc-protection"
PV_PROTECTION = "kubernetes.io/pv-protection"
RECHECK_SECONDS = 2.0


def pod_uses_claim(pod: dict, claim: str) -> bool:
    """upstream's podUsesPVC: only scheduled pods hold a claim."""
    spec = pod.get("spec") or {}
    if not spec.get("nodeName"):
        return False
    shut_down = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    pod_name = (pod.get("metadata") or {}).get("name", "")
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if ((volume.get("persistentVolumeClaim") or {}).get("claimName")) == claim:
            return True
        if volume.get("ephemeral") is not None and not shut_down and f"{pod_name}-{volume.get('name', '')}" == claim:
            return True
    return False


class _ProtectionController(InformerController):
    finalizer = ""

    def on_event(self, event_type: str, obj: dict) -> None:
        if event_type == "DELETED":
            return
        md = obj.get("metadata") or {}
        finalizers = md.get("finalizers") or []
        deleting = bool(md.get("deletionTimestamp"))
        if (deleting and self.finalizer in finalizers) or (not deleting and self.finalizer not in finalizers):
            self.queue.add((md.get("namespace", ""), md.get("name", "")))

    async def in_use(self, obj: dict) -> bool:
        raise NotImplementedError

    async def reconcile(self, key: Any) -> None:
        namespace, name = key
        try:
            obj = await self.store.get(namespace, name)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        md = obj["metadata"]
        finalizers = list(md.get("finalizers") or [])
        if not md.get("deletionTimestamp"):
            if self.finalizer not in finalizers:
                await self._set_finalizers(namespace, name, md["resourceVersion"], finalizers + [self.finalizer])
            return
        if self.finalizer not in finalizers:
            return
        if await self.in_use(obj):
            self.queue.add(key, delay=RECHECK_SECONDS)
            return
        await self._set_finalizers(namespace, name, md["resourceVersion"],
                                   [f for f in finalizers if f != self.finalizer])

    async def _set_finalizers(self, namespace: str, name: str, resource_version: str, finalizers: list) -> None:
        def change(current: Any) -> dict:
            current["metadata"]["finalizers"] = finalizers
            current["metadata"]["resourceVersion"] = resource_version
            return current
        try:
            await self.store.guaranteed_update(namespace, name, change, ctx=Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code == 409:  # changed meanwhile: decide again on the new state
                self.queue.add((namespace, name), delay=0.05)
            elif e.code != 404:
                raise


class PVCProtectionController(_ProtectionController):
    finalizer = PVC_PROTECTION
    queue_name = "pvcprotection"

    def __init__(self, claims: Store, pods: Store, reactor: IReactorTime) -> None:
        super().__init__(claims, reactor)
        self.pods = pods

    async def in_use(self, obj: dict) -> bool:
        md = obj["metadata"]
        listed = await self.pods.list(md.get("namespace", ""), ListOptions(parse_label_selector(""),
                                                                           parse_field_selector("")))
        return any(pod_uses_claim(pod, md["name"]) for pod in listed["items"])


class PVProtectionController(_ProtectionController):
    finalizer = PV_PROTECTION
    queue_name = "pvprotection"

    async def in_use(self, obj: dict) -> bool:
        return (obj.get("status") or {}).get("phase") == "Bound"
