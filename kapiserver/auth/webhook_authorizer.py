"""The Webhook authorizer (``authorization.modes: [..., Webhook]``): ask an HTTPS service.

Upstream's webhook authorizer: each request's attributes are POSTed as an
``authorization.k8s.io/v1`` (or ``v1beta1``) SubjectAccessReview to the
server a kubeconfig-format file names; ``status.allowed`` allows,
``status.denied`` denies (ending the chain), neither is no opinion.  Answers
are cached by the review's spec: allowing ones for
``cache_authorized_ttl_seconds`` (5 minutes), the others for
``cache_unauthorized_ttl_seconds`` (30 seconds).

A call that fails (unreachable, 5xx, 429, timeout after 30 s) is retried
with upstream's backoff (0.5 s, growing 1.5x, 5 attempts); when it still
fails the authorizer has no opinion and reports the error, so the request is
answered by the next authorizer, or a 500 when none allows it, as upstream's
legacy flags behave (failure policy NoOpinion).  The webhook cannot list a
user's rules: SelfSubjectRulesReview reports ``incomplete``.
"""
from __future__ import annotations

import collections
from typing import Any, Optional, Union

import orjson
import treq
from twisted.internet import defer, task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.auth.authorizer import Attributes, Decision, Rules
from kapiserver.machinery import codec
from kapiserver.machinery.user import UserInfo
from kapiserver.auth.webhook_kubeconfig import WebhookTarget
from kapiserver.machinery.go_http_client import CLIENT_TIMEOUT, describe_post_failure

log = Logger()

TIMEOUT_SECONDS = 30.0
# upstream's DefaultAuthWebhookRetryBackoff (without jitter)
RETRY_FIRST_DELAY = 0.5
RETRY_FACTOR = 1.5
RETRY_ATTEMPTS = 5
CACHE_ENTRIES = 8192
MAX_RESPONSE_BYTES = 1024 * 1024
RULES_UNSUPPORTED = "webhook authorizer does not support user rule resolution"


class _CallFailed(Exception):
    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


def review_spec(user: Optional[UserInfo], attributes: Attributes, version: str = "v1") -> dict:
    """The SubjectAccessReview spec for a request, keys in upstream's order, empty fields left out."""
    spec: dict = {}
    if attributes.resource_request:
        resource = {"namespace": attributes.namespace, "verb": attributes.verb, "group": attributes.api_group,
                    "version": attributes.api_version, "resource": attributes.resource,
                    "subresource": attributes.subresource, "name": attributes.name}
        spec["resourceAttributes"] = {k: v for k, v in resource.items() if v}
    else:
        spec["nonResourceAttributes"] = {k: v for k, v in (("path", attributes.path), ("verb", attributes.verb)) if v}
    if user is not None:
        if user.name:
            spec["user"] = user.name
        if user.groups:
            spec["groups" if version == "v1" else "group"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        if user.uid:
            spec["uid"] = user.uid
    return spec


def decision_from(status: dict) -> Decision:
    allowed, denied = bool(status.get("allowed")), bool(status.get("denied"))
    reason: str = status["reason"] if isinstance(status.get("reason"), str) else ""
    if allowed and denied:
        return Decision(False, reason, denied=True,
                        error="webhook subject access review returned both allow and deny response")
    return Decision(allowed, reason, denied=denied)



class WebhookAuthorizer:
    def __init__(self, target: WebhookTarget, version: str, authorized_ttl: float, unauthorized_ttl: float,
                 reactor: IReactorTime) -> None:
        self.target = target
        self.version = version
        self.authorized_ttl = authorized_ttl
        self.unauthorized_ttl = unauthorized_ttl
        self.reactor = reactor
        self._client: Any = None
        self._pool: Any = None
        self._cache: collections.OrderedDict[bytes, tuple[float, Decision]] = collections.OrderedDict()
        self.calls = 0  # reviews sent (tests, metrics)

    def authorize(self, user: Optional[UserInfo], attributes: Attributes) -> Union[Decision, defer.Deferred]:
        spec = review_spec(user, attributes, self.version)
        key = orjson.dumps(spec)
        cached = self._cache.get(key)
        if cached is not None:
            expires, decision = cached
            if expires > self.reactor.seconds():
                self._cache.move_to_end(key)
                return decision
            del self._cache[key]
        return defer.Deferred.fromCoroutine(self._review(spec, key))

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> Rules:
        return Rules(incomplete=True, evaluation_error=RULES_UNSUPPORTED)

    async def close(self) -> None:
        """Close the kept-alive connections (server shutdown)."""
        if self._pool is not None:
            pool, self._pool, self._client = self._pool, None, None
            await pool.closeCachedConnections()

    async def _review(self, spec: dict, key: bytes) -> Decision:
        body = orjson.dumps({"apiVersion": f"authorization.k8s.io/{self.version}", "kind": "SubjectAccessReview",
                             "metadata": {"creationTimestamp": None}, "spec": spec})
        delay = RETRY_FIRST_DELAY
        for attempt in range(RETRY_ATTEMPTS):
            try:
                status = await self._post(body)
                break
            except _CallFailed as e:
                if not e.retry or attempt + 1 == RETRY_ATTEMPTS:
                    log.error("Failed to make webhook authorizer request: {err}", err=str(e))
                    return Decision(False, error=str(e))
                await task.deferLater(self.reactor, delay, lambda: None)
                delay *= RETRY_FACTOR
        decision = decision_from(status)
        ttl = self.authorized_ttl if decision.allowed else self.unauthorized_ttl
        if ttl > 0:
            # (8,192 keys kept in orjson's 4 KB buffers would hold 32 MB: codec.exact_size)
            self._cache[codec.exact_size(key)] = (self.reactor.seconds() + ttl, decision)
            if len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return decision

    async def _post(self, body: bytes) -> dict:
        if self._client is None:
            self._client, self._pool = self.target.client(self.reactor)
        url = self.target.url
        self.calls += 1

        async def call() -> tuple[int, bytes]:
            response = await self._client.post(url, data=body, headers={
                "Content-Type": ["application/json"], "Accept": ["application/json, */*"],
                "User-Agent": ["kapiserver-authorization-webhook"], **self.target.headers})
            return response.code, await treq.content(response)

        d = defer.Deferred.fromCoroutine(call())
        d.addTimeout(TIMEOUT_SECONDS, self.reactor)
        try:
            code, content = await d
        except Exception as e:
            raise _CallFailed(describe_post_failure(e, url, CLIENT_TIMEOUT), retry=True) from None
        if not 200 <= code <= 299:
            detail = content[:256].decode("utf-8", "replace").strip()
            raise _CallFailed(f'an error on the server ("{detail}") has prevented the request from succeeding '
                              f"(post subjectaccessreviews.authorization.k8s.io)", retry=code == 429 or code >= 500)
        if len(content) > MAX_RESPONSE_BYTES:
            raise _CallFailed("the webhook response is too large", retry=False)
        try:
            review = orjson.loads(content)
        except orjson.JSONDecodeError as e:
            raise _CallFailed(f"cannot decode the webhook response: {e}", retry=False) from None
        if not isinstance(review, dict) or not isinstance(review.get("status") or {}, dict):
            raise _CallFailed("the webhook response is not a SubjectAccessReview", retry=False)
        return review.get("status") or {}
