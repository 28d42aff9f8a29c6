"""A tiny treq-based JSON client for resource-tree tests, over a socket or in memory."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional

import treq
from twisted.internet import defer
from twisted.python.failure import Failure


@dataclass
class Reply:
    code: int
    body: Any
    raw: bytes
    headers: Any

    def header(self, name: str) -> Optional[str]:
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None

    def warnings(self) -> list[str]:
        """The texts of the ``Warning: 299 - "..."`` headers, unescaped."""
        texts = []
        for value in self.headers.getRawHeaders("Warning") or ():
            quoted = value.split(" - ", 1)[-1]
            texts.append(re.sub(r'\\(.)', r'\1', quoted[1:-1] if quoted.startswith('"') else quoted))
        return texts


class JSONClient:
    def __init__(self, base_url: str, pool=None) -> None:
        self.base_url = base_url
        self.pool = pool

    async def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                      headers: Optional[dict] = None, raw: Optional[bytes] = None) -> Reply:
        hdrs = {"Accept": ["application/json"]}
        if body is not None or raw is not None:
            hdrs["Content-Type"] = [content_type]
        for k, v in (headers or {}).items():
            hdrs[k] = [v]
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        response, content = await self._exchange(method, self.base_url + path, data, hdrs)
        try:
            parsed = json.loads(content) if content else None
        except ValueError:
            parsed = None
        return Reply(response.code, parsed, content, response.headers)

    async def _exchange(self, method: str, url: str, data: Optional[bytes], headers: dict) -> tuple[Any, bytes]:
        response = await treq.request(method, url, data=data, headers=headers, pool=self.pool, persistent=False)
        return response, await treq.content(response)

    def get(self, path: str, **kw) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self.request("GET", path, **kw))

    def post(self, path: str, body: Any = None, **kw) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self.request("POST", path, body, **kw))

    def put(self, path: str, body: Any = None, **kw) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self.request("PUT", path, body, **kw))

    def patch(self, path: str, body: Any = None, content_type: str = "application/merge-patch+json",
              **kw) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self.request("PATCH", path, body, content_type=content_type, **kw))

    def delete(self, path: str, body: Any = None, **kw) -> defer.Deferred:
        return defer.Deferred.fromCoroutine(self.request("DELETE", path, body, **kw))


class InMemoryClient(JSONClient):
    """The same client driving a resource tree in memory through ``treq.testing.StubTreq``.

    No socket is involved: the handler chain and the delegation chain answer
    through StubTreq's in-memory transport.  Work the tree does off the
    reactor's current turn (storage threads) completes on the real reactor, so
    the transport is pumped until the answer is complete.
    """

    POLL_SECONDS = 0.002

    def __init__(self, root: Any, base_url: str = "https://kapiserver.invalid") -> None:
        from treq.testing import StubTreq
        super().__init__(base_url)
        self.stub = StubTreq(root)

    async def _until(self, d: defer.Deferred) -> Any:
        from twisted.internet import reactor, task
        outcome: list = []
        d.addBoth(outcome.append)
        while True:
            self.stub.flush()
            if outcome:
                break
            await task.deferLater(reactor, self.POLL_SECONDS, lambda: None)
        result = outcome[0]
        if isinstance(result, Failure):
            result.raiseException()
        return result

    async def _exchange(self, method: str, url: str, data: Optional[bytes], headers: dict) -> tuple[Any, bytes]:
        # (StubTreq sets treq's functions on itself at run time: its type does not list them)
        response = await self._until(self.stub.request(method, url, data=data, headers=headers))  # type: ignore[attr-defined]
        return response, await self._until(self.stub.content(response))  # type: ignore[attr-defined]
