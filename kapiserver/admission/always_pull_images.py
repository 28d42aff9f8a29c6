"""AlwaysPullImages (upstream's admission plugin of that name; off by default).

Every container, init container and ephemeral container of a Pod created, or
updated with an image it did not have before, gets ``imagePullPolicy:
Always``, so a node pulls (and checks the credentials for) every image
instead of using one another pod pulled.  An update that brings no new image
is left alone.

The validating half refuses such a pod whose containers do not all pull
Always (a later mutating plugin, a webhook, changed them back).  Upstream
returns those field errors as an aggregate, not an API status, so the client
sees a 500 whose message is the NewForbidden text(s).
"""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.apis.core.podspec import all_containers
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes

PLUGIN_NAME = "AlwaysPullImages"
ALWAYS = "Always"


def _images(spec: Any) -> list:
    return [c.get("image") for _, _, c in all_containers(spec)] if isinstance(spec, dict) else []


def _update_without_new_images(attrs: Attributes) -> bool:
    """Upstream's isUpdateWithNoNewImages: every image of the pod was already in the old pod."""
    if attrs.operation != UPDATE:
        return False
    new, old = attrs.obj, attrs.old_obj
    if not isinstance(new, dict) or not isinstance(old, dict):
        return False
    old_images = set(_images(old.get("spec")))
    return all(image in old_images for image in _images(new.get("spec")))


def _pod_spec(attrs: Attributes) -> Optional[dict]:
    if (attrs.rtype.group, attrs.rtype.plural) != ("", "pods") or attrs.subresource:
        return None
    if _update_without_new_images(attrs):
        return None
    spec = attrs.obj.get("spec") if isinstance(attrs.obj, dict) else None
    return spec if isinstance(spec, dict) else None


def aggregate_message(messages: list[str]) -> str:
    """Upstream's utilerrors.Aggregate.Error(): one message as is, several (deduplicated) in brackets."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


class AlwaysPullImages(AdmissionPlugin):
    name = PLUGIN_NAME
    mutating = True
    validating = True
    operations = (CREATE, UPDATE)
    resources = frozenset({("", "pods")})

    async def admit(self, attrs: Attributes) -> None:
        spec = _pod_spec(attrs)
        if spec is None:
            return
        for _, _, container in all_containers(spec):
            container["imagePullPolicy"] = ALWAYS

    async def validate(self, attrs: Attributes) -> None:
        spec = _pod_spec(attrs)
        if spec is None:
            return
        problems = []
        for key, i, container in all_containers(spec):
            policy = container.get("imagePullPolicy") or ""
            if policy != ALWAYS:
                cause = errors.field_not_supported(f"spec.{key}[{i}].imagePullPolicy", policy, [ALWAYS])
                problems.append(admission_forbidden(attrs, f"{cause.field}: {cause.message}").message)
        if problems:
            # not an API status upstream: the response is a 500 with the aggregate's text
            raise errors.StatusError(500, "", aggregate_message(problems))


def always_pull_images(config: Optional[bytes], deps: Any) -> AlwaysPullImages:
    return AlwaysPullImages()
