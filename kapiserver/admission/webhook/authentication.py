"""Credentials the server presents to webhooks (upstream's WebhookAdmissionConfiguration).

The admission configuration file may give the webhook plugins a kubeconfig::

    - name: ValidatingAdmissionWebhook
      configuration:
        apiVersion: apiserver.config.k8s.io/v1
        kind: WebhookAdmissionConfiguration
        kubeConfigFile: /abs/path/webhook-kubeconfig.yaml

whose ``users`` are named after the webhook hosts they are for:
``host:port`` or ``host`` of a URL, ``<svc>.<ns>.svc:<port>``,
``<svc>.<ns>.svc`` or ``*.<ns>.svc`` for services, and ``*`` for every
webhook.  A user may hold a bearer token (``token``/``tokenFile``) or a
client certificate (``client-certificate(-data)``/``client-key(-data)``).
"""
from __future__ import annotations

import base64
import os
from typing import Any, NamedTuple, Optional


CONFIG_KIND = "WebhookAdmissionConfiguration"
CONFIG_VERSIONS = ("apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1alpha1")


class AuthenticationConfigError(Exception):
    pass


class Credentials(NamedTuple):
    token: str = ""
    cert_pem: bytes = b""
    key_pem: bytes = b""


def _read(path: str, base: str) -> bytes:
    full = path if os.path.isabs(path) else os.path.join(base, path)
    with open(full, "rb") as f:
        return f.read()


def _credentials(user: dict, base: str) -> Credentials:
    token = user.get("token") or ""
    if not token and user.get("tokenFile"):
        token = _read(user["tokenFile"], base).decode().strip()
    cert = base64.b64decode(user["client-certificate-data"]) if user.get("client-certificate-data") else \
        (_read(user["client-certificate"], base) if user.get("client-certificate") else b"")
    key = base64.b64decode(user["client-key-data"]) if user.get("client-key-data") else \
        (_read(user["client-key"], base) if user.get("client-key") else b"")
    return Credentials(token=token, cert_pem=cert, key_pem=key)


class AuthenticationInfoResolver:
    def __init__(self, users: Optional[dict[str, Credentials]] = None) -> None:
        self.users = users or {}

    @classmethod
    def from_plugin_config(cls, config: Optional[bytes]) -> "AuthenticationInfoResolver":
        """From the plugin's configuration (None: no credentials)."""
        if not config:
            return cls()
        import yaml  # (with a plugin configuration only)

        try:
            data = yaml.safe_load(config) or {}
        except yaml.YAMLError as e:
            raise AuthenticationConfigError(f"invalid webhook admission configuration: {e}") from None
        if data.get("kind") != CONFIG_KIND or data.get("apiVersion") not in CONFIG_VERSIONS:
            raise AuthenticationConfigError(f"unexpected webhook admission configuration type: "
                                            f"{data.get('apiVersion')}, Kind={data.get('kind')}")
        path = data.get("kubeConfigFile") or ""
        if not os.path.isabs(path):
            raise AuthenticationConfigError(f'kubeConfigFile: Invalid value: "{path}": must be an absolute file path')
        try:
            with open(path, "rb") as f:
                kubeconfig: Any = yaml.safe_load(f) or {}
            base = os.path.dirname(path)
            users = {u["name"]: _credentials(u.get("user") or {}, base)
                     for u in kubeconfig.get("users") or () if isinstance(u, dict) and u.get("name")}
        except (OSError, KeyError, ValueError, TypeError) as e:
            raise AuthenticationConfigError(f"cannot load webhook kubeconfig {path}: {e}") from None
        return cls(users)

    def for_url(self, host: str, port: int) -> Credentials:
        for name in (f"{host}:{port}", host, "*"):
            if name in self.users:
                return self.users[name]
        return Credentials()

    def for_service(self, name: str, namespace: str, port: int) -> Credentials:
        for key in (f"{name}.{namespace}.svc:{port}", f"{name}.{namespace}.svc", f"*.{namespace}.svc", "*"):
            if key in self.users:
                return self.users[key]
        return Credentials()
