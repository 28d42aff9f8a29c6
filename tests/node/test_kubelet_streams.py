"""kapiserver as the API server of a real node: logs, exec, attach, cp, port-forward and proxies through the kubelet.

One kapiserver, the real kube-controller-manager and the node kit's node
(kubelet, containerd, kube-proxy, kube-scheduler) for the module; each test
drives it with kubectl 1.32 or the official ``kubernetes`` client, as a
cluster user would.  Skipped, saying why, where the node kit is not built or
the tests do not run as root.
"""
from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid

from twisted.trial import unittest

from kapiserver.testing import node

BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"
AGNHOST = "registry.k8s.io/e2e-test-images/agnhost:2.53"


def cluster() -> node.NodeCluster:
    return node.shared_cluster("streams", node.NodeCluster)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NodeTestCase(unittest.TestCase):
    """A namespace of its own on the shared node cluster."""

    timeout = 600

    def setUp(self) -> None:
        reason = node.unavailable_reason() or node.not_in_this_run()
        if reason:
            raise unittest.SkipTest(reason)
        self.cluster = cluster()
        assert self.cluster.server is not None
        self.server = self.cluster.server
        self.ns = "node-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "namespace", self.ns)
        self.addCleanup(self.kubectl, "delete", "namespace", self.ns, "--wait=false", check=False)
        # the namespace's default ServiceAccount comes from kube-controller-manager
        self.wait_until(lambda: self.kubectl("-n", self.ns, "get", "serviceaccount", "default", check=False)
                   .returncode == 0, "the default ServiceAccount")

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 120.0) -> subprocess.CompletedProcess:
        return self.server.kubectl(*args, check=check, input=input, timeout=timeout)

    def run_pod(self, name: str, *command: str, image: str = BUSYBOX, stdin: bool = False) -> dict:
        args = ["-n", self.ns, "run", name, f"--image={image}", "--restart=Never"]
        if stdin:
            args += ["-i", "--tty=false", "--attach=false"]
        if command:
            args += ["--command", "--", *command]
        self.kubectl(*args)
        return self.cluster.wait_for_pod(self.ns, name)

    @staticmethod
    def wait_until(check, what: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: not there within {timeout}s (a hang guard)")
            time.sleep(0.3)


class LogTests(NodeTestCase):
    def test_logs_and_their_options(self):
        self.run_pod("chatty", "sh", "-c", "for i in $(seq 1 5); do echo line $i; done; sleep 3600")
        self.wait_until(lambda: "line 5" in self.kubectl("-n", self.ns, "logs", "chatty").stdout, "the log lines")
        self.assertEqual(self.kubectl("-n", self.ns, "logs", "chatty").stdout,
                         "".join(f"line {i}\n" for i in range(1, 6)))
        self.assertEqual(self.kubectl("-n", self.ns, "logs", "chatty", "--tail=2").stdout, "line 4\nline 5\n")
        self.assertEqual(self.kubectl("-n", self.ns, "logs", "chatty", "--limit-bytes=8").stdout, "line 1\nl")
        stamped = self.kubectl("-n", self.ns, "logs", "chatty", "--timestamps", "--tail=1").stdout
        self.assertRegex(stamped, r"^\d{4}-\d\d-\d\dT[\d:.]+Z line 5\n$")
        missing = self.kubectl("-n", self.ns, "logs", "chatty", "-c", "nope", check=False)
        self.assertIn("container nope is not valid for pod chatty", missing.stderr)
        previous = self.kubectl("-n", self.ns, "logs", "chatty", "--previous", check=False)
        self.assertNotEqual(previous.returncode, 0)  # the kubelet's own answer: no previous container
        self.assertIn("previous terminated container", previous.stderr)

    def test_follow_streams_until_the_container_ends(self):
        self.run_pod("ticker", "sh", "-c", "for i in $(seq 1 40); do echo tick $i; sleep 0.1; done; sleep 2")
        followed = self.kubectl("-n", self.ns, "logs", "-f", "ticker", timeout=120)
        self.assertEqual(followed.stdout, "".join(f"tick {i}\n" for i in range(1, 41)))

    def test_follow_of_a_chatty_pod_reads_what_it_writes_as_it_writes(self):
        self.run_pod("chatty", "sh", "-c", "i=0; while true; do echo n $i; i=$((i+1)); sleep 0.05; done")
        from kubernetes import client
        api = client.CoreV1Api(self.server.python_client())
        stream = api.read_namespaced_pod_log("chatty", self.ns, follow=True, _preload_content=False)
        try:
            seen: list[str] = []
            for chunk in stream.stream(64):
                seen.extend(chunk.decode().splitlines())
                if len(seen) > 60:
                    break
        finally:
            stream.release_conn()
        numbers = [int(line.split()[1]) for line in seen[:60] if line.startswith("n ")]
        self.assertEqual(numbers, list(range(numbers[0], numbers[0] + len(numbers))))  # in order, no gap


class ExecTests(NodeTestCase):
    def test_exec_with_stdin_and_exit_codes(self):
        self.run_pod("box", "sleep", "3600")
        out = self.kubectl("-n", self.ns, "exec", "box", "--", "echo", "hi")
        self.assertEqual(out.stdout, "hi\n")
        piped = self.kubectl("-n", self.ns, "exec", "-i", "box", "--", "sh", "-c", "tr a-z A-Z; echo done >&2",
                             input="hello from stdin\n")
        self.assertEqual((piped.stdout, piped.stderr), ("HELLO FROM STDIN\n", "done\n"))
        failed = self.kubectl("-n", self.ns, "exec", "box", "--", "sh", "-c", "exit 7", check=False)
        self.assertEqual(failed.returncode, 7)
        self.assertIn("command terminated with exit code 7", failed.stderr)
        missing = self.kubectl("-n", self.ns, "exec", "box", "--", "/no/such/binary", check=False)
        self.assertNotEqual(missing.returncode, 0)
        self.assertIn("no such file or directory", missing.stderr.lower())

    def test_exec_through_the_python_client_websocket(self):
        # the official client speaks v4.channel.k8s.io over a WebSocket (passed through to the kubelet)
        self.run_pod("box", "sleep", "3600")
        from kubernetes import client
        from kubernetes.stream import stream
        api = client.CoreV1Api(self.server.python_client())
        out = stream(api.connect_get_namespaced_pod_exec, "box", self.ns, command=["sh", "-c", "echo out; echo err >&2"],
                     stderr=True, stdout=True, stdin=False, tty=False)
        self.assertEqual(sorted(out.splitlines()), ["err", "out"])

    def test_cp_of_fifty_megabytes_both_ways(self):
        self.run_pod("box", "sleep", "3600")
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "big.bin")
            with open(source, "wb") as f:
                f.write(os.urandom(50 * 1024 * 1024))
            digest = hashlib.sha256(open(source, "rb").read()).hexdigest()
            self.kubectl("-n", self.ns, "cp", source, "box:/tmp/big.bin", timeout=300)
            inside = self.kubectl("-n", self.ns, "exec", "box", "--", "sha256sum", "/tmp/big.bin")
            self.assertEqual(inside.stdout.split()[0], digest)
            back = os.path.join(tmp, "back.bin")
            self.kubectl("-n", self.ns, "cp", "box:/tmp/big.bin", back, timeout=300)
            self.assertEqual(hashlib.sha256(open(back, "rb").read()).hexdigest(), digest)


