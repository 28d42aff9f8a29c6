"""What both webhook plugins share (upstream's webhook/generic): which webhooks a request
calls, the objects in the version each webhook asked for, and the call itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import orjson

from kapiserver.admission import predicates
from kapiserver.admission.cel import authz
from kapiserver.admission.cel.evaluation import Inputs, request_value
from kapiserver.admission.errors import CallingWebhookError, admission_forbidden
from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.admission.resources import ResourceMapper, convert
from kapiserver.admission.source import ConfigurationSource
from kapiserver.admission.webhook import review
from kapiserver.admission.webhook.accessor import Webhook
from kapiserver.admission.webhook.client import CallFailed, WebhookClient
from kapiserver.machinery import errors
from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.registry.admission import AdmissionPlugin, Attributes
from kapiserver.registry.resource_type import ResourceType


@dataclass
class Invocation:
    """A webhook to call, and the resource and kind it matched (an equivalent one, maybe)."""

    webhook: Webhook
    resource: GroupVersionResource
    kind: GroupVersionKind
    rtype: ResourceType


class VersionedObjects:
    """The request's objects converted to the versions webhooks asked for (once per version)."""

    def __init__(self, attrs: Attributes) -> None:
        self.attrs = attrs
        self._cache: dict[str, tuple[Optional[dict], Optional[dict]]] = {}

    def _converts(self, invocation: Invocation) -> bool:
        return (invocation.rtype is not self.attrs.rtype and self.attrs.subresource in ("", "status")
                and invocation.rtype.api_version != self.attrs.rtype.api_version)

    async def objects(self, invocation: Invocation) -> tuple[Optional[dict], Optional[dict]]:
        attrs = self.attrs
        if not self._converts(invocation):
            return attrs.obj, attrs.old_obj
        key = invocation.rtype.api_version
        if key not in self._cache:
            try:
                self._cache[key] = (await convert(attrs.obj, attrs.rtype, invocation.rtype),
                                    await convert(attrs.old_obj, attrs.rtype, invocation.rtype))
            except errors.StatusError as e:
                raise errors.internal_error(e.message) from None
        return self._cache[key]

    def forget(self) -> None:
        """The object changed (a mutating webhook patched it): convert again next time."""
        self._cache.clear()

    async def back(self, patched: dict, invocation: Invocation) -> dict:
        """A patched object of the invocation's version, in the request's version."""
        if not self._converts(invocation):
            return patched
        converted = await convert(patched, invocation.rtype, self.attrs.rtype)
        assert converted is not None
        return converted


