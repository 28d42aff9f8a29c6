"""This server's identity Lease in ``kube-system``, as upstream's APIServerIdentity feature keeps it.

Each kube-apiserver holds a ``coordination.k8s.io/v1`` Lease named after its
``APIServerID``: ``apiserver-`` and the lower-case, unpadded base32 of the first
16 bytes of SHA-256 over the length-prefixed host name and ``kube-apiserver``
(so the same host keeps the same name across restarts). It is labelled
``apiserver.kubernetes.io/identity: kube-apiserver`` and ``kubernetes.io/hostname``,
held by ``<id>_<uuid>`` for 3600 s and renewed every 10 s. Clients count the
API servers of a cluster with it (``kubectl get leases -n kube-system
-l apiserver.kubernetes.io/identity=kube-apiserver``). Every server also
deletes, once an hour, the identity Leases that expired (servers gone for good).

As upstream, servers sharing a host name share the Lease.
"""
from __future__ import annotations

import base64
import datetime
import hashlib
import socket
import struct
from typing import Any, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.machinery import errors, meta
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.store import Store

log = Logger()
NAMESPACE = "kube-system"
IDENTITY_LABEL = "apiserver.kubernetes.io/identity"
HOSTNAME_LABEL = "kubernetes.io/hostname"
COMPONENT = "kube-apiserver"
LEASE_DURATION_SECONDS = 3600
RENEW_INTERVAL_SECONDS = 10.0
GC_INTERVAL_SECONDS = 3600.0


def apiserver_id(hostname: str, component: str = COMPONENT) -> str:
    """upstream's APIServerID (k8s.io/apiserver's NewConfig)."""
    data = b"".join(struct.pack(">H", len(part)) + part for part in (hostname.encode(), component.encode()))
    digest = hashlib.sha256(data).digest()[:16]
    return "apiserver-" + base64.b32encode(digest).decode().rstrip("=").lower()


def _expired(lease: dict, now: datetime.datetime) -> bool:
    """upstream's isLeaseExpired: renewTime + leaseDurationSeconds is past (a lease without them is)."""
    spec = lease.get("spec") or {}
    renew, duration = spec.get("renewTime"), spec.get("leaseDurationSeconds")
    if not renew or duration is None:
        return True
    try:
        renewed = meta.parse_rfc3339(renew)
    except ValueError:
        return True
    return renewed + datetime.timedelta(seconds=duration) < now


class APIServerIdentityController:
    def __init__(self, leases: Store, reactor: IReactorTime, hostname: Optional[str] = None) -> None:
        self.leases = leases
        self.reactor = reactor
        self.hostname = hostname or socket.gethostname()
        self.name = apiserver_id(self.hostname)
        self.holder = f"{self.name}_{meta.new_uid()}"
        self._renew_timer: Any = None
        self._gc_timer: Any = None
        self._stopped = False
        self._failing = False

    def start(self) -> None:
        self._renew()
        self._gc_timer = self.reactor.callLater(GC_INTERVAL_SECONDS, self._gc)

    def stop(self) -> None:
        self._stopped = True
        for timer in (self._renew_timer, self._gc_timer):
            if timer is not None and timer.active():
                timer.cancel()

    def _renew(self) -> None:
        if self._stopped:
            return
        d = defer.Deferred.fromCoroutine(self.renew())

        def failed(f):
            if not self._failing:
                log.warn("unable to renew the apiserver identity lease {name}: {err}", name=self.name,
                         err=f.getErrorMessage())
            self._failing = True

        def ok(_):
            self._failing = False

        def again(_):
            if not self._stopped:
                self._renew_timer = self.reactor.callLater(RENEW_INTERVAL_SECONDS, self._renew)
        d.addCallbacks(ok, failed).addBoth(again)

    async def renew(self) -> None:
        """Create the Lease if it is missing, else assert the labels and a fresh renewTime
        (upstream's lease controller keeps whatever holder the Lease names)."""
        def mutate(current: Optional[dict]) -> dict:
            lease = current or {
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": NAMESPACE},
                "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": LEASE_DURATION_SECONDS}}
            labels = lease["metadata"].get("labels") or {}
            labels[IDENTITY_LABEL] = COMPONENT
            labels[HOSTNAME_LABEL] = self.hostname
            lease["metadata"]["labels"] = labels
            lease.setdefault("spec", {})["renewTime"] = meta.now_rfc3339_micro()
            return lease
        await self.leases.guaranteed_update(NAMESPACE, self.name, mutate, create_if_missing=True,
                                            force_allow_create=True)

    def _gc(self) -> None:
        if self._stopped:
            return
        d = defer.Deferred.fromCoroutine(self.collect())
        d.addErrback(lambda f: log.warn("apiserver identity lease garbage collection failed: {err}",
                                        err=f.getErrorMessage()))
        d.addBoth(lambda _: None if self._stopped else setattr(
            self, "_gc_timer", self.reactor.callLater(GC_INTERVAL_SECONDS, self._gc)))

    async def collect(self) -> list[str]:
        """Delete the expired identity Leases of kube-apiservers; their names."""
        now = datetime.datetime.now(datetime.timezone.utc)
        listed = await self.leases.list(NAMESPACE, ListOptions(parse_label_selector(f"{IDENTITY_LABEL}={COMPONENT}"),
                                                               parse_field_selector("")))
        deleted = []
        for lease in listed.get("items") or []:
            if not _expired(lease, now):
                continue
            md = lease["metadata"]
            try:
                # only the Lease that was read, and only if nobody renewed it since
                await self.leases.delete(NAMESPACE, md["name"], DeleteOptions(
                    precondition_uid=md.get("uid") or "", precondition_resource_version=md.get("resourceVersion") or ""))
                deleted.append(md["name"])
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    raise
        return deleted