class AttachTests(NodeTestCase):
    def test_run_interactive_sends_stdin_and_returns_output(self):
        out = self.kubectl("-n", self.ns, "run", "echoer", f"--image={BUSYBOX}", "--restart=Never", "-i", "--rm",
                           "--command", "--", "sh", "-c", "read line; echo got $line", input="ping\n", timeout=180)
        self.assertIn("got ping", out.stdout)

    def test_attach_to_a_running_container(self):
        self.run_pod("talker", "sh", "-c", "while true; do echo alive; sleep 0.3; done")
        attached = subprocess.Popen([*self._kubectl_prefix(), "-n", self.ns, "attach", "talker"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = attached.stdout.readline() if attached.stdout else ""
        finally:
            attached.kill()
            attached.wait()
        self.assertEqual(line, "alive\n")

    def _kubectl_prefix(self) -> list[str]:
        from kapiserver.testing.process import kubectl_binary
        return [kubectl_binary(), "--kubeconfig", self.server.kubeconfig]


class PortForwardTests(NodeTestCase):
    def test_twenty_concurrent_connections(self):
        self.run_pod("web", "/agnhost", "netexec", "--http-port=8080", image=AGNHOST)
        port = free_port()
        forward = subprocess.Popen([*AttachTests._kubectl_prefix(self), "-n", self.ns, "port-forward", "pod/web",
                                    f"{port}:8080"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(forward.wait)
        self.addCleanup(forward.kill)
        first = forward.stdout.readline() if forward.stdout else ""
        self.assertIn("Forwarding from 127.0.0.1", first)
        answers: dict[int, str] = {}

        def fetch(i: int) -> None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/echo?msg=conn{i}", timeout=60) as response:
                answers[i] = response.read().decode()
        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        self.assertEqual(answers, {i: f"conn{i}" for i in range(20)})


class ProxyTests(NodeTestCase):
    def test_pod_service_and_node_proxies(self):
        self.run_pod("web", "/agnhost", "netexec", "--http-port=8080", image=AGNHOST)
        self.kubectl("-n", self.ns, "expose", "pod", "web", "--port=80", "--target-port=8080")
        base = f"/api/v1/namespaces/{self.ns}"
        self.assertEqual(self.kubectl("get", "--raw", f"{base}/pods/web:8080/proxy/echo?msg=pod").stdout, "pod")
        self.wait_until(lambda: self.kubectl("-n", self.ns, "get", "endpoints", "web", "-o",
                                        "jsonpath={.subsets[0].addresses[0].ip}").stdout, "the Service's endpoints")
        self.assertEqual(self.kubectl("get", "--raw", f"{base}/services/web:80/proxy/echo?msg=svc").stdout, "svc")
        self.assertEqual(self.kubectl("get", "--raw", f"{base}/services/http:web:80/proxy/hostname").stdout, "web")
        self.assertEqual(self.kubectl("get", "--raw", f"/api/v1/nodes/{node.NODE_NAME}/proxy/healthz").stdout, "ok")
        missing = self.kubectl("get", "--raw", f"{base}/services/web:81/proxy/", check=False)
        self.assertIn('no service port 81 found for service "web"', missing.stderr)

    def test_links_in_proxied_pages_go_through_the_proxy(self):
        """The conformance spec 'Proxy ... should proxy through a service and a pod': agnhost porter
        serves each SERVE_PORT_<n> value on port n (Go's server sniffs ``<a ...`` as text/html), and
        the proxies answer its links under their own path, as upstream's proxy transport does."""
        link = '<a href="/rewriteme">test</a>'
        self.kubectl("-n", self.ns, "run", "porter", f"--image={AGNHOST}", "--restart=Never", "--port=80",
                     f"--env=SERVE_PORT_80={link}", f"--env=SERVE_PORT_1080={link}", "--env=SERVE_PORT_160=foo",
                     # TLS with the image's localhost.crt: the proxy does not verify a pod's certificate
                     '--env=SERVE_TLS_PORT_443=<a href="/tlsrewriteme">test</a>',
                     "--command", "--", "/agnhost", "porter")
        self.cluster.wait_for_pod(self.ns, "porter")
        self.kubectl("-n", self.ns, "expose", "pod", "porter", "--port=80", "--target-port=80")
        base = f"/api/v1/namespaces/{self.ns}"

        def page(prefix: str) -> str:
            return self.kubectl("get", "--raw", prefix + "/").stdout

        # porter's listeners start after the pod runs
        for path in (f"{base}/pods/porter:1080/proxy/", f"{base}/pods/https:porter:443/proxy/"):
            self.wait_until(lambda: self.kubectl("get", "--raw", path, check=False).returncode == 0, path)
        for name in ("porter", "porter:1080", "http:porter:1080"):
            prefix = f"{base}/pods/{name}/proxy"
            self.assertEqual(page(prefix), f'<a href="{prefix}/rewriteme">test</a>', name)
        self.assertEqual(page(f"{base}/pods/porter:160/proxy"), "foo")  # text/plain: as it is
        prefix = f"{base}/pods/https:porter:443/proxy"
        self.assertEqual(page(prefix), f'<a href="{prefix}/tlsrewriteme">test</a>')
        self.wait_until(lambda: self.kubectl("-n", self.ns, "get", "endpoints", "porter", "-o",
                                             "jsonpath={.subsets[0].addresses[0].ip}").stdout, "the Service's endpoints")
        prefix = f"{base}/services/porter:80/proxy"
        self.assertEqual(page(prefix), f'<a href="{prefix}/rewriteme">test</a>')
        # .../proxy itself answers 301 to .../proxy/, which client-go follows
        prefix = f"{base}/pods/porter:1080/proxy"
        self.assertEqual(self.kubectl("get", "--raw", prefix).stdout, f'<a href="{prefix}/rewriteme">test</a>')
