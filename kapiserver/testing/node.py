"""A real node (kubelet, containerd, kube-proxy, kube-scheduler) against a kapiserver process, for end-to-end tests.

The node kit (``shared/anchor/node/`` beside the checkout, or ``$KNODE_KIT``)
builds and runs one node per machine in its own network namespace; this
module starts kapiserver configured as a cluster's API server for it
(advertised at the kit's host address, a serving certificate naming the first
service IP, the kubelet's serving certificate verified against the cluster
CA, the node's address by InternalIP, the Node authorizer and NodeRestriction), the real
kube-controller-manager beside it, then the node with identities minted from
the server's CA.  :func:`unavailable_reason` says why a machine cannot (not
root, the kit or its binaries and images not built, a command missing), and
tests skip with it.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import time
from typing import Callable, Optional

from kapiserver.testing import control_plane
from kapiserver.testing.process import REPO_ROOT, ServerProcess

KIT = os.environ.get("KNODE_KIT") or os.path.join(os.path.dirname(REPO_ROOT), "shared", "anchor", "node")
ANCHORS_DIR = control_plane.ANCHORS_DIR
NODE_NAME = "knode"
HOST_ADDRESS = "10.200.0.1"    # where pods and the node reach the API server (the kit's forwarder)
NODE_ADDRESS = "10.200.0.2"    # the node's InternalIP: the kubelet's :10250
FIRST_SERVICE_IP = "10.0.0.1"
START_TIMEOUT = 300.0
_COMMANDS = ("containerd", "runc", "ctr", "socat", "nsenter", "ip", "iptables", "conntrack", "kubectl", "openssl")


def unavailable_reason() -> Optional[str]:
    """Why the node kit cannot run here, or None."""
    if os.geteuid() != 0:
        return "the node kit needs root (network namespace, containerd, kubelet)"
    if not os.path.isfile(os.path.join(KIT, "start-node.sh")):
        return f"no node kit at {KIT} (set KNODE_KIT)"
    binaries = os.path.join(ANCHORS_DIR, "node", "bin")
    for binary in ("kubelet", "kube-proxy", "kube-scheduler", "knode-cri"):
        if not os.access(os.path.join(binaries, binary), os.X_OK):
            return f"{binaries}/{binary} is absent: build the node kit ({KIT}/README.md: build.sh)"
    if not os.path.exists(os.path.join(ANCHORS_DIR, "node", "images", "out", "pause.tar")):
        return f"the node kit's images are not built ({KIT}/README.md: images/build-images.sh)"
    if not control_plane.available():
        return f"{control_plane.KUBE_CONTROLLER_MANAGER} is absent: build it with the anchor kit"
    missing = [c for c in _COMMANDS if shutil.which(c) is None]
    if missing:
        return f"commands missing for the node kit: {', '.join(missing)} (its README lists the packages)"
    return None


RUN_SWITCH = "KAPISERVER_NODE_TESTS"


def not_in_this_run() -> Optional[str]:
    """The kit runs one node per machine, so its tests run in one process of their own
    (``make test`` runs them after the parallel suite, with the switch set)."""
    if os.environ.get(RUN_SWITCH) != "1":
        return f"node tests run on their own, in one process: {RUN_SWITCH}=1 trial tests.node (make test does)"
    return None


def node_server_config(extra: Optional[dict] = None) -> dict:
    """kapiserver's configuration as the API server of the kit's node."""
    config: dict = {
        "advertise_address": HOST_ADDRESS,
        "tls": {"extra_sans": [FIRST_SERVICE_IP, HOST_ADDRESS]},
        "admission": {"enable_plugins": ["NodeRestriction"]},
        "authorization": {"modes": ["Node", "RBAC"]},
        "controllers": {"enabled": False},  # the real kube-controller-manager runs them
        "kubelet": {"preferred_address_types": ["InternalIP", "Hostname"]},
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


class NodeCluster:
    """kapiserver + kube-controller-manager + the kit's node; ``stop()`` undoes all of it.

    ``before_node(cluster)`` runs once the server and kube-controller-manager are up and
    before the node starts (objects the node needs: a bootstrap token); ``node_env`` is
    added to start-node.sh's environment (its ``KNODE_*`` knobs)."""

    def __init__(self, extra_config: Optional[dict] = None,
                 before_node: Optional[Callable[["NodeCluster"], None]] = None,
                 node_env: Optional[dict[str, str]] = None) -> None:
        self.extra_config = extra_config
        self.before_node = before_node
        self.node_env = node_env or {}
        self.server: Optional[ServerProcess] = None
        self.kcm: Optional[control_plane.ControllerManagerProcess] = None
        self.node_log = ""

    def start(self) -> "NodeCluster":
        _stop_node()  # a node left by an earlier run that was killed
        server = ServerProcess()
        certs = os.path.join(server.workdir, "certs")
        config = node_server_config(self.extra_config)
        config["kubelet"] = {**config["kubelet"], "certificate_authority": os.path.join(certs, "ca.crt")}
        server.extra_config = config
        self.server = server.start()
        self.kcm = control_plane.ControllerManagerProcess(server.server_url, certs, server.workdir).start()
        try:
            if self.before_node is not None:
                self.before_node(self)
            result = subprocess.run([os.path.join(KIT, "start-node.sh"), server.kubeconfig,
                                     os.path.join(certs, "ca.crt"), os.path.join(certs, "ca.key")],
                                    capture_output=True, text=True, timeout=START_TIMEOUT,
                                    env={**os.environ, **self.node_env})
        except subprocess.TimeoutExpired as e:
            self.stop()
            output = "".join(o.decode() if isinstance(o, bytes) else o or "" for o in (e.stdout, e.stderr))
            raise RuntimeError(f"the node did not start within {START_TIMEOUT}s: {output}") from None
        self.node_log = result.stdout + result.stderr
        if result.returncode != 0:
            self.stop()
            raise RuntimeError(f"start-node.sh failed ({result.returncode}):\n{self.node_log[-4000:]}")
        return self

    def stop(self) -> None:
        _stop_node()
        if self.kcm is not None:
            self.kcm.stop()
        if self.server is not None:
            self.server.cleanup()

    def wait_for_pod(self, namespace: str, name: str, phase: str = "Running", timeout: float = 120.0) -> dict:
        """The pod once in ``phase`` (a guard against hangs, not a measure)."""
        import json
        assert self.server is not None
        deadline = time.monotonic() + timeout
        pod: dict = {}
        while time.monotonic() < deadline:
            got = self.server.kubectl("-n", namespace, "get", "pod", name, "-o", "json", check=False)
            if got.returncode == 0:
                pod = json.loads(got.stdout)
                if (pod.get("status") or {}).get("phase") == phase:
                    return pod
            time.sleep(0.3)
        raise AssertionError(f"pod {namespace}/{name} not {phase}: {pod.get('status')}")


_current: dict = {}
_stop_registered: list[bool] = []


def shared_cluster(name: str, make: Callable[[], NodeCluster]) -> NodeCluster:
    """The one node cluster of this process, started by ``make`` under ``name``: a test module
    asking for another name stops the one before (the kit runs one node per machine)."""
    if _current.get("name") != name:
        previous = _current.pop("cluster", None)
        _current.clear()
        if previous is not None:
            previous.stop()
        cluster = make().start()
        _current.update(name=name, cluster=cluster)
        if not _stop_registered:
            atexit.register(_stop_current)
            _stop_registered.append(True)
    return _current["cluster"]


def _stop_current() -> None:
    cluster = _current.pop("cluster", None)
    if cluster is not None:
        cluster.stop()


def _stop_node() -> None:
    script = os.path.join(KIT, "stop-node.sh")
    if os.path.isfile(script):
        subprocess.run([script], capture_output=True, timeout=180)
