"""Admission errors worded as upstream's (admission.NewForbidden, webhook rejections), and the
error of a plugin its configuration cannot build (each plugin's factory raises it)."""
from __future__ import annotations

from typing import Any, Optional

from kapiserver.machinery import errors
from kapiserver.registry.admission import Attributes


class PluginError(Exception):
    """A plugin that cannot be built (bad configuration); ``str()`` is one line."""


def resource_name(attrs: Attributes) -> str:
    """The name upstream's admission errors show: the request's, else the object's name or
    generateName (names are not generated yet), else ``Unknown``."""
    if attrs.name:
        return attrs.name
    md = (attrs.obj or {}).get("metadata") if isinstance(attrs.obj, dict) else None
    if isinstance(md, dict):
        return md.get("name") or md.get("generateName") or "Unknown"
    return "Unknown"


def admission_forbidden(attrs: Attributes, why: str) -> errors.StatusError:
    """Upstream's admission.NewForbidden: ``<resource> "<name>" is forbidden: <why>``."""
    return errors.forbidden(attrs.rtype.plural, attrs.rtype.group, resource_name(attrs), why)


def webhook_denied(webhook_name: str, result: Optional[Any]) -> errors.StatusError:
    """A webhook's refusal (upstream's webhookerrors.ToStatusErr): its Status, with a code of at
    least 400 and the message prefixed ``admission webhook "<name>" denied the request``."""
    status = dict(result) if isinstance(result, dict) else {}
    denied_by = f'admission webhook "{webhook_name}" denied the request'
    found_code = status.get("code")
    code = found_code if isinstance(found_code, int) and found_code >= 400 else 400
    message, reason = status.get("message"), status.get("reason")
    if isinstance(message, str) and message:
        text = f"{denied_by}: {message}"
    elif isinstance(reason, str) and reason:
        text = f"{denied_by}: {reason}"
    else:
        text = f"{denied_by} without explanation"
    found_details = status.get("details")
    details = found_details if isinstance(found_details, dict) else None
    err = errors.StatusError(code, reason if isinstance(reason, str) else "", text, details)
    if isinstance(status.get("metadata"), dict):
        err.metadata = {k: v for k, v in status["metadata"].items() if k in ("continue", "resourceVersion")}
    return err


class CallingWebhookError(Exception):
    """A webhook could not be called or answered nonsense (upstream's ErrCallingWebhook):
    failurePolicy decides whether it refuses the request."""

    def __init__(self, webhook_name: str, reason: str) -> None:
        super().__init__(reason)
        self.webhook_name = webhook_name
        self.reason = reason

    def __str__(self) -> str:
        return f'failed calling webhook "{self.webhook_name}": {self.reason}'

    def status_error(self) -> errors.StatusError:
        """The 500 a failure under failurePolicy Fail answers (apierrors.NewInternalError)."""
        return errors.internal_error(str(self))
