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
from kapiserver.machinery.validation import is_valid_label_value, validate_label_name
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.review import CREATE_ONLY, Answer, ReviewStrategy, review_store_factory

GROUP = "authorization.k8s.io"
VERSION = "v1"


def _attribute_problems(spec: dict) -> list[errors.Cause]:
    """Upstream's Validate(Self)SubjectAccessReviewSpec, but for the subject."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    causes = []
    if resource is not None and non_resource is not None:
        causes.append(errors.field_invalid("spec.nonResourceAttributes", non_resource,
                                           "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        causes.append(errors.field_invalid("spec.resourceAttributes", None,
                                           "exactly one of nonResourceAttributes or resourceAttributes must be "
                                           "specified"))
    return causes


def _selector_problems(spec: dict) -> list[errors.Cause]:
    """Upstream's validateResourceAttributes: each selector is a rawSelector or requirements, exactly one, and its
    requirements well formed (operators the server does not know are allowed: newer clients send them)."""
    resource = spec.get("resourceAttributes")
    if not isinstance(resource, dict):
        return []
    causes: list[errors.Cause] = []
    for name in ("fieldSelector", "labelSelector"):
        selector = resource.get(name)
        if not isinstance(selector, dict):
            continue
        at = f"spec.resourceAttributes.{name}"
        raw, requirements = selector.get("rawSelector") or "", selector.get("requirements") or []
        if raw and requirements:
            causes.append(errors.field_invalid(f"{at}.rawSelector", raw,
                                               "may not specified at the same time as requirements"))
        if not raw and not requirements:
            causes.append(errors.field_required(f"{at}.requirements",
                                                f"when {at} is specified, requirements or rawSelector is required"))
        for i, requirement in enumerate(requirements if isinstance(requirements, list) else ()):
            causes += _requirement_problems(requirement if isinstance(requirement, dict) else {},
                                            f"{at}.requirements[{i}]", labels=name == "labelSelector")
    return causes


def _requirement_problems(requirement: dict, at: str, labels: bool) -> list[errors.Cause]:
    """Upstream's Validate{Field,Label}SelectorRequirement with AllowUnknownOperatorInRequirement."""
    causes = []
    key, values = requirement.get("key") or "", requirement.get("values") or []
    if not labels and not key:
        causes.append(errors.field_required(f"{at}.key", "must be specified"))
    operator = requirement.get("operator") or ""
    if operator in ("In", "NotIn") and not values:
        causes.append(errors.field_required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist") and values:
        causes.append(errors.field_forbidden(f"{at}.values",
                                             "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    if labels:
        causes += validate_label_name(key, f"{at}.key")
        for j, value in enumerate(values if isinstance(values, list) else ()):
            value = "" if value is None else str(value)
            causes += [errors.field_invalid(f"{at}.values[{j}]", value, msg) for msg in is_valid_label_value(value)]
    return causes


def _metadata_problems(obj: dict, allowed: tuple[str, ...], message: str) -> list[errors.Cause]:
    """Upstream's check that a review's ObjectMeta is empty (managedFields aside, which the server adds; empty and
    absent alike, as apimachinery's Semantic.DeepEqual has it).  The value shown is the metadata as sent, not
    Go's rendering of the whole ObjectMeta struct."""
    md = obj.get("metadata")
    if not isinstance(md, dict):
        return []
    if all(key in allowed or key == "managedFields" or value in (None, "", 0, False, {}, []) for key, value in md.items()):
        return []
    shown = {key: value for key, value in md.items() if key != "managedFields"}
    return [errors.field_invalid("metadata", shown, message)]


class AccessReviewStrategy(ReviewStrategy):
    def invalid_kind(self, rtype: ResourceType) -> str:
        return ""  # upstream names the decoded object's kind, which is empty: '.authorization.k8s.io "" is invalid'


class SelfReviewStrategy(AccessReviewStrategy):
    """Upstream's ValidateSelfSubjectAccessReview."""

    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        spec = obj.get("spec") or {}
        return _attribute_problems(spec) + _selector_problems(spec) + _metadata_problems(obj, (), "must be empty")


def _subject_problems(spec: dict) -> list[errors.Cause]:
    if not spec.get("user") and not spec.get("groups"):
        return [errors.field_invalid("spec.user", spec.get("user") or "",
                                     "at least one of user or group must be specified")]
    return []


class SubjectReviewStrategy(AccessReviewStrategy):
    """Upstream's ValidateSubjectAccessReview."""

    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        spec = obj.get("spec") or {}
        return (_attribute_problems(spec) + _subject_problems(spec) + _selector_problems(spec)
                + _metadata_problems(obj, (), "must be empty"))


class LocalReviewStrategy(AccessReviewStrategy):
    """Upstream's ValidateLocalSubjectAccessReview (422), then its REST's check of the URL's namespace (400)."""

    def validate_review(self, rtype: ResourceType, obj: dict, namespace: str) -> list[errors.Cause]:
        spec = obj.get("spec") or {}
        md = as_dict(obj.get("metadata"))
        object_namespace = md.get("namespace") or namespace  # the URL's, as upstream's create handler sets it
        causes = (_attribute_problems(spec) + _subject_problems(spec) + _selector_problems(spec)
                  + _metadata_problems(obj, ("namespace",), "must be empty except for namespace"))
        resource = spec.get("resourceAttributes")
        if isinstance(resource, dict) and (resource.get("namespace") or "") != object_namespace:
            causes.append(errors.field_invalid("spec.resourceAttributes.namespace", resource.get("namespace") or "",
                                               "must match metadata.namespace"))
        if spec.get("nonResourceAttributes") is not None:
            causes.append(errors.field_invalid("spec.nonResourceAttributes", spec["nonResourceAttributes"],
                                               "disallowed on this kind of request"))
        if not causes and object_namespace != namespace:
            raise errors.bad_request(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
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
