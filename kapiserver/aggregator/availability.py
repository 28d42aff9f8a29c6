"""The ``Available`` condition of every APIService (upstream's local and remote availability controllers).

Runs on every server, as upstream's do; a status is written only when it
changed, so servers that agree cost no writes.

* A local APIService is ``True``, reason ``Local``.
* A remote one is checked as upstream checks it: the Service exists
  (``ServiceNotFound``), has the APIService's port (``ServicePortError``), its
  EndpointSlices have a ready address for that port (``MissingEndpoints``),
  and a GET of ``/apis/<group>/<version>`` on an endpoint succeeds within 5 s
  (``FailedDiscoveryCheck``, with the error; else ``Passed``, "all checks
  passed").  The probe runs as ``system:kube-aggregator`` in
  ``system:masters`` with this server's front-proxy client certificate and
  does not verify the serving certificate (upstream's probe does not either).

The probe's answer is the extension server's resource list: it is kept for the
merged discovery (``discovery.py``), and replaced on every check.  Checks are
repeated every 30 s (upstream's resync), every 5 s while an APIService is not
available, and at once when its Service or EndpointSlices change or a proxied
request could not reach it.
"""
from __future__ import annotations

import copy
import json
from typing import Callable, Optional

from twisted.logger import Logger

from kapiserver.aggregator.apiservice_registration import APIServiceRegistration, proxy_target
from kapiserver.aggregator.service_resolver import ResolveError, ServiceResolver
from kapiserver.aggregator.transport import ExtensionRequestError, ExtensionTransport, TLSTarget, get_document
from kapiserver.apis.apiregistration import apiservices
from kapiserver.machinery import errors
from kapiserver.registry.context import Context
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()
RESYNC_SECONDS = 30.0
UNAVAILABLE_RECHECK_SECONDS = 5.0


class AvailabilityController:
    def __init__(self, store: Store, registration: APIServiceRegistration, resolver: ServiceResolver,
                 transport: ExtensionTransport, reactor,
                 on_resources: Optional[Callable[[tuple[str, str], Optional[dict]], None]] = None) -> None:
        self.store = store
        self.registration = registration
        self.resolver = resolver
        self.transport = transport
        self.reactor = reactor
        # the extension server's resource list of a group version changed (None: forget it)
        self.on_resources = on_resources
        self.queue = ReconcileQueue("apiservice-availability", self.reconcile, reactor)
        self._stopped = False

    def start(self) -> None:
        self.registration.listeners.append(self.queue.add)
        for name in list(self.registration.apiservices):
            self.queue.add(name)

    def stop(self) -> None:
        self._stopped = True
        if self.queue.add in self.registration.listeners:
            self.registration.listeners.remove(self.queue.add)
        self.queue.stop()

    def service_changed(self, namespace: str, name: str) -> None:
        """A Service or its EndpointSlices changed: check the APIServices pointing at it."""
        for obj in self.registration.all():
            service = (obj.get("spec") or {}).get("service") or {}
            if service.get("namespace") == namespace and service.get("name") == name:
                self.queue.add(obj["metadata"]["name"])

    def recheck(self, name: str) -> None:
        self.queue.add(name)

    async def reconcile(self, name: str) -> None:
        current = self.registration.apiservices.get(name)
        if current is None or self._stopped:
            return
        desired = copy.deepcopy(current)
        if apiservices.is_local(current):
            apiservices.set_condition(desired, "True", apiservices.LOCAL_REASON, apiservices.LOCAL_MESSAGE)
        else:
            status, reason, message = await self._check_remote(current)
            apiservices.set_condition(desired, status, reason, message)
            self.queue.add(name, RESYNC_SECONDS if status == "True" else UNAVAILABLE_RECHECK_SECONDS)
        if desired.get("status") != current.get("status"):
            await self._write_status(name, desired)

    async def _check_remote(self, obj: dict) -> tuple[str, str, str]:
        target = proxy_target(obj)
        assert target is not None
        gv = (target.group, target.version)
        try:
            self.resolver.service_port(target.namespace, target.service, target.port)
            host, port = self.resolver.resolve(target.namespace, target.service, target.port)
        except ResolveError as e:
            self._resources(gv, None)
            return "False", e.reason, e.message
        path = f"/api/{target.version}" if obj["metadata"]["name"] == "v1." else \
            f"/apis/{target.group}/{target.version}"
        url = f"https://{host}:{port}{path}"
        try:
            code, _, body = await get_document(self.transport, TLSTarget(target.tls.server_name, b"", True),
                                               host, port, path)
        except ExtensionRequestError as e:
            return "False", "FailedDiscoveryCheck", str(e)
        if code < 200 or code >= 300:
            return "False", "FailedDiscoveryCheck", f"failing or missing response from {url}: bad status from " \
                                                    f"{url}: {code}"
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        if isinstance(document, dict) and document.get("kind") == "APIResourceList":
            self._resources(gv, document)
        return "True", "Passed", "all checks passed"

    def _resources(self, gv: tuple[str, str], document: Optional[dict]) -> None:
        if self.on_resources is not None:
            self.on_resources(gv, document)

    async def _write_status(self, name: str, desired: dict) -> None:
        status = desired.get("status")

        def mutate(obj: Optional[dict]) -> dict:
            if obj is None:
                raise errors.not_found(apiservices.PLURAL, apiservices.GROUP, name)
            obj["status"] = copy.deepcopy(status)
            return obj
        try:
            await self.store.guaranteed_update("", name, mutate, subresource="status",
                                               ctx=Context(field_manager="kube-apiserver"))
        except errors.StatusError as e:
            if e.code != 404:
                raise
            return
        condition = apiservices.available_condition(desired) or {}
        log.info("APIService {name} is Available={status} ({reason}): {message}", name=name,
                 status=condition.get("status"), reason=condition.get("reason"), message=condition.get("message"))
