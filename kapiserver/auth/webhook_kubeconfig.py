"""An HTTPS client for a webhook named by a kubeconfig-format file (upstream's webhook ``LoadKubeconfig``).

Authorization webhooks and the audit webhook backend are configured as upstream does:
the file's current context (or its only/first cluster and user) gives the
``server`` URL, how to trust it (``certificate-authority`` or
``certificate-authority-data``, ``insecure-skip-tls-verify``,
``tls-server-name``) and how to present ourselves (``client-certificate`` /
``client-key`` or their ``-data`` forms, ``token`` or ``tokenFile``).
Relative paths are relative to the file.  Everything is read when the
server starts, so a bad file fails the start with one line.
"""
from __future__ import annotations

import base64
import binascii
import os
from dataclasses import dataclass
from typing import Any, Optional

import yaml
from treq.client import HTTPClient
from twisted.internet import ssl
from twisted.internet.interfaces import IReactorTime
from twisted.web.client import Agent, HTTPConnectionPool, IPolicyForHTTPS
from zope.interface import implementer


class WebhookConfigError(Exception):
    """The webhook configuration file is unusable; ``str()`` is one line for the operator."""


@dataclass
class WebhookTarget:
    url: str
    headers: dict[str, list[str]]
    policy: Optional[IPolicyForHTTPS]

    def client(self, reactor: IReactorTime, connections: int = 4,
               retry_automatically: bool = True) -> tuple[HTTPClient, HTTPConnectionPool]:
        """A client and its pool of ``connections`` kept-alive connections (a webhook is asked
        often); ``pool.closeCachedConnections()`` closes them.  Callers that count their own
        attempts turn off the pool's automatic retry."""
        pool = HTTPConnectionPool(reactor, persistent=True)
        pool.maxPersistentPerHost = connections
        pool.retryAutomatically = retry_automatically
        agent = Agent(reactor, contextFactory=self.policy, pool=pool) if self.policy is not None \
            else Agent(reactor, pool=pool)
        return HTTPClient(agent), pool


def _pick(entries: Any, name: Optional[str], what: str, path: str) -> dict:
    if not isinstance(entries, list) or not entries:
        raise WebhookConfigError(f"{path}: no {what}s")
    if name:
        for entry in entries:
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry.get(what) or {}
        raise WebhookConfigError(f"{path}: {what} {name!r} not found")
    first = entries[0]
    return (first.get(what) or {}) if isinstance(first, dict) else {}


def _material(section: dict, key: str, base: str, path: str) -> Optional[bytes]:
    """``<key>-data`` (base64) or the file ``<key>`` names."""
    data = section.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise WebhookConfigError(f"{path}: {key}-data is not valid base64") from None
    file_name = section.get(key)
    if not file_name:
        return None
    full = file_name if os.path.isabs(file_name) else os.path.join(base, file_name)
    try:
        with open(full, "rb") as f:
            return f.read()
    except OSError as e:
        raise WebhookConfigError(f"{path}: cannot read {key} {full}: {e.strerror}") from None


def _certificates(pem: bytes, path: str) -> list[ssl.Certificate]:
    end = b"-----END CERTIFICATE-----"
    parts = [part + end for part in pem.split(end) if b"-----BEGIN CERTIFICATE-----" in part]
    try:
        certs = [ssl.Certificate.loadPEM(p) for p in parts]
    except Exception:
        certs = []
    if not certs:
        raise WebhookConfigError(f"{path}: certificate-authority holds no PEM certificate")
    return certs


@implementer(IPolicyForHTTPS)
class _Policy:
    def __init__(self, trust: Any, client_cert: Any, server_name: str, insecure: bool) -> None:
        self.trust = trust
        self.client_cert = client_cert
        self.server_name = server_name
        self.insecure = insecure

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        if self.insecure:
            kwargs: dict = {"verify": False}
            if self.client_cert is not None:
                kwargs.update(privateKey=self.client_cert.privateKey.original,
                              certificate=self.client_cert.original)
            return ssl.CertificateOptions(**kwargs)
        kwargs = {}
        if self.trust is not None:
            kwargs["trustRoot"] = self.trust
        if self.client_cert is not None:
            kwargs["clientCertificate"] = self.client_cert
        return ssl.optionsForClientTLS(self.server_name or hostname.decode("ascii"), **kwargs)


def load_webhook_kubeconfig(path: str) -> WebhookTarget:
    try:
        with open(path, "rb") as f:
            config = yaml.safe_load(f)
    except OSError as e:
        raise WebhookConfigError(f"{path}: cannot read webhook configuration: {e.strerror}") from None
    except yaml.YAMLError:
        raise WebhookConfigError(f"{path}: not a kubeconfig (invalid YAML)") from None
    if not isinstance(config, dict):
        raise WebhookConfigError(f"{path}: not a kubeconfig")
    base = os.path.dirname(os.path.abspath(path))
    context: dict = {}
    current = config.get("current-context")
    if current:
        context = _pick(config.get("contexts"), current, "context", path)
    cluster = _pick(config.get("clusters"), context.get("cluster"), "cluster", path)
    users = config.get("users") or []
    user = _pick(users, context.get("user"), "user", path) if users else {}
    url = cluster.get("server") or ""
    if not url.startswith(("https://", "http://")):
        raise WebhookConfigError(f"{path}: cluster server {url!r} is not an https:// URL")
    headers: dict[str, list[str]] = {}
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (_material({"t": user["tokenFile"]}, "t", base, path) or b"").decode().strip()
    if token:
        headers["Authorization"] = [f"Bearer {token}"]
    policy = None
    if url.startswith("https://"):
        ca = _material(cluster, "certificate-authority", base, path)
        trust = ssl.trustRootFromCertificates(_certificates(ca, path)) if ca else None
        cert, key = _material(user, "client-certificate", base, path), _material(user, "client-key", base, path)
        client_cert = None
        if cert or key:
            if not (cert and key):
                raise WebhookConfigError(f"{path}: client-certificate and client-key must be given together")
            try:
                client_cert = ssl.PrivateCertificate.loadPEM(cert + b"\n" + key)
            except Exception as e:
                raise WebhookConfigError(f"{path}: cannot load the client certificate: {e}") from None
        policy = _Policy(trust, client_cert, cluster.get("tls-server-name") or "",
                         bool(cluster.get("insecure-skip-tls-verify")))
    return WebhookTarget(url, headers, policy)
