"""Extension servers' OpenAPI documents, merged into this server's (upstream's OpenAPI aggregation controllers).

Runs on every server, as upstream's.  For every available remote APIService
it downloads ``/openapi/v2`` (keeping the paths of the APIService's group
version and the definitions they use) and the ``/openapi/v3`` document of that
group version, when the APIService changes and every minute (a v2 document
whose ETag did not change is not downloaded again).  Documents of an
APIService that is gone or unavailable are dropped.  ``on_change`` receives
the v2 parts and v3 documents whenever they change.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Optional

from twisted.internet import defer, task
from twisted.logger import Logger

from kapiserver.aggregator.apiservice_registration import APIServiceRegistration, ProxyTarget
from kapiserver.aggregator.service_resolver import ResolveError, ServiceResolver
from kapiserver.aggregator.transport import ExtensionRequestError, ExtensionTransport, get_document

log = Logger()
REFRESH_SECONDS = 60.0


def _refs(value: Any, found: set[str]) -> None:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            found.add(ref[len("#/definitions/"):])
        for v in value.values():
            _refs(v, found)
    elif isinstance(value, list):
        for v in value:
            _refs(v, found)


def v2_part(spec: dict, group: str, version: str) -> dict:
    """The paths of ``group/version`` in an extension server's v2 document and every definition they use."""
    prefix = f"/apis/{group}/{version}"
    paths = {p: v for p, v in (spec.get("paths") or {}).items() if p == prefix or p.startswith(prefix + "/")}
    definitions = spec.get("definitions") or {}
    wanted: set[str] = set()
    _refs(paths, wanted)
    seen: set[str] = set()
    while wanted - seen:
        name = (wanted - seen).pop()
        seen.add(name)
        _refs(definitions.get(name), wanted)
    return {"paths": paths, "definitions": {n: definitions[n] for n in sorted(seen) if n in definitions}}


class OpenAPIAggregationController:
    def __init__(self, registration: APIServiceRegistration, resolver: ServiceResolver,
                 transport: ExtensionTransport, reactor,
                 on_change: Callable[[list[dict], dict[str, bytes]], None]) -> None:
        self.registration = registration
        self.resolver = resolver
        self.transport = transport
        self.reactor = reactor
        self.on_change = on_change
        # APIService name -> (v2 etag, v2 part, v3 path, v3 body, v3 URL)
        self.documents: dict[str, tuple[str, dict, str, bytes, str]] = {}
        self._loop: Optional[task.LoopingCall] = None
        self._running = False
        self._again = False

    def start(self) -> None:
        self.registration.listeners.append(self._changed)
        self._loop = task.LoopingCall(self.refresh)
        self._loop.clock = self.reactor
        self._loop.start(REFRESH_SECONDS, now=True)

    def stop(self) -> None:
        if self._changed in self.registration.listeners:
            self.registration.listeners.remove(self._changed)
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def _changed(self, name: str) -> None:
        self.reactor.callLater(0, self.refresh)

    def refresh(self) -> defer.Deferred:
        if self._running:
            self._again = True
            return defer.succeed(None)
        self._running = True
        d = defer.Deferred.fromCoroutine(self._refresh())
        d.addErrback(lambda f: log.failure("aggregating OpenAPI documents failed", f))

        def done(_: Any) -> None:
            self._running = False
            if self._again:
                self._again = False
                self.refresh()
        d.addBoth(done)
        return defer.succeed(None)

    async def _refresh(self) -> None:
        targets = {t.name: t for t in self.registration.remote_targets() if t.available}
        changed = False
        for name in [n for n in self.documents if n not in targets]:
            del self.documents[name]
            changed = True
        for name, target in targets.items():
            try:
                found = await self._download(target, self.documents.get(name))
            except (ExtensionRequestError, ResolveError, ValueError) as e:
                log.info("OpenAPI of APIService {name} not downloaded: {err}", name=name, err=e)
                continue
            if found is not None and found != self.documents.get(name):
                self.documents[name] = found
                changed = True
        if changed:
            self.on_change([d[1] for d in self.documents.values()],
                           {d[2]: d[3] for d in self.documents.values() if d[3]})

    async def _download(self, target: ProxyTarget, known: Optional[tuple[str, dict, str, bytes, str]]
                        ) -> Optional[tuple[str, dict, str, bytes, str]]:
        host, port = self.resolver.resolve(target.namespace, target.service, target.port)
        code, headers, body = await get_document(self.transport, target.tls, host, port, "/openapi/v2",
                                                 timeout=30.0, etag=known[0] if known else "")
        if code == 304 and known is not None:
            etag, part = known[0], known[1]
        elif code != 200:
            raise ExtensionRequestError(f"/openapi/v2 answered {code}")
        else:
            etag = headers.get("etag", "")
            part = v2_part(json.loads(body), target.group, target.version)
        path = f"apis/{target.group}/{target.version}"
        v3, url = b"", None
        code, _, index_body = await get_document(self.transport, target.tls, host, port, "/openapi/v3")
        if code == 200:
            url = ((json.loads(index_body).get("paths") or {}).get(path) or {}).get("serverRelativeURL")
            if isinstance(url, str) and url.startswith("/"):
                if known is not None and known[4] == url:  # the URL carries the document's hash
                    v3 = known[3]
                else:
                    code, _, v3_body = await get_document(self.transport, target.tls, host, port, url,
                                                          timeout=30.0)
                    if code == 200:
                        v3 = v3_body
        return etag, part, path, v3, url if v3 and isinstance(url, str) else ""
