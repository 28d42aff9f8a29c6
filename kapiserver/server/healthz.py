"""``/healthz``, ``/livez`` and ``/readyz``: named checks in upstream's plain-text format.

A check is a callable that returns ``None`` (or an awaitable resolving to
``None``) when healthy and raises when not.  Output matches kube-apiserver's
``k8s.io/apiserver/pkg/server/healthz``: ``ok`` when all pass (the listing
with ``?verbose``), the listing with reasons withheld and ``<kind> check
failed`` with status 500 when one fails, ``?exclude=<name>`` to skip a check,
and ``/<kind>/<name>`` for a single check.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable, Optional, Union
from urllib.parse import parse_qs, unquote

from twisted.internet import defer
from twisted.logger import Logger
from twisted.web import resource, server

from kapiserver.machinery import codec, errors

log = Logger()

Check = Callable[[], Union[Awaitable[None], None]]
KINDS = ("healthz", "livez", "readyz")


@dataclass(eq=False, repr=False)
class _Entry:
    name: str
    check: Check
    kinds: tuple[str, ...]


class HealthChecks:
    """The registry of named checks shared by the three health endpoints.

    Starts with upstream's defaults: ``ping`` and ``log`` everywhere, and
    ``shutdown`` on ``/readyz`` only (failing once :meth:`begin_shutdown` ran,
    so load balancers stop sending traffic while requests drain).
    """

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self.shutting_down = False
        self.add("ping", lambda: None)
        self.add("log", lambda: None)
        self.add("shutdown", self._shutdown_check, kinds=("readyz",))

    def add(self, name: str, check: Check, kinds: Iterable[str] = KINDS) -> None:
        """Register ``check`` under ``name`` for the given endpoints (all three by default)."""
        kinds = tuple(kinds)
        for kind in kinds:
            if kind not in KINDS:
                raise ValueError(f"unknown health endpoint {kind!r}")
        if any(e.name == name for e in self._entries):
            raise ValueError(f"health check {name!r} is already registered")
        self._entries.append(_Entry(name, check, kinds))

    def names(self, kind: str) -> list[str]:
        return [e.name for e in self._ordered() if kind in e.kinds]

    def _ordered(self) -> list[_Entry]:
        """Registration order, except that ``shutdown`` comes last, as upstream lists it."""
        return sorted(self._entries, key=lambda e: e.name == "shutdown")

    def begin_shutdown(self) -> None:
        self.shutting_down = True

    def _shutdown_check(self) -> None:
        if self.shutting_down:
            raise RuntimeError("process is shutting down")

    async def run_one(self, kind: str, name: str) -> Optional[Exception]:
        """Run one check; the exception it raised, or None if it passed.  KeyError if unknown."""
        for entry in self._entries:
            if entry.name == name and kind in entry.kinds:
                return await _run(entry.check)
        raise KeyError(name)

    async def run(self, kind: str, exclude: Iterable[str] = ()) -> list[tuple[str, Optional[Exception]]]:
        """Run every check of ``kind`` (concurrently) except ``exclude``; results in registration order."""
        skip = set(exclude)
        entries = [e for e in self._ordered() if kind in e.kinds and e.name not in skip]
        results = await defer.gatherResults(
            [defer.Deferred.fromCoroutine(_run(e.check)) for e in entries], consumeErrors=True)
        return [(e.name, r) for e, r in zip(entries, results)]

    async def healthy(self, kind: str) -> bool:
        return all(err is None for _, err in await self.run(kind))


async def _run(check: Check) -> Optional[Exception]:
    try:
        result = check()
        if inspect.isawaitable(result):
            await result
    except Exception as e:  # a failing check is data, not an error of the endpoint
        return e
    return None


def _text(request: server.Request, code: int, body: str) -> bytes:
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    request.setHeader(b"x-content-type-options", b"nosniff")
    return body.encode("utf-8")


class HealthResource(resource.Resource):
    """One of ``/healthz``, ``/livez``, ``/readyz`` (and their ``/<kind>/<check>`` children)."""

    isLeaf = True

    def __init__(self, kind: str, checks: HealthChecks) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown health endpoint {kind!r}")
        self.kind = kind
        self.checks = checks

    def _check_name(self, request: server.Request) -> str:
        """The part of the path after ``/<kind>/`` (check names may contain '/')."""
        path = unquote(request.path.decode("utf-8", "replace")).strip("/")
        parts = path.split("/")
        if self.kind in parts:
            parts = parts[parts.index(self.kind) + 1:]
        return "/".join(p for p in parts if p)

    def render(self, request: server.Request):
        d = defer.Deferred.fromCoroutine(self._respond(request))
        d.addErrback(lambda f: log.failure("health endpoint failed", f))
        return server.NOT_DONE_YET

    async def _respond(self, request: server.Request) -> None:
        finished: list[object] = []

        def done(result: object) -> None:
            finished.append(result)
        request.notifyFinish().addBoth(done)
        name = self._check_name(request)
        if name:
            body = await self._single(request, name)
        else:
            body = await self._all(request)
        if not finished:
            if request.method != b"HEAD":
                request.write(body)
            request.finish()

    async def _single(self, request: server.Request, name: str) -> bytes:
        try:
            err = await self.checks.run_one(self.kind, name)
        except KeyError:
            status = errors.resource_not_found()
            request.setResponseCode(404)
            request.setHeader(b"content-type", b"application/json")
            return codec.encode_json(status.to_status())
        if err is not None:
            return _text(request, 500, f"internal server error: {err}\n")
        return _text(request, 200, "ok")

    async def _all(self, request: server.Request) -> bytes:
        # twisted's request.args drops valueless keys such as ``?verbose``: parse the URI ourselves.
        query = request.uri.decode("utf-8", "replace").partition("?")[2]
        args = parse_qs(query, keep_blank_values=True)
        exclude = args.get("exclude", [])
        names = set(self.checks.names(self.kind))
        excluded = [n for n in exclude if n in names]
        unmatched = sorted({n for n in exclude if n not in names})
        results = await self.checks.run(self.kind, excluded)
        lines, failed = [], []
        by_name = dict(results)
        for n in self.checks.names(self.kind):
            if n in excluded:
                lines.append(f"[+]{n} excluded: ok")
                continue
            err = by_name[n]
            if err is None:
                lines.append(f"[+]{n} ok")
            else:
                lines.append(f"[-]{n} failed: reason withheld")
                failed.append(n)
                log.info("{kind} check {name} failed: {error}", kind=self.kind, name=n, error=err)
        if unmatched:
            quoted = ",".join('"' + n.replace('"', '\\"') + '"' for n in unmatched)
            lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        listing = "".join(line + "\n" for line in lines)
        if failed:
            return _text(request, 500, f"{listing}{self.kind} check failed\n")
        if "verbose" not in args:
            return _text(request, 200, "ok")
        return _text(request, 200, f"{listing}{self.kind} check passed\n")


def health_resource(kind: str, checks: HealthChecks) -> resource.Resource:
    """The twisted.web resource serving ``/<kind>`` and ``/<kind>/<check name>``."""
    return HealthResource(kind, checks)
