"""ValidatingAdmissionPolicy: CEL policies bound to requests by bindings (upstream's
validating policy plugin and dispatcher).

For every policy whose matchConstraints cover the request, each binding of it
whose matchResources cover it too is evaluated once per parameter object.  A
failed validation is acted on per the binding's ``validationActions``:
``Deny`` refuses the request (the first denial is the answer, worded
``ValidatingAdmissionPolicy '<p>' with binding '<b>' denied request: <msg>``),
``Warn`` adds a Warning header, ``Audit`` adds the
``validation.policy.admission.k8s.io/validation_failure`` audit annotation.
Policies and bindings come from informers; parameters from the watch cache.
"""
from __future__ import annotations

from typing import Any, Optional

import orjson
from twisted.logger import Logger

from kapiserver.admission import predicates
from kapiserver.admission.cel import authz
from kapiserver.admission.cel.evaluation import Inputs, namespace_value, request_value
from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.admission.policy.compiled import CompiledPolicy, compile_policy
from kapiserver.admission.policy.matcher import Match, MatchError, PolicyMatcher
from kapiserver.admission.policy.params import ParamError, collect_params
from kapiserver.admission.policy.validator import DENY, Decision, validate
from kapiserver.admission.resources import ResourceMapper, convert
from kapiserver.admission.source import ConfigurationSource
from kapiserver.machinery import errors
from kapiserver.registry.admission import CONNECT, CREATE, DELETE, UPDATE, AdmissionPlugin, Attributes

log = Logger()

PLUGIN_NAME = "ValidatingAdmissionPolicy"
GROUP = "admissionregistration.k8s.io"
VALIDATION_FAILURE_ANNOTATION = "validation.policy.admission.k8s.io/validation_failure"
MAX_AUDIT_ANNOTATION_VALUE = 10 * 1024
_REASON_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


class _Denied:
    def __init__(self, policy: CompiledPolicy, binding: Optional[dict], message: str, reason: str = "") -> None:
        self.policy, self.binding, self.message, self.reason = policy, binding, message, reason


