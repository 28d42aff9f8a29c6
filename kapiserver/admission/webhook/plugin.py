"""The two webhook admission plugins' factories (registered in admission/plugins.py).

Both take an optional WebhookAdmissionConfiguration (credentials for the
webhooks, webhook/authentication.py) from the admission configuration file.
"""
from __future__ import annotations

from typing import Optional

from kapiserver.admission.errors import PluginError
from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.admission.resources import ResourceMapper
from kapiserver.admission.webhook.authentication import AuthenticationConfigError, AuthenticationInfoResolver
from kapiserver.admission.webhook.client import WebhookClient
from kapiserver.admission.webhook.mutating import PLUGIN_NAME as MUTATING, MutatingWebhookPlugin
from kapiserver.admission.webhook.service_resolver import ServiceResolver
from kapiserver.admission.webhook.validating import PLUGIN_NAME as VALIDATING, ValidatingWebhookPlugin

__all__ = ["MUTATING", "VALIDATING", "mutating_webhook", "validating_webhook"]


def _parts(config: Optional[bytes], deps: AdmissionDeps) -> tuple[WebhookClient, ResourceMapper]:
    try:
        credentials = AuthenticationInfoResolver.from_plugin_config(config)
    except AuthenticationConfigError as e:
        raise PluginError(str(e)) from None
    client = WebhookClient(deps.reactor, ServiceResolver(deps.store), credentials)
    return client, ResourceMapper(deps.served)


def mutating_webhook(config: Optional[bytes], deps: AdmissionDeps) -> MutatingWebhookPlugin:
    client, mapper = _parts(config, deps)
    return MutatingWebhookPlugin(deps, client, mapper)


def validating_webhook(config: Optional[bytes], deps: AdmissionDeps) -> ValidatingWebhookPlugin:
    client, mapper = _parts(config, deps)
    return ValidatingWebhookPlugin(deps, client, mapper)
