"""What every active namespace gets, as upstream's controllers give it:
a ``default`` ServiceAccount (the serviceaccount controller) and the
``kube-root-ca.crt`` ConfigMap holding the cluster CA (the root CA publisher).
Both are recreated when deleted (and the ConfigMap repaired when changed).
Either can be left out, for a kube-controller-manager that runs it."""
from __future__ import annotations

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.core.configmaps import ROOT_CA_CONFIGMAP
from kapiserver.machinery import errors
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.informer import Informer
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()
DEFAULT_SERVICE_ACCOUNT = "default"


class NamespaceDefaultsController:
    def __init__(self, namespaces: Store, serviceaccounts: Store, configmaps: Store, ca_pem: str, reactor: IReactorTime, *,
                 service_account: bool = True, root_ca: bool = True) -> None:
        self.namespaces = namespaces
        self.serviceaccounts = serviceaccounts
        self.configmaps = configmaps
        self.ca_pem = ca_pem
        self.service_account = service_account
        self.root_ca = root_ca
        self.queue = ReconcileQueue("namespace-defaults", self.reconcile, reactor)
        self.informers = [Informer(namespaces, self._on_namespace, reactor)]
        if service_account:
            self.informers.append(Informer(serviceaccounts, self._on_object, reactor,
                                           field_selector=f"metadata.name={DEFAULT_SERVICE_ACCOUNT}"))
        if root_ca:
            self.informers.append(Informer(configmaps, self._on_object, reactor,
                                           field_selector=f"metadata.name={ROOT_CA_CONFIGMAP}"))

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop()
        self.queue.stop()

    def _on_namespace(self, event_type: str, obj: dict) -> None:
        if event_type != "DELETED":
            self.queue.add(obj["metadata"]["name"])

    def _on_object(self, event_type: str, obj: dict) -> None:
        if event_type in ("DELETED", "MODIFIED"):
            self.queue.add(obj["metadata"].get("namespace", ""))

    async def reconcile(self, namespace: str) -> None:
        try:
            ns = await self.namespaces.get("", namespace)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        if ns["metadata"].get("deletionTimestamp"):
            return
        if self.service_account:
            await self._ensure(self.serviceaccounts, namespace, {
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace}})
        if not self.root_ca:
            return
        desired_data = {"ca.crt": self.ca_pem}
        cm = await self._ensure(self.configmaps, namespace, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": namespace,
                         "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to "
                                         "verify the kube-apiserver when using internal endpoints such as the "
                                         "internal service IP or kubernetes.default.svc. No other usage is "
                                         "guaranteed across distributions of Kubernetes clusters."}},
            "data": desired_data})
        if cm is not None and cm.get("data") != desired_data and not cm["metadata"].get("deletionTimestamp"):
            def repair(current):
                current["data"] = dict(desired_data)
                current.pop("binaryData", None)
                return current
            await self.configmaps.guaranteed_update(namespace, ROOT_CA_CONFIGMAP, repair,
                                                    ctx=Context(field_manager=CONTROLLER_MANAGER))

    @staticmethod
    async def _ensure(store: Store, namespace: str, obj: dict):
        name = obj["metadata"]["name"]
        try:
            return await store.get(namespace, name)
        except errors.StatusError as e:
            if e.code != 404:
                raise
        try:
            await store.create(namespace, obj, Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code not in (409, 403, 404):  # exists now, or the namespace is going away
                raise
        return None
