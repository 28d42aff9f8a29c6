"""authentication.k8s.io/v1 SelfSubjectReview: "who am I?" (``kubectl auth whoami``).

Create-only and never stored: the answer is the user the request was
authenticated as (from the client certificate: CN and O).
"""
from __future__ import annotations

from kapiserver.apis.deps import RegistryDeps
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.review import CREATE_ONLY, Answer, ReviewStrategy, review_store_factory


def _answer(deps: RegistryDeps) -> Answer:
    return lambda obj, user, namespace: {"userInfo": user.to_dict() if user is not None else {}}


def resource_type() -> ResourceType:
    return ResourceType(group="authentication.k8s.io", version="v1", kind="SelfSubjectReview",
                        plural="selfsubjectreviews", singular="selfsubjectreview", namespaced=False,
                        strategy=ReviewStrategy(), verbs=CREATE_ONLY,
                        schema_name="io.k8s.api.authentication.v1.SelfSubjectReview",
                        make_store=review_store_factory(_answer), table_convertor=False)
