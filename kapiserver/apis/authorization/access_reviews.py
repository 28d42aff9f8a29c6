"""authorization.k8s.io/v1 access reviews: "may this user do that?" (``kubectl auth can-i``).

Four create-only kinds answered by the server's authorizer
(auth/authorizer.py), never stored:

* SelfSubjectAccessReview: may *I* do this?
* SubjectAccessReview: may this user/group do this? (cluster-wide)
* LocalSubjectAccessReview: the same, for the namespace of the URL
* SelfSubjectRulesReview: everything I may do in a namespace (``can-i --list``)
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.apis.deps import RegistryDeps
from kapiserver.auth.authorizer import Attributes, decide
from kapiserver.machinery.user import UserInfo
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.review import CREATE_ONLY, Answer, ReviewStrategy, review_store_factory

GROUP = "authorization.k8s.io"
VERSION = "v1"


def _attribute_problems(spec: dict) -> list[errors.Cause]:
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        return [errors.field_invalid("spec.nonResourceAttributes", non_resource,
                                     "cannot be specified in combination with resourceAttributes")]
    if resource is None and non_resource is None:
        return [errors.field_invalid("spec.resourceAttributes", None,
                                     "exactly one of nonResourceAttributes or resourceAttributes must be specified")]
    return []


class SelfReviewStrategy(ReviewStrategy):
    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        return _attribute_problems(obj.get("spec") or {})


class SubjectReviewStrategy(ReviewStrategy):
    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        spec = obj.get("spec") or {}
        causes = _attribute_problems(spec)
        if not spec.get("user") and not spec.get("groups"):
            causes.append(errors.field_invalid("spec.user", spec.get("user") or "",
                                               "at least one of user or group must be specified"))
        return causes


class LocalReviewStrategy(SubjectReviewStrategy):
    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        spec = obj.get("spec") or {}
        resource = spec.get("resourceAttributes")
        if resource is not None and (resource.get("namespace") or "") != namespace:
            raise errors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
        causes = []
        if resource is None:
            causes.append(errors.field_required("spec.resourceAttributes"))
        if spec.get("nonResourceAttributes") is not None:
            causes.append(errors.field_invalid("spec.nonResourceAttributes", spec["nonResourceAttributes"],
                                               "disallowed on this kind of request"))
        if not spec.get("user") and not spec.get("groups"):
            causes.append(errors.field_invalid("spec.user", spec.get("user") or "",
                                               "at least one of user or group must be specified"))
        return causes


def _attributes(spec: dict) -> Attributes:
    resource = spec.get("resourceAttributes")
    if resource is not None:
        return Attributes(verb=resource.get("verb") or "", namespace=resource.get("namespace") or "",
                          api_group=resource.get("group") or "", api_version=resource.get("version") or "",
                          resource=resource.get("resource") or "", subresource=resource.get("subresource") or "",
                          name=resource.get("name") or "")
    non_resource = spec.get("nonResourceAttributes") or {}
    return Attributes(verb=non_resource.get("verb") or "", resource_request=False, path=non_resource.get("path") or "")


def _subject(spec: dict) -> UserInfo:
    return UserInfo(name=spec.get("user") or "", groups=tuple(spec.get("groups") or ()), uid=spec.get("uid") or "",
                    extra={k: tuple(v) for k, v in (spec.get("extra") or {}).items()})


def _status(decision) -> dict:
    """SubjectAccessReviewStatus: allowed, denied (an explicit deny), reason, evaluationError."""
    status: dict = {"allowed": decision.allowed}
    if decision.denied:
        status["denied"] = True
    if decision.reason:
        status["reason"] = decision.reason
    if decision.error:
        status["evaluationError"] = decision.error
    return status


def _self_answer(deps: RegistryDeps) -> Answer:
    async def answer(obj: dict, user: Optional[UserInfo], namespace: str) -> dict:
        return _status(await decide(deps.authorizer, user, _attributes(obj["spec"])))
    return answer


def _subject_answer(deps: RegistryDeps) -> Answer:
    async def answer(obj: dict, user: Optional[UserInfo], namespace: str) -> dict:
        return _status(await decide(deps.authorizer, _subject(obj["spec"]), _attributes(obj["spec"])))
    return answer


def _rules_answer(deps: RegistryDeps) -> Answer:
    def answer(obj: dict, user: Optional[UserInfo], namespace: str) -> dict:
        rules_namespace = (obj.get("spec") or {}).get("namespace") or ""
        if not rules_namespace:
            raise errors.bad_request("no namespace on request")
        rules = deps.authorizer.rules_for(user, rules_namespace)
        status = {"resourceRules": rules.resource_rules, "nonResourceRules": rules.non_resource_rules,
                  "incomplete": rules.incomplete}
        if rules.evaluation_error:
            status["evaluationError"] = rules.evaluation_error
        return status
    return answer


def _review(kind: str, plural: str, strategy: ReviewStrategy, answer_for, namespaced: bool = False) -> ResourceType:
    return ResourceType(group=GROUP, version=VERSION, kind=kind, plural=plural, singular=kind.lower(),
                        namespaced=namespaced, strategy=strategy, verbs=CREATE_ONLY,
                        schema_name=f"io.k8s.api.authorization.v1.{kind}",
                        make_store=review_store_factory(answer_for), table_convertor=False)


def resource_types() -> list[ResourceType]:
    return [
        _review("SelfSubjectAccessReview", "selfsubjectaccessreviews", SelfReviewStrategy(), _self_answer),
        _review("SubjectAccessReview", "subjectaccessreviews", SubjectReviewStrategy(), _subject_answer),
        _review("LocalSubjectAccessReview", "localsubjectaccessreviews", LocalReviewStrategy(), _subject_answer,
                namespaced=True),
        _review("SelfSubjectRulesReview", "selfsubjectrulesreviews", ReviewStrategy(), _rules_answer),
    ]
