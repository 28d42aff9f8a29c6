"""ValidatingAdmissionWebhook: validating webhooks, all called at once (upstream's validating
dispatcher).

The request waits for every matching webhook; the first refusal (in
configuration order) is the answer.  A webhook that cannot be reached, or
answers nonsense, refuses the request with a 500 under ``failurePolicy: Fail``
and is ignored under ``Ignore``.
"""
from __future__ import annotations

from typing import Optional

from twisted.internet import defer
from twisted.logger import Logger
from twisted.python.failure import Failure

from kapiserver.admission.errors import CallingWebhookError, webhook_denied
from kapiserver.admission.webhook.generic import Invocation, VersionedObjects, WebhookPluginBase
from kapiserver.machinery import errors
from kapiserver.registry.admission import CONNECT, CREATE, DELETE, UPDATE, Attributes

log = Logger()

PLUGIN_NAME = "ValidatingAdmissionWebhook"
FAILED_OPEN_PREFIX = "failed-open.validating.webhook.admission.k8s.io/"


class ValidatingWebhookPlugin(WebhookPluginBase):
    name = PLUGIN_NAME
    validating = True
    operations = (CREATE, UPDATE, DELETE, CONNECT)
    plural = "validatingwebhookconfigurations"
    is_mutating = False

    async def validate(self, attrs: Attributes) -> None:
        hooks = await self.hooks_for(attrs)
        if not hooks:
            return
        versioned = VersionedObjects(attrs)
        relevant: list[Invocation] = []
        for hook in hooks:
            invocation = await self.should_call(hook, attrs, versioned)
            if invocation is not None:
                relevant.append(invocation)
        if not relevant:
            return
        calls = [defer.Deferred.fromCoroutine(self._call(invocation, attrs, versioned, index))
                 for index, invocation in enumerate(relevant)]
        results = await defer.DeferredList(calls, consumeErrors=True)
        for ok, value in results:
            if isinstance(value, Failure):  # (not ok)
                value.raiseException()
            if value is not None:
                raise value

    async def _call(self, invocation: Invocation, attrs: Attributes, versioned: VersionedObjects,
                    index: int) -> Optional[errors.StatusError]:
        """None when the webhook allowed the request (or failed open); the refusal otherwise."""
        hook = invocation.webhook
        try:
            obj, old = await versioned.objects(invocation)
            result = await self.call(invocation, attrs, obj, old)
        except CallingWebhookError as e:
            if hook.ignore_failures:
                log.warn("Failed calling webhook, failing open {name}: {err}", name=hook.name, err=e)
                attrs.add_annotation(f"{FAILED_OPEN_PREFIX}round_0_index_{index}", hook.name)
                return None
            log.warn("Failed calling webhook, failing closed {name}: {err}", name=hook.name, err=e)
            return e.status_error()
        except errors.StatusError as e:
            return e
        if result.allowed:
            return None
        return webhook_denied(hook.name, result.result)
