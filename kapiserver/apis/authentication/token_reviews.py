"""authentication.k8s.io/v1 TokenReview: "who does this bearer token belong to?"

Create-only and never stored, like upstream's.  kapiserver authenticates
client certificates only and accepts no bearer tokens, so every token a review
asks about is refused the way upstream refuses an unknown one:
``status: {user: {}, error: "invalid bearer token"}``.
"""
from __future__ import annotations

from typing import Any

from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.review import CREATE_ONLY, Answer, ReviewStrategy, review_store_factory

INVALID_TOKEN = "invalid bearer token"


class TokenReviewStrategy(ReviewStrategy):
    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        if not (obj.get("spec") or {}).get("token"):
            raise errors.bad_request("token is required for TokenReview in authentication")
        return []


def _answer(server: Any) -> Answer:
    return lambda obj, user, namespace: {"user": {}, "error": INVALID_TOKEN}


def resource_type() -> ResourceType:
    return ResourceType(group="authentication.k8s.io", version="v1", kind="TokenReview", plural="tokenreviews",
                        singular="tokenreview", namespaced=False, strategy=TokenReviewStrategy(), verbs=CREATE_ONLY,
                        schema_name="io.k8s.api.authentication.v1.TokenReview",
                        make_store=review_store_factory(_answer), table_convertor=False)
