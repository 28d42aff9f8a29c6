"""The kubelet client's settings from the configuration (kube-apiserver's ``--kubelet-*`` flags).

Loads the client certificate this server presents to kubelets and the CA their
serving certificates are verified against.  The defaults live in ``cert_dir``
(``apiserver-kubelet-client.crt``/``.key``, generated on first start); a
server built without them (in-process tests) reaches kubelets without a
client certificate, which a kubelet that authenticates its clients refuses.
"""
from __future__ import annotations

from twisted.internet import ssl
from twisted.logger import Logger

from kapiserver.endpoints.streaming.kubelet import KubeletClientConfig
from kapiserver.server.certs import credential_files
from kapiserver.server.config import Config

log = Logger()


class KubeletCredentialsError(Exception):
    """A kubelet credential file named in the configuration cannot be used; one line."""


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def kubelet_client_config(config: Config) -> KubeletClientConfig:
    files = credential_files(config)
    client = None
    try:
        client = ssl.PrivateCertificate.loadPEM(_read(files.kubelet_client_cert) + b"\n"
                                                + _read(files.kubelet_client_key))
    except OSError as e:
        if "kubelet_client_cert" not in files.defaults:
            raise KubeletCredentialsError(f"kubelet.client_certificate: {e.filename}: {e.strerror}") from None
        log.warn("no kubelet client certificate ({err}): kubelets that authenticate clients will refuse logs, "
                 "exec, attach and port-forward", err=e.strerror)
    except Exception as e:
        raise KubeletCredentialsError(f"kubelet.client_certificate: {files.kubelet_client_cert}: {e}") from None
    ca = b""
    if config.kubelet.certificate_authority:
        try:
            ca = _read(config.kubelet.certificate_authority)
        except OSError as e:
            raise KubeletCredentialsError(f"kubelet.certificate_authority: {e.filename}: {e.strerror}") from None
    kubelet = config.kubelet
    return KubeletClientConfig(client_certificate=client, certificate_authority=ca,
                               preferred_address_types=tuple(kubelet.preferred_address_types),
                               timeout_seconds=float(kubelet.timeout_seconds), port=kubelet.port)
