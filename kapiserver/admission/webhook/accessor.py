"""One webhook of a (Mutating|Validating)WebhookConfiguration, with what is derived from it
once: parsed selectors and compiled matchConditions (upstream's WebhookAccessor)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from kapiserver.admission.cel.match_conditions import MatchConditions
from kapiserver.cel.compiler import Declarations
from kapiserver.machinery import errors
from kapiserver.machinery.labels import EVERYTHING, LabelSelector, selector_from_label_selector_dict

DEFAULT_TIMEOUT_SECONDS = 10


def _selector(raw: Any) -> tuple[LabelSelector, str]:
    if raw is None:
        return EVERYTHING, ""
    try:
        return selector_from_label_selector_dict(raw), ""
    except errors.StatusError as e:
        return EVERYTHING, e.message


@dataclass(eq=False, repr=False)
class Webhook:
    uid: str
    configuration_name: str
    name: str
    mutating: bool
    spec: dict
    namespace_selector: LabelSelector = field(default_factory=LabelSelector)
    object_selector: LabelSelector = field(default_factory=LabelSelector)
    namespace_selector_error: str = ""
    object_selector_error: str = ""
    match_conditions: Optional[MatchConditions] = None
    rules: list[dict] = field(default_factory=list)

    @classmethod
    def from_spec(cls, configuration_name: str, index: int, spec: dict, mutating: bool) -> "Webhook":
        name = spec.get("name") or ""
        ns_selector, ns_error = _selector(spec.get("namespaceSelector"))
        obj_selector, obj_error = _selector(spec.get("objectSelector"))
        conditions = spec.get("matchConditions") or []
        matcher = MatchConditions(conditions, Declarations(has_authorizer=True), spec.get("failurePolicy") or "Fail") \
            if conditions else None
        return cls(uid=f"{configuration_name}/{name}/{index}", configuration_name=configuration_name, name=name,
                   mutating=mutating, spec=spec, namespace_selector=ns_selector, object_selector=obj_selector,
                   namespace_selector_error=ns_error, object_selector_error=obj_error, match_conditions=matcher,
                   rules=list(spec.get("rules") or []))

    @property
    def failure_policy(self) -> str:
        return self.spec.get("failurePolicy") or "Fail"

    @property
    def ignore_failures(self) -> bool:
        return self.failure_policy == "Ignore"

    @property
    def match_policy(self) -> str:
        return self.spec.get("matchPolicy") or "Equivalent"

    @property
    def timeout_seconds(self) -> int:
        value = self.spec.get("timeoutSeconds")
        return value if isinstance(value, int) and value > 0 else DEFAULT_TIMEOUT_SECONDS

    @property
    def side_effects(self) -> Optional[str]:
        return self.spec.get("sideEffects")

    @property
    def reinvoke_if_needed(self) -> bool:
        return self.spec.get("reinvocationPolicy") == "IfNeeded"

    @property
    def review_versions(self) -> list[str]:
        return list(self.spec.get("admissionReviewVersions") or [])

    @property
    def client_config(self) -> dict:
        return self.spec.get("clientConfig") or {}
