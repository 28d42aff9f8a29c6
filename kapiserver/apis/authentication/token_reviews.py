"""authentication.k8s.io/v1 TokenReview: "who is this token?" (webhook token authentication of other servers).

Create-only and never stored.  The token is checked by the same bearer-token
authenticators that guard requests (static tokens, ServiceAccount tokens),
presented to ``spec.audiences`` (default: the API's audiences); the answer
is ``status.authenticated``, the user (in ``system:authenticated``), the
audiences the token is valid for among those, or ``status.error``.
"""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet import defer

from kapiserver.apis.deps import RegistryDeps
from kapiserver.auth.authenticator import AuthenticationError, AuthResult
from kapiserver.auth.bearertoken import INVALID_TOKEN
from kapiserver.machinery.user import UserInfo, with_authenticated_group
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.review import CREATE_ONLY, Answer, ReviewStrategy, review_store_factory


class TokenReviewStrategy(ReviewStrategy):
    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        spec = obj.get("spec") or {}
        if not isinstance(spec, dict) or not spec.get("token"):
            raise errors.bad_request("token is required for TokenReview in authentication")
        return []


def _answer(deps: RegistryDeps) -> Answer:
    authentication = deps.authentication

    async def answer(obj: dict, user: Optional[UserInfo], namespace: str) -> dict:
        spec = obj.get("spec") or {}
        token = spec.get("token")
        if not isinstance(token, str):
            raise errors.bad_request('TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot '
                                     'unmarshal into Go struct field TokenReviewSpec.spec.token of type string')
        requested = spec.get("audiences") or []
        if not isinstance(requested, list) or not all(isinstance(a, str) for a in requested):
            raise errors.bad_request('TokenReview in version "v1" cannot be handled as a TokenReview: json: cannot '
                                     'unmarshal into Go struct field TokenReviewSpec.spec.audiences of type []string')
        if authentication is None or authentication.tokens is None:
            return {"user": {}, "error": INVALID_TOKEN}
        audiences = tuple(requested) or authentication.api_audiences
        result: Optional[AuthResult] = None
        try:
            outcome = authentication.tokens.authenticate_token(token, audiences)
            result = await outcome if isinstance(outcome, defer.Deferred) else outcome
        except AuthenticationError as e:
            return {"user": {}, "error": str(e)}
        if result is None:
            return {"user": {}, "error": INVALID_TOKEN}
        if audiences and not set(audiences) & set(result.audiences):
            raise errors.internal_error("error validating audiences")
        status: dict = {"authenticated": True, "user": with_authenticated_group(result.user).to_dict()}
        if result.audiences:
            status["audiences"] = list(result.audiences)
        return status
    return answer


def resource_type() -> ResourceType:
    return ResourceType(group="authentication.k8s.io", version="v1", kind="TokenReview",
                        plural="tokenreviews", singular="tokenreview", namespaced=False,
                        strategy=TokenReviewStrategy(), verbs=CREATE_ONLY,
                        schema_name="io.k8s.api.authentication.v1.TokenReview",
                        make_store=review_store_factory(_answer), table_convertor=False)
