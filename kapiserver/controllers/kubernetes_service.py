"""The ``kubernetes`` Service in ``default``: how workloads find the API server.

Upstream's kubernetesservice controller, which every API server runs (not
only the leader): every 10 s it creates the Service if it is missing
(cluster IP: the first address of the service range; port 443 ``https``,
targetPort the server's secure port; labels ``component: apiserver``,
``provider: kubernetes``) and, through the lease endpoint reconciler
(``master_leases.py``), renews this server's record and rewrites the
Endpoints and EndpointSlice to list every live server at its advertised
address.  An existing Service is left as it is, as upstream does.  On a clean
shutdown the server takes itself out of the endpoints.
"""
from __future__ import annotations

import ipaddress
from typing import Any, Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.controllers.master_leases import NAMESPACE, PORT_NAME, SERVICE_NAME, EndpointsReconciler
from kapiserver.machinery import errors
from kapiserver.registry.store import Store

log = Logger()

SYNC_INTERVAL_SECONDS = 10.0  # upstream's DefaultEndpointReconcilerInterval
SERVICE_PORT = 443
STOP_TIMEOUT_SECONDS = 5.0


def kubernetes_service(cluster_ip: str, target_port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": SERVICE_NAME, "namespace": NAMESPACE,
                         "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"type": "ClusterIP", "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
                     "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
                     "ports": [{"name": PORT_NAME, "port": SERVICE_PORT, "protocol": "TCP",
                                "targetPort": target_port}]}}


class KubernetesServiceController:
    def __init__(self, services: Store, reconciler: EndpointsReconciler, cluster_ip: str, advertise_address: str,
                 secure_port: Callable[[], Optional[int]], reactor: IReactorTime,
                 interval: float = SYNC_INTERVAL_SECONDS) -> None:
        self.services = services
        self.reconciler = reconciler
        self.cluster_ip = cluster_ip
        self.advertise_address = advertise_address
        self.secure_port = secure_port
        self.reactor = reactor
        self.interval = interval
        self._timer: Any = None
        self._stopped = False
        self._synced_port: Optional[int] = None  # the port our lease record carries
        self._loopback_reported = False

    async def start(self) -> None:
        """Sync now (so a server that is ready shows up at once), then every interval."""
        await self._tick()

    async def stop(self) -> None:
        """Stop syncing and take this server out of the endpoints (bounded: shutdown goes on)."""
        self._stopped = True
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        if self._synced_port is None:
            return
        d = defer.Deferred.fromCoroutine(self.reconciler.reconcile(self.advertise_address, self._synced_port,
                                                                   removing=True))
        d.addTimeout(STOP_TIMEOUT_SECONDS, self.reactor)
        try:
            await d
        except Exception as e:
            log.warn("removing this server from the kubernetes service endpoints failed: {err}", err=e)

    async def _tick(self) -> None:
        if self._stopped:
            return
        try:
            await self.sync()
        except Exception as e:
            log.warn("unable to sync the kubernetes service: {err}", err=e)
        if not self._stopped:
            self._timer = self.reactor.callLater(self.interval, lambda: defer.Deferred.fromCoroutine(self._tick()))

    async def sync(self) -> None:
        port = self.secure_port()
        if not port:
            return  # not listening yet
        await self._ensure_service(port)
        if ipaddress.ip_address(self.advertise_address).is_loopback:
            # Endpoints may not hold loopback addresses (upstream's validation), so a server
            # advertising one has no endpoints, as kube-apiserver; say so once, not every sync.
            if not self._loopback_reported:
                log.warn("the kubernetes service has no endpoints: the advertise address {ip} is a loopback "
                         "address; set advertise_address for clients that use the service",
                         ip=self.advertise_address)
                self._loopback_reported = True
            return
        await self.reconciler.reconcile(self.advertise_address, port)
        self._synced_port = port

    async def _ensure_service(self, port: int) -> None:
        try:
            await self.services.get(NAMESPACE, SERVICE_NAME)
            return
        except errors.StatusError as e:
            if e.code != 404:
                raise
        try:
            await self.services.create(NAMESPACE, kubernetes_service(self.cluster_ip, port))
            log.info("created the kubernetes service at {ip}:{port}", ip=self.cluster_ip, port=SERVICE_PORT)
        except errors.StatusError as e:
            if e.code != 409:
                raise