class ValidatingAdmissionPolicyPlugin(AdmissionPlugin):
    name = PLUGIN_NAME
    validating = True
    operations = (CREATE, UPDATE, DELETE, CONNECT)

    def __init__(self, deps: AdmissionDeps) -> None:
        self.deps = deps
        self.mapper = ResourceMapper(deps.served)
        self.matcher = PolicyMatcher(self.mapper, lambda: deps.store("", "v1", "namespaces"))
        self.bindings: ConfigurationSource[list[dict]] = ConfigurationSource(
            lambda: deps.store(GROUP, "v1", "validatingadmissionpolicybindings"), deps.reactor, lambda objs: objs)
        self.policies: ConfigurationSource[list[CompiledPolicy]] = ConfigurationSource(
            lambda: deps.store(GROUP, "v1", "validatingadmissionpolicies"), deps.reactor, self._build)
        self._hooks: list[CompiledPolicy] = []
        self._built_for: Any = None

    def _build(self, policies: list[dict]) -> list[CompiledPolicy]:
        return [compile_policy(p, self.mapper) for p in policies]

    def hooks(self) -> list[CompiledPolicy]:
        """The compiled policies with their bindings (rebuilt when either changed, or the served types)."""
        served = self.deps.served.generation
        if self._built_for is not None and served != self._built_for[2]:
            self.policies.invalidate()  # a paramKind may be served now
        key = (self.policies.generation, self.bindings.generation, served)
        if key != self._built_for:
            by_policy: dict[str, list[dict]] = {}
            for binding in self.bindings.current():
                by_policy.setdefault((binding.get("spec") or {}).get("policyName") or "", []).append(binding)
            hooks = []
            for policy in self.policies.current():
                policy.bindings = by_policy.get(policy.name, [])
                if policy.bindings:
                    hooks.append(policy)
            self._hooks, self._built_for = hooks, key
        return self._hooks

    async def start(self) -> None:
        self.policies.start()
        self.bindings.start()

    async def stop(self) -> None:
        self.policies.stop()
        self.bindings.stop()

    async def validate(self, attrs: Attributes) -> None:
        if predicates.is_exempt_configuration_resource(attrs) or not self.policies.started:
            return
        if not (await self.policies.wait_synced() and await self.bindings.wait_synced()):
            raise admission_forbidden(attrs, "not yet ready to handle request")
        denied: list[_Denied] = []
        session = authz.AuthzSession(self.deps.authorizer, attrs.user)
        for policy in self.hooks():
            await self._dispatch_policy(policy, attrs, session, denied)
        if denied:
            raise self._denial(attrs, denied[0])

    def _config_error(self, policy: CompiledPolicy, binding: Optional[dict], message: str,
                      denied: list[_Denied]) -> None:
        if policy.failure_policy == "Ignore":
            return
        if policy.failure_policy != "Fail":
            denied.append(_Denied(policy, binding, f"unrecognized failure policy: '{policy.failure_policy}'"))
            return
        what = "binding" if binding is not None else "policy"
        denied.append(_Denied(policy, binding, f"failed to configure {what}: {message}"))

    async def _dispatch_policy(self, policy: CompiledPolicy, attrs: Attributes, session: authz.AuthzSession,
                               denied: list[_Denied]) -> None:
        if policy.match_constraints is None:
            self._config_error(policy, None, "policy contained no match constraints, a required field", denied)
            return
        try:
            match = await self.matcher.matches(policy.match_constraints, attrs)
        except MatchError as e:
            self._config_error(policy, None, str(e), denied)
            return
        if match is None:
            return
        if policy.configuration_error:
            self._config_error(policy, None, policy.configuration_error, denied)
            return
        annotations: dict[str, list[str]] = {}
        objects: Optional[tuple] = None
        for binding in sorted(policy.bindings, key=lambda b: (b.get("metadata") or {}).get("name") or ""):
            spec = binding.get("spec") or {}
            if spec.get("matchResources") is not None:
                try:
                    if await self.matcher.matches(spec["matchResources"], attrs) is None:
                        continue
                except MatchError as e:
                    self._config_error(policy, binding, str(e), denied)
                    continue
            try:
                params = await collect_params(policy.param_rtype, spec.get("paramRef"), attrs.namespace,
                                              self.deps.store)
            except ParamError as e:
                self._config_error(policy, binding, str(e), denied)
                continue
            if not params:
                continue
            if objects is None:
                try:
                    objects = (await convert(attrs.obj, attrs.rtype, match.rtype) if self._converts(attrs, match)
                               else attrs.obj,
                               await convert(attrs.old_obj, attrs.rtype, match.rtype) if self._converts(attrs, match)
                               else attrs.old_obj)
                except errors.StatusError as e:
                    self._config_error(policy, binding, f"failed to convert object version: {e.message}", denied)
                    continue
            namespace = await self._namespace(attrs)
            for param in params:
                inputs = Inputs(object=objects[0], old_object=objects[1],
                                request=request_value(attrs, match.resource, match.kind),
                                namespace_object=namespace_value(namespace), params=param, authz=session,
                                authorizer=authz.authorizer_value(attrs.rtype.group, attrs.rtype.plural,
                                                                  attrs.subresource, attrs.namespace, attrs.name))
                result = await validate(policy, inputs)
                for decision in result.decisions:
                    if decision.action == DENY:
                        self._act(policy, binding, decision, attrs, denied)
                for annotation in result.annotations:
                    if annotation.error:
                        denied.append(_Denied(policy, binding, annotation.error))
                    elif annotation.value is not None:
                        values = annotations.setdefault(annotation.key, [])
                        value = annotation.value[:MAX_AUDIT_ANNOTATION_VALUE]
                        if value not in values:
                            values.append(value)
        for key, values in annotations.items():
            attrs.add_annotation(f"{policy.name}/{key}", ", ".join(values))

    @staticmethod
    def _converts(attrs: Attributes, match: Match) -> bool:
        return match.rtype is not attrs.rtype and attrs.subresource in ("", "status")

    async def _namespace(self, attrs: Attributes) -> Optional[dict]:
        name = attrs.namespace
        if (attrs.rtype.group, attrs.rtype.kind) == ("", "Namespace"):
            name = ""
        if not name:
            return None
        return await predicates.get_namespace(self.deps.store("", "v1", "namespaces"), name)

    def _act(self, policy: CompiledPolicy, binding: dict, decision: Decision, attrs: Attributes,
             denied: list[_Denied]) -> None:
        spec = binding.get("spec") or {}
        binding_name = (binding.get("metadata") or {}).get("name") or ""
        for action in spec.get("validationActions") or ():
            if action == "Deny":
                denied.append(_Denied(policy, binding, decision.message, decision.reason))
            elif action == "Warn":
                attrs.warnings.append(f"Validation failed for ValidatingAdmissionPolicy '{policy.name}' with binding "
                                      f"'{binding_name}': {decision.message}")
            elif action == "Audit":
                value = orjson.dumps([{"message": decision.message, "policy": spec.get("policyName") or "",
                                       "binding": binding_name, "expressionIndex": decision.index,
                                       "validationActions": list(spec.get("validationActions") or [])}]).decode()
                attrs.add_annotation(VALIDATION_FAILURE_ANNOTATION, value)

    @staticmethod
    def _denial(attrs: Attributes, denied: _Denied) -> errors.StatusError:
        if denied.binding is not None:
            binding_name = (denied.binding.get("metadata") or {}).get("name") or ""
            message = (f"ValidatingAdmissionPolicy '{denied.policy.name}' with binding '{binding_name}' denied "
                       f"request: {denied.message}")
        else:
            message = f"ValidatingAdmissionPolicy '{denied.policy.name}' denied request: {denied.message}"
        err = admission_forbidden(attrs, message)
        reason = denied.reason or "Invalid"
        err.reason = reason
        err.code = _REASON_CODES.get(reason, 422)
        details = dict(err.details or {})
        details["causes"] = list(details.get("causes") or []) + [{"message": message}]
        err.details = details
        return err


def validating_admission_policy(config: Optional[bytes], deps: AdmissionDeps) -> ValidatingAdmissionPolicyPlugin:
    return ValidatingAdmissionPolicyPlugin(deps)
