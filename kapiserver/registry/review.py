"""Create-only resources answered from the request, never stored (upstream's review APIs).

``kubectl auth can-i`` POSTs a SelfSubjectAccessReview and reads the answer
from the returned object's ``status``; ``kubectl auth whoami`` does the same
with a SelfSubjectReview.  These kinds are served like any other (discovery,
OpenAPI, the create handler) but their "storage" is a function of the
request: a ``ReviewStore`` validates the body with the kind's strategy, asks
``answer`` for the status and returns the object with it (201, as upstream).
"""
from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Optional, TypeVar, Union

from kapiserver.machinery import errors, meta
from kapiserver.registry.context import Context
from kapiserver.registry.resource_type import ResourceType, Strategy
from kapiserver.registry.store import WriteResult

# (the review object, who asks, the namespace of the URL) -> the status to return (or an awaitable of it)
Answer = Callable[[dict, Any, str], Union[dict, Awaitable[dict]]]

CREATE_ONLY = ("create",)
# what the server gives a kind's make_store (apis/deps.py RegistryDeps)
Deps = TypeVar("Deps")


class ReviewStrategy(Strategy):
    """Checks of a review's spec; ``namespace`` is the URL's (namespaced reviews)."""

    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        """The review's problems, its metadata as sent (cleared after)."""
        return []

    def invalid_kind(self, rtype: ResourceType) -> str:
        """The kind a 422 names (upstream's access reviews name their decoded object's kind: none)."""
        return rtype.kind


class ReviewStore:
    """Answers ``create`` by computing the object's status (a :class:`Creater`, nothing
    stored); the resource type's only verb is ``create``."""

    def __init__(self, rtype: ResourceType, answer: Answer) -> None:
        if not isinstance(rtype.strategy, ReviewStrategy):
            raise TypeError(f"{rtype.kind}: a review kind's strategy is a ReviewStrategy")
        self.rtype = rtype
        self.strategy: ReviewStrategy = rtype.strategy
        self.answer = answer

    async def create_result(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> WriteResult:
        ctx = ctx or Context()
        obj = self.rtype.stamp_type(self.rtype.check_kind(obj))
        self.strategy.default(self.rtype, obj)
        causes = self.strategy.validate_review(self.rtype, obj, namespace)
        if causes:
            raise errors.invalid(self.strategy.invalid_kind(self.rtype), self.rtype.group, "", causes)
        md = meta.metadata(obj)
        md.clear()
        md["creationTimestamp"] = None  # upstream echoes an empty ObjectMeta
        status = self.answer(obj, ctx.user, namespace)
        obj["status"] = await status if inspect.isawaitable(status) else status
        return WriteResult(obj, None)  # nothing stored: the answer is the review itself


def review_store_factory(answer_for: Callable[[Deps], Answer]) -> Callable[[ResourceType, Deps], ReviewStore]:
    """A ResourceType.make_store for a review kind: ``answer_for(deps)`` builds the answer."""
    def make(rtype: ResourceType, deps: Deps) -> ReviewStore:
        return ReviewStore(rtype, answer_for(deps))
    return make

