"""MutatingWebhookConfigurations and ValidatingWebhookConfigurations (cluster-scoped).

Defaults and validation are upstream's; an update may keep what the stored
configuration already had (side effects ``Some``/``Unknown``, duplicate
webhook names...), as upstream's ratcheting validation allows.
"""
from __future__ import annotations

from kapiserver.apis import columns
from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType, Strategy

GROUP = "admissionregistration.k8s.io"


def default_rule(rule: dict) -> None:
    if rule.get("scope") is None:
        rule["scope"] = "*"


def default_webhook(hook: dict, mutating: bool) -> None:
    """upstream's SetDefaults_MutatingWebhook / SetDefaults_ValidatingWebhook."""
    hook.setdefault("failurePolicy", "Fail")
    hook.setdefault("matchPolicy", "Equivalent")
    if hook.get("namespaceSelector") is None:
        hook["namespaceSelector"] = {}
    if hook.get("objectSelector") is None:
        hook["objectSelector"] = {}
    if hook.get("timeoutSeconds") is None:
        hook["timeoutSeconds"] = 10
    if mutating and hook.get("reinvocationPolicy") is None:
        hook["reinvocationPolicy"] = "Never"
    for rule in hook.get("rules") or ():
        if isinstance(rule, dict):
            default_rule(rule)
    service = (hook.get("clientConfig") or {}).get("service")
    if isinstance(service, dict) and service.get("port") is None:
        service["port"] = 443


class WebhookConfigurationStrategy(Strategy):
    tracks_generation = True
    allow_unconditional_update = False

    def __init__(self, mutating: bool) -> None:
        self.mutating = mutating

    def default(self, rtype: ResourceType, obj: dict) -> None:
        for hook in obj.get("webhooks") or ():
            if isinstance(hook, dict):
                default_webhook(hook, self.mutating)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        from kapiserver.apis.admissionregistration import validation as v  # with the first write of the kind
        return v.validate_webhook_configuration(obj, self.mutating)

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        from kapiserver.apis.admissionregistration import validation as v
        return v.validate_webhook_configuration(new, self.mutating, v.webhook_update_options(new, old))


def _resource_type(kind: str, plural: str, singular: str, mutating: bool) -> ResourceType:
    schema = f"io.k8s.api.admissionregistration.v1.{kind}"
    return ResourceType(
        group=GROUP, version="v1", kind=kind, plural=plural, singular=singular, namespaced=False,
        strategy=WebhookConfigurationStrategy(mutating), categories=("api-extensions",), schema_name=schema,
        table_columns=(
            columns.name_column(),
            columns.column("Webhooks", lambda o: len(o.get("webhooks") or []), type="integer",
                           desc="Webhooks indicates the number of webhooks registered in this configuration"),
            columns.age_column(),
        ),
    )


def mutating_resource_type() -> ResourceType:
    return _resource_type("MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                          "mutatingwebhookconfiguration", True)


def validating_resource_type() -> ResourceType:
    return _resource_type("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                          "validatingwebhookconfiguration", False)
