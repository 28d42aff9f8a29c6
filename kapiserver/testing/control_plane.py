"""The real kube-controller-manager against a kapiserver process, for end-to-end tests.

kube-controller-manager runs with the flags a cluster gives it (kubeadm's):
its own client certificate for ``system:kube-controller-manager`` issued by
the server's CA, one service-account credential per controller, the server's
service-account signing key, its CA as root CA and cluster signer, leader
election on its Lease, every controller. The binary is the anchor build
(``$ANCHORS_DIR/bin/kube-controller-manager``, see the anchor kit); tests skip
when it is absent.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections import Counter
from typing import Optional

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ANCHORS_DIR = os.environ.get("ANCHORS_DIR") or os.path.expanduser("~/.cache/kube-anchor")
KUBE_CONTROLLER_MANAGER = os.path.join(ANCHORS_DIR, "bin", "kube-controller-manager")
USER = "system:kube-controller-manager"
# klog's header: severity, date, time, pid, file:line]
_KLOG = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ ([^\]]+)\] (.*)$")


def available() -> bool:
    return os.access(KUBE_CONTROLLER_MANAGER, os.X_OK)


def issue_client_certificate(cert_dir: str, base: str, user: str, groups: tuple[str, ...] = ()) -> tuple[str, str]:
    """``<base>.crt``/``.key`` in ``cert_dir`` for ``user``, issued by the server's CA (``ca.key``)."""
    from kapiserver.server.certs import _Checked, _Issuer
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups),
                         x509.NameAttribute(NameOID.COMMON_NAME, user)])
    _Issuer(cert_dir, _Checked(cert_dir)).leaf(base, subject, ExtendedKeyUsageOID.CLIENT_AUTH)
    return os.path.join(cert_dir, base + ".crt"), os.path.join(cert_dir, base + ".key")


def write_kubeconfig(path: str, server: str, ca_file: str, cert_file: str, key_file: str) -> None:
    import yaml
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "kapiserver", "cluster": {"server": server, "certificate-authority": ca_file}}],
        "users": [{"name": "user", "user": {"client-certificate": cert_file, "client-key": key_file}}],
        "contexts": [{"name": "kapiserver", "context": {"cluster": "kapiserver", "user": "user"}}],
        "current-context": "kapiserver",
    }
    with open(path, "w") as f:
        yaml.safe_dump(config, f)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ControllerManagerProcess:
    """kube-controller-manager against the server whose ``cert_dir`` and URL are given."""

    def __init__(self, server_url: str, cert_dir: str, workdir: str, extra_args: tuple[str, ...] = (),
                 controllers: tuple[str, ...] = ("*",)) -> None:
        self.server_url = server_url
        self.controllers = controllers  # --controllers
        self.cert_dir = cert_dir
        self.workdir = workdir
        self.extra_args = extra_args
        self.kubeconfig = os.path.join(workdir, "kube-controller-manager.kubeconfig")
        self.log_path = os.path.join(workdir, "kube-controller-manager.log")
        self.proc: Optional[subprocess.Popen] = None

    def command(self) -> list[str]:
        ca = os.path.join(self.cert_dir, "ca.crt")
        return [
            KUBE_CONTROLLER_MANAGER,
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={_free_port()}",
            f"--cert-dir={os.path.join(self.workdir, 'kcm-serving')}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={os.path.join(self.cert_dir, 'sa.key')}",
            f"--root-ca-file={ca}",
            f"--cluster-signing-cert-file={ca}",
            f"--cluster-signing-key-file={os.path.join(self.cert_dir, 'ca.key')}",
            "--leader-elect=true",
            "--controllers=" + ",".join(self.controllers),
            *self.extra_args,
        ]

    def start(self) -> "ControllerManagerProcess":
        cert, key = issue_client_certificate(self.cert_dir, "kube-controller-manager", USER)
        write_kubeconfig(self.kubeconfig, self.server_url, os.path.join(self.cert_dir, "ca.crt"), cert, key)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_for_log(self, pattern: str, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.log()):
                return True
            if self.proc is not None and self.proc.poll() is not None:
                return False
            time.sleep(0.5)
        return False

    def repeated_errors(self, at_least: int = 3) -> dict[str, int]:
        """Error lines (klog ``E``) that came back ``at_least`` times, timestamps aside: error loops."""
        counts: Counter = Counter()
        for line in self.log().splitlines():
            m = _KLOG.match(line)
            if m and m.group(1) == "E":
                counts[f"{m.group(2)}] {m.group(3)}"] += 1
        return {line: n for line, n in counts.items() if n >= at_least}
