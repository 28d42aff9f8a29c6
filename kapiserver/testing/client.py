"""A tiny treq-based JSON client for resource-tree tests."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

import treq
from twisted.internet import defer


@dataclass
class Reply:
    code: int
    body: Any
    raw: bytes
    headers: Any

    def header(self, name: str) -> Optional[str]:
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None


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
        response = await treq.request(method, self.base_url + path, data=data, headers=hdrs,
                                      pool=self.pool, persistent=False)
        content = await treq.content(response)
        try:
            parsed = json.loads(content) if content else None
        except ValueError:
            parsed = None
        return Reply(response.code, parsed, content, response.headers)

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
