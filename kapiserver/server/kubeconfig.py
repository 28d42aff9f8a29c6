"""The admin kubeconfig: everything kubectl needs to reach this server as cluster admin.

The CA, client certificate and key are embedded (``*-data``), so the file is
self-contained; it is written 0600 because it holds a private key.  It is
rewritten only when its content would change (e.g. the real port after
listening on port 0), so an operator's copy stays stable across restarts.
"""
from __future__ import annotations

import base64
import ipaddress
import os

from kapiserver.machinery import private_files
from kapiserver.server.certs import CertBundle

CLUSTER_NAME = "kapiserver"
USER_NAME = "kapiserver-admin"
CONTEXT_NAME = "kapiserver-admin@kapiserver"


def server_url(host: str, port: int) -> str:
    """``https://host:port`` with IPv6 literals bracketed; wildcard binds become loopback."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"https://{host}:{port}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def admin_kubeconfig(bundle: CertBundle, host: str, port: int) -> dict:
    """The kubeconfig document as a dict."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": {
            "server": server_url(host, port),
            "certificate-authority-data": _b64(bundle.ca_cert_pem),
        }}],
        "users": [{"name": USER_NAME, "user": {
            "client-certificate-data": _b64(bundle.admin_cert_pem),
            "client-key-data": _b64(bundle.admin_key_pem),
        }}],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CLUSTER_NAME, "user": USER_NAME}}],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }


def write_admin_kubeconfig(path: str, bundle: CertBundle, host: str, port: int) -> bool:
    """Write the admin kubeconfig to ``path`` (0600) unless it already says the same.

    Returns whether the file was (re)written.  Raises OSError on I/O failure.
    """
    import yaml  # PyYAML: for this, the configuration file and YAML bodies only

    text = yaml.safe_dump(admin_kubeconfig(bundle, host, port), sort_keys=False).encode("utf-8")
    try:
        with open(path, "rb") as f:
            if f.read() == text:
                return False
    except FileNotFoundError:
        pass
    directory = os.path.dirname(path)
    if directory:
        private_files.make_private_dir(directory)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, text)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return True
