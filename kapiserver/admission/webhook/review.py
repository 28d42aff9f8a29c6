"""AdmissionReview requests and responses (admission.k8s.io v1 and v1beta1), as upstream's
webhook/request package builds and checks them."""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.machinery.meta import new_uid
from kapiserver.machinery.user import UserInfo
from kapiserver.registry.admission import Attributes

V1 = "admission.k8s.io/v1"
V1BETA1 = "admission.k8s.io/v1beta1"
ACCEPTED_VERSIONS = ("v1", "v1beta1")
JSON_PATCH = "JSONPatch"


class InvalidResponse(Exception):
    """The webhook's answer breaks the protocol (upstream: ``received invalid webhook response``)."""


def review_version(versions: Sequence[str]) -> Optional[str]:
    """The first of the webhook's admissionReviewVersions this server speaks."""
    return next((v for v in versions if v in ACCEPTED_VERSIONS), None)


def user_info(user: Optional[UserInfo]) -> dict:
    if user is None:
        return {}
    out: dict = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def build_request(version: str, attrs: Attributes, obj: Optional[dict], old_obj: Optional[dict],
                  resource: GroupVersionResource, kind: GroupVersionKind) -> tuple[str, dict]:
    """``(uid, review)``: the AdmissionReview of ``version`` sent to one webhook; ``obj`` and
    ``old_obj`` are the objects in the version the webhook matched (``resource``/``kind``)."""
    uid = new_uid()
    request: dict[str, Any] = {
        "uid": uid,
        "kind": kind.to_dict(),
        "resource": resource.to_dict(),
    }
    if attrs.subresource:
        request["subResource"] = attrs.subresource
    request["requestKind"] = attrs.gvk.to_dict()
    request["requestResource"] = attrs.resource.to_dict()
    if attrs.subresource:
        request["requestSubResource"] = attrs.subresource
    if attrs.name:
        request["name"] = attrs.name
    if attrs.namespace:
        request["namespace"] = attrs.namespace
    request["operation"] = attrs.operation
    request["userInfo"] = user_info(attrs.user)
    request["object"] = obj
    request["oldObject"] = old_obj
    request["dryRun"] = attrs.dry_run
    request["options"] = attrs.options
    api_version = V1 if version == "v1" else V1BETA1
    return uid, {"kind": "AdmissionReview", "apiVersion": api_version, "request": request}


@dataclass(eq=False, repr=False)
class AdmissionResponse:
    allowed: bool
    patch: bytes = b""
    patch_type: str = ""
    result: Optional[dict] = None
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)


def verify_response(version: str, uid: str, mutating: bool, review: Any) -> AdmissionResponse:
    """Upstream's VerifyAdmissionResponse; raises InvalidResponse with its wording."""
    if not isinstance(review, dict):
        raise InvalidResponse("webhook response was absent")
    response = review.get("response")
    if not isinstance(response, dict):
        raise InvalidResponse("webhook response was absent")
    raw_patch = response.get("patch")
    patch_type = response.get("patchType")
    if version == "v1":
        got_uid = response.get("uid") or ""
        if got_uid != uid:
            raise InvalidResponse(f'expected response.uid="{uid}", got "{got_uid}"')
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        if review.get("apiVersion") != V1 or review.get("kind") != "AdmissionReview":
            raise InvalidResponse(f"expected webhook response of {V1}, Kind=AdmissionReview, got {got}")
        if mutating:
            if raw_patch and patch_type is None:
                raise InvalidResponse("webhook returned response.patch but not response.patchType")
            if not raw_patch and patch_type is not None:
                raise InvalidResponse("webhook returned response.patchType but not response.patch")
            if patch_type is not None and not patch_type:
                raise InvalidResponse(f'webhook returned invalid response.patchType of "{patch_type}"')
        else:
            if raw_patch:
                raise InvalidResponse("validating webhook may not return response.patch")
            if patch_type is not None:
                raise InvalidResponse("validating webhook may not return response.patchType")
    elif not mutating:
        raw_patch, patch_type = None, None
    elif raw_patch:
        patch_type = JSON_PATCH
    out = AdmissionResponse(allowed=response.get("allowed") is True)
    if isinstance(response.get("status"), dict):
        out.result = response["status"]
    warnings = response.get("warnings")
    if isinstance(warnings, list):
        out.warnings = [w for w in warnings if isinstance(w, str)]
    annotations = response.get("auditAnnotations")
    if isinstance(annotations, dict):
        out.audit_annotations = {str(k): str(v) for k, v in annotations.items()}
    if mutating and raw_patch:
        out.patch_type = patch_type or ""
        out.patch = _decode_patch(raw_patch)
    return out


def _decode_patch(raw: Any) -> bytes:
    """``response.patch``: base64 of a JSON patch document (Go's []byte in JSON)."""
    if not isinstance(raw, str):
        raise InvalidResponse("json: cannot unmarshal response.patch into Go value of type []uint8")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as e:
        raise InvalidResponse(f"illegal base64 data in response.patch: {e}") from None
