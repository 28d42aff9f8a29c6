"""MutatingAdmissionWebhook: mutating webhooks, called one after the other (upstream's
mutating dispatcher).

Each webhook sees the object as the previous ones left it.  A JSON patch it
returns is applied, and the result decoded again as the kind's objects are
(fields the schema does not know dropped, defaults applied); the strategy
validates it later like any request.  Webhooks with ``reinvocationPolicy:
IfNeeded`` are called once more when a later plugin changed the object after
them (the chain's second mutating round).
"""
from __future__ import annotations

from typing import Any

import orjson
from twisted.logger import Logger

from kapiserver.admission.errors import CallingWebhookError, webhook_denied
from kapiserver.admission.webhook import review
from kapiserver.admission.webhook.generic import Invocation, VersionedObjects, WebhookPluginBase
from kapiserver.machinery import codec, errors
from kapiserver.registry.admission import CONNECT, CREATE, DELETE, UPDATE, Attributes

log = Logger()

PLUGIN_NAME = "MutatingAdmissionWebhook"
PATCH_ANNOTATION_PREFIX = "patch.webhook.admission.k8s.io/"
MUTATION_ANNOTATION_PREFIX = "mutation.webhook.admission.k8s.io/"
FAILED_OPEN_PREFIX = "failed-open." + MUTATION_ANNOTATION_PREFIX


class _ReinvokeState:
    """Upstream's webhookReinvokeContext: which reinvocable webhooks ran, which must run again."""

    def __init__(self) -> None:
        self.last_output: Any = None
        self.previously_invoked: set[str] = set()
        self.reinvoke: set[str] = set()

    def require_reinvoking_previous(self) -> None:
        if self.previously_invoked:
            self.reinvoke |= self.previously_invoked
            self.previously_invoked = set()


class MutatingWebhookPlugin(WebhookPluginBase):
    name = PLUGIN_NAME
    mutating = True
    operations = (CREATE, UPDATE, DELETE, CONNECT)
    plural = "mutatingwebhookconfigurations"
    is_mutating = True

    async def admit(self, attrs: Attributes) -> None:
        hooks = await self.hooks_for(attrs)
        if not hooks:
            return
        ctx = attrs.reinvocation
        state = ctx.value(PLUGIN_NAME)
        if state is None:
            state = _ReinvokeState()
            ctx.set_value(PLUGIN_NAME, state)
        if ctx.is_reinvoke and state.last_output != attrs.obj:
            state.require_reinvoking_previous()
        versioned = VersionedObjects(attrs)
        round_ = 1 if ctx.is_reinvoke else 0
        try:
            for index, hook in enumerate(hooks):
                invocation = await self.should_call(hook, attrs, versioned)
                if invocation is None:
                    continue
                if ctx.is_reinvoke and hook.uid not in state.reinvoke:
                    continue
                try:
                    changed = await self._call(invocation, attrs, versioned, round_, index)
                except CallingWebhookError as e:
                    if hook.reinvoke_if_needed:
                        state.previously_invoked.add(hook.uid)
                    if hook.ignore_failures:
                        log.warn("Failed calling webhook, failing open {name}: {err}", name=hook.name, err=e)
                        attrs.add_annotation(f"{FAILED_OPEN_PREFIX}round_{round_}_index_{index}", hook.name)
                        continue
                    log.warn("Failed calling webhook, failing closed {name}: {err}", name=hook.name, err=e)
                    raise e.status_error() from None
                if changed:
                    state.require_reinvoking_previous()
                    ctx.should_reinvoke = True
                if hook.reinvoke_if_needed:
                    state.previously_invoked.add(hook.uid)
        finally:
            state.last_output = codec.copy_json(attrs.obj) if attrs.obj is not None else None

    async def _call(self, invocation: Invocation, attrs: Attributes, versioned: VersionedObjects, round_: int,
                    index: int) -> bool:
        hook = invocation.webhook
        obj, old = await versioned.objects(invocation)
        changed = False
        try:
            result = await self.call(invocation, attrs, obj, old)
            if not result.allowed:
                raise webhook_denied(hook.name, result.result)
            if not result.patch:
                return False
            from kapiserver.machinery import jsonpatch  # with the first webhook that patches
            try:
                ops = orjson.loads(result.patch)
                jsonpatch.validate_json_patch(ops)
            except (orjson.JSONDecodeError, errors.StatusError) as e:
                raise errors.internal_error(e.message if isinstance(e, errors.StatusError) else str(e)) from None
            if not ops:
                return False
            if obj is None or attrs.obj is None:
                raise errors.internal_error(f'admission webhook "{hook.name}" attempted to modify the object, which '
                                            "is not supported for this operation")
            if result.patch_type != review.JSON_PATCH:
                raise CallingWebhookError(hook.name, f'unsupported patch type "{result.patch_type}"')
            try:
                patched = jsonpatch.apply_json_patch(obj, ops)
            except errors.StatusError as e:
                causes = (e.details or {}).get("causes") or [{}]
                raise errors.internal_error(causes[0].get("message") or e.message) from None
            if not isinstance(patched, dict):
                raise errors.internal_error("the patched object is not a JSON object")
            self._redecode(invocation, patched)
            changed = patched != obj
            annotation = {"configuration": hook.configuration_name, "webhook": hook.name, "patch": ops,
                          "patchType": review.JSON_PATCH}
            attrs.add_annotation(f"{PATCH_ANNOTATION_PREFIX}round_{round_}_index_{index}",
                                 orjson.dumps(annotation).decode())
            if changed:
                back = await versioned.back(patched, invocation)
                attrs.obj.clear()
                attrs.obj.update(back)
                versioned.forget()
            return changed
        finally:
            attrs.add_annotation(f"{MUTATION_ANNOTATION_PREFIX}round_{round_}_index_{index}", orjson.dumps(
                {"configuration": hook.configuration_name, "webhook": hook.name, "mutated": changed}).decode())

    def _redecode(self, invocation: Invocation, patched: dict) -> None:
        """Decode the patched object again as its kind: unknown fields dropped, defaults applied."""
        rtype = invocation.rtype
        kind = invocation.kind
        if (kind.group, kind.version, kind.kind) != (rtype.group, rtype.version, rtype.kind):
            return  # a subresource's own kind (Scale, Eviction): nothing to decode against here
        patched["apiVersion"], patched["kind"] = rtype.api_version, rtype.kind
        if not rtype.is_crd and rtype.schema_name:
            from kapiserver.machinery.fieldvalidation import drop_unknown_fields
            drop_unknown_fields(patched, {"$ref": f"#/definitions/{rtype.schema_name}"}, self.deps.schema_resolver)
        rtype.strategy.default(rtype, patched)