class WebhookPluginBase(AdmissionPlugin):
    """Finds the webhooks of the configurations kind ``plural`` that a request calls."""

    plural = ""
    is_mutating = False

    def __init__(self, deps: AdmissionDeps, client: WebhookClient, mapper: ResourceMapper) -> None:
        self.deps = deps
        self.client = client
        self.mapper = mapper
        self.source: ConfigurationSource[list[Webhook]] = ConfigurationSource(
            lambda: deps.store("admissionregistration.k8s.io", "v1", self.plural), deps.reactor, self._build)
        self.calls = 0  # webhook requests made (tests, bench)

    def _build(self, configurations: list[dict]) -> list[Webhook]:
        hooks = []
        for config in configurations:
            name = (config.get("metadata") or {}).get("name") or ""
            for i, spec in enumerate(config.get("webhooks") or ()):
                if isinstance(spec, dict):
                    hooks.append(Webhook.from_spec(name, i, spec, self.is_mutating))
        return hooks

    async def start(self) -> None:
        self.source.start()

    async def stop(self) -> None:
        self.source.stop()
        await self.client.close()

    async def hooks_for(self, attrs: Attributes) -> Optional[list[Webhook]]:
        """The configured webhooks (None: the request is exempt)."""
        if predicates.is_exempt_configuration_resource(attrs) or not self.source.started:
            return None
        if not await self.source.wait_synced():
            raise admission_forbidden(attrs, "not yet ready to handle request")
        return self.source.current()

    def _namespaces(self) -> Any:
        return self.deps.store("", "v1", "namespaces")

    async def should_call(self, hook: Webhook, attrs: Attributes,
                          versioned: VersionedObjects) -> Optional[Invocation]:
        """Upstream's ShouldCallHook: selectors, rules (then equivalent resources), matchConditions."""
        ns_error: Optional[errors.StatusError] = None
        if hook.namespace_selector_error:
            ns_error = errors.internal_error(hook.namespace_selector_error)
        else:
            try:
                if not await predicates.match_namespace_selector(hook.namespace_selector, attrs, self._namespaces):
                    return None
            except errors.StatusError as e:
                ns_error = e
        obj_error = errors.internal_error(hook.object_selector_error) if hook.object_selector_error else None
        if obj_error is None and not predicates.match_object_selector(hook.object_selector, attrs):
            return None
        invocation = self._match_rules(hook, attrs)
        if invocation is None:
            return None
        if ns_error is not None:
            raise ns_error
        if obj_error is not None:
            raise obj_error
        if hook.match_conditions:
            obj, old = await versioned.objects(invocation)
            inputs = Inputs(object=obj, old_object=old, request=request_value(attrs, invocation.resource,
                                                                                invocation.kind),
                            authz=authz.AuthzSession(self.deps.authorizer, attrs.user),
                            authorizer=authz.authorizer_value(attrs.rtype.group, attrs.rtype.plural,
                                                              attrs.subresource, attrs.namespace, attrs.name))
            result = await hook.match_conditions.match(inputs)
            if result.error:
                raise errors.forbidden(attrs.rtype.plural, attrs.rtype.group, attrs.name, result.error)
            if not result.matches:
                return None
        return invocation

    def _match_rules(self, hook: Webhook, attrs: Attributes) -> Optional[Invocation]:
        for rule in hook.rules:
            if predicates.rule_matches(rule, attrs):
                return Invocation(hook, attrs.resource, attrs.gvk, attrs.rtype)
        if hook.match_policy != "Equivalent":
            return None
        equivalents = self.mapper.equivalents(attrs.rtype, attrs.subresource)
        for rule in hook.rules:
            for gvr in equivalents:
                if gvr == attrs.resource:
                    continue
                if predicates.rule_matches(rule, attrs, gvr):
                    rtype = self.mapper.resource_type(gvr)
                    kind = self.mapper.kind_for(gvr, attrs.subresource)
                    if rtype is None or kind is None:
                        raise errors.internal_error(f"unable to convert to {gvr.group}/{gvr.version}, "
                                                    f"Resource={gvr.resource}: unknown kind")
                    return Invocation(hook, gvr, kind, rtype)
        return None

    async def call(self, invocation: Invocation, attrs: Attributes, obj: Optional[dict],
                   old: Optional[dict]) -> review.AdmissionResponse:
        """Send the AdmissionReview; the verified response.  Raises CallingWebhookError, or the
        dry-run refusal (a StatusError) for webhooks with side effects."""
        hook = invocation.webhook
        if attrs.dry_run:
            if hook.side_effects is None:
                raise CallingWebhookError(hook.name, "Webhook SideEffects is nil")
            if hook.side_effects not in ("None", "NoneOnDryRun"):
                raise errors.bad_request(f'admission webhook "{hook.name}" does not support dry run')
        version = review.review_version(hook.review_versions)
        if version is None:
            raise CallingWebhookError(hook.name, "could not create admission objects: webhook does not accept "
                                                 "known AdmissionReview versions (v1, v1beta1)")
        uid, body = review.build_request(version, attrs, obj, old, invocation.resource, invocation.kind)
        self.calls += 1
        try:
            _, content = await self.client.post(hook.client_config, orjson.dumps(body), hook.timeout_seconds)
        except CallFailed as e:
            reason = str(e)
            prefix = "" if reason.startswith("could not get REST client") else "failed to call webhook: "
            raise CallingWebhookError(hook.name, prefix + reason) from None
        try:
            answer = orjson.loads(content)
        except orjson.JSONDecodeError as e:
            raise CallingWebhookError(hook.name, f"failed to call webhook: {e}") from None
        try:
            result = review.verify_response(version, uid, self.is_mutating, answer)
        except review.InvalidResponse as e:
            raise CallingWebhookError(hook.name, f"received invalid webhook response: {e}") from None
        for key, value in result.audit_annotations.items():
            attrs.add_annotation(f"{hook.name}/{key}", value)
        attrs.warnings.extend(result.warnings)
        return result


PluginFactory = Callable[[Optional[bytes], AdmissionDeps], AdmissionPlugin]
