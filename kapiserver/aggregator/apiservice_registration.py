"""The APIServices this server routes by (upstream's APIServiceRegistrationController).

Runs on every server, as upstream: an informer over the APIService Store
keeps the current APIServices in memory; a group version whose APIService
names a Service is proxied to it (``kapiserver/aggregator/proxy.py``), a
local one stays with the rest of the delegation chain.  Listeners (the
discovery and OpenAPI caches, the availability controller) are told the name
of every APIService that changed.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from twisted.internet.interfaces import IReactorTime

from kapiserver.apis.apiregistration import apiservices
from kapiserver.aggregator.transport import TLSTarget, decode_ca_bundle
from kapiserver.machinery.meta import without_metadata
from kapiserver.registry.informer import Informer, keys_only
from kapiserver.registry.store import Store


class ProxyTarget(NamedTuple):
    """How to reach the extension server of one non-local APIService."""

    name: str
    group: str
    version: str
    namespace: str
    service: str
    port: int
    tls: TLSTarget
    available: bool


def proxy_target(apiservice: dict) -> Optional[ProxyTarget]:
    """None for a local APIService."""
    spec = apiservice.get("spec") or {}
    service = spec.get("service")
    if not service:
        return None
    namespace, name = service.get("namespace") or "", service.get("name") or ""
    port = service.get("port") or apiservices.DEFAULT_SERVICE_PORT
    return ProxyTarget(name=apiservice["metadata"]["name"], group=spec.get("group") or "",
                       version=spec.get("version") or "", namespace=namespace, service=name, port=int(port),
                       tls=TLSTarget(f"{name}.{namespace}.svc", decode_ca_bundle(spec.get("caBundle")),
                                     bool(spec.get("insecureSkipTLSVerify"))),
                       available=apiservices.is_available(apiservice))


class APIServiceRegistration:
    def __init__(self, store: Store, reactor: IReactorTime) -> None:
        self.store = store
        self.apiservices: dict[str, dict] = {}
        self._targets: dict[tuple[str, str], ProxyTarget] = {}
        self.generation = 0
        self.listeners: list[Callable[[str], None]] = []
        # the APIServices are held here, without managedFields (discovery, proxying and the availability
        # controller read their spec, status and name): the informer keeps only their keys
        self.informer = Informer(store, self._on_event, reactor, after_list=self._after_list, keep=keys_only)

    def start(self) -> None:
        self.informer.start()

    def stop(self) -> None:
        self.informer.stop()

    @property
    def synced(self):
        return self.informer.synced

    # ------------------------------------------------------------ lookups

    def target(self, group: str, version: str) -> Optional[ProxyTarget]:
        """The extension server serving ``group/version``, None when it is served here."""
        return self._targets.get((group, version))

    def remote_targets(self) -> list[ProxyTarget]:
        return list(self._targets.values())

    def has_remote_group(self, group: str) -> bool:
        return any(g == group for g, _ in self._targets)

    def all(self) -> list[dict]:
        return list(self.apiservices.values())

    # ------------------------------------------------------------ informer

    def _set(self, obj: dict) -> None:
        name = obj["metadata"]["name"]
        old = self.apiservices.get(name)
        self.apiservices[name] = without_metadata(obj)
        if old is not None:
            self._targets.pop(apiservices.group_version(old), None)
        target = proxy_target(obj)
        if target is not None:
            self._targets[(target.group, target.version)] = target
        self._changed(name)

    def _remove(self, name: str) -> None:
        old = self.apiservices.pop(name, None)
        if old is not None:
            self._targets.pop(apiservices.group_version(old), None)
            self._changed(name)

    def _changed(self, name: str) -> None:
        self.generation += 1
        for listener in list(self.listeners):
            listener(name)

    def _on_event(self, event_type: str, obj: dict) -> None:
        if event_type == "DELETED":
            self._remove(obj["metadata"]["name"])
        else:
            self._set(obj)

    def _after_list(self) -> None:
        listed = {name for _, name in self.informer.objects}
        for name in [n for n in self.apiservices if n not in listed]:
            self._remove(name)
