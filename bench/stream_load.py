#!/usr/bin/env python3
"""Many slow readers of kubelet streams: what they cost the API server in memory, and whether it stays responsive.

Against a server with a real node (the node kit), for a bounded time:

* ``--logs`` clients follow (``logs -f``) a pod that writes about 1 MB/s, each
  reading only ``--read-rate`` bytes per second, so the server must hold back
  the kubelet (backpressure) instead of buffering;
* ``--forwards`` connections through one ``kubectl port-forward`` each
  download a 64 MB file from a pod at the same slow rate;
* meanwhile ``/readyz`` is asked every 0.2 s on a connection of its own.

Prints the server's RSS (all its processes: ``--pid``, with its children) before,
at the peak and after, the RSS growth, and the ``/readyz`` latencies (median,
p99, max).  Everything stops by itself after ``--seconds``; traffic goes only to
the server's loopback address and the port-forward's local port.

    bench/stream_load.py KUBECONFIG --pid SERVER_PID [--logs 100] [--forwards 20] [--seconds 30]
"""
from __future__ import annotations

import argparse
import base64
import http.client
import os
import socket
import ssl
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from typing import Optional

import yaml

BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and its children, in KiB."""
    total = 0
    pids = [pid]
    try:
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
        pids += [int(c) for c in children]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


class Cluster:
    """The kubeconfig's server, CA and admin certificate, for raw TLS clients."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        with open(kubeconfig) as f:
            kc = yaml.safe_load(f)
        cluster, user = kc["clusters"][0]["cluster"], kc["users"][0]["user"]
        server = cluster["server"].removeprefix("https://")
        host, _, port = server.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.tmp = tempfile.mkdtemp(prefix="stream-load-")
        self.context = ssl.create_default_context()
        ca = self._file(cluster, "certificate-authority")
        self.context.load_verify_locations(ca)
        self.context.load_cert_chain(self._file(user, "client-certificate"), self._file(user, "client-key"))

    def _file(self, section: dict, key: str) -> str:
        if key in section:
            return section[key]
        path = os.path.join(self.tmp, key)
        with open(path, "wb") as f:
            f.write(base64.b64decode(section[key + "-data"]))
        return path

    def connect(self) -> ssl.SSLSocket:
        raw = socket.create_connection((self.host, self.port), timeout=30)
        return self.context.wrap_socket(raw, server_hostname=self.host)

    def kubectl(self, *args: str, check: bool = True) -> str:
        return subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args], capture_output=True, text=True,
                              check=check, timeout=120).stdout


def slow_reader(connect, request: bytes, rate: int, until: float, counts: list[int],
                firsts: Optional[list[float]] = None) -> None:
    """Send ``request`` and read its answer at about ``rate`` bytes per second until ``until``
    (``firsts``: when its first bytes came, ``time.monotonic()``)."""
    try:
        sock = connect()
        sock.sendall(request)
        sock.settimeout(5)
        got = 0
        while time.monotonic() < until:
            try:
                chunk = sock.recv(min(4096, rate))
            except socket.timeout:
                continue
            if not chunk:
                break
            if not got and firsts is not None:
                firsts.append(time.monotonic())
            got += len(chunk)
            time.sleep(len(chunk) / rate)
        counts.append(got)
        sock.close()
    except OSError as e:
        counts.append(-1)
        print(f"reader failed: {e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig")
    parser.add_argument("--pid", type=int, required=True, help="the API server's process (its children count too)")
    parser.add_argument("--logs", type=int, default=100)
    parser.add_argument("--forwards", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--read-rate", type=int, default=2048, help="bytes per second each reader takes")
    args = parser.parse_args()
    cluster = Cluster(args.kubeconfig)
    ns = "streamload-" + uuid.uuid4().hex[:6]
    cluster.kubectl("create", "namespace", ns)
    try:
        run(cluster, ns, args)
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def run(cluster: Cluster, ns: str, args: argparse.Namespace) -> None:
    for _ in range(300):  # the default ServiceAccount, from kube-controller-manager
        if cluster.kubectl("-n", ns, "get", "sa", "default", check=False):
            break
        time.sleep(0.2)
    # about 1 MB/s of log lines; a 64 MB file served over HTTP
    cluster.kubectl("-n", ns, "run", "chatty", f"--image={BUSYBOX}", "--restart=Never", "--command", "--", "sh", "-c",
                    "while true; do head -c 100000 /dev/zero | tr '\\0' x; echo; sleep 0.1; done")
    cluster.kubectl("-n", ns, "run", "files", f"--image={BUSYBOX}", "--restart=Never", "--command", "--", "sh", "-c",
                    "mkdir /www && head -c 67108864 /dev/zero > /www/big && httpd -f -p 8080 -h /www")
    cluster.kubectl("-n", ns, "wait", "--for=condition=Ready", "pod/chatty", "pod/files", "--timeout=120s")
    time.sleep(2)
    forward = None
    local_port = 0
    if args.forwards:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            local_port = s.getsockname()[1]
        forward = subprocess.Popen(["kubectl", "--kubeconfig", cluster.kubeconfig, "-n", ns, "port-forward",
                                    "pod/files", f"{local_port}:8080"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        assert forward.stdout is not None
        print(forward.stdout.readline().strip())
    before = rss_kib(args.pid)
    until = time.monotonic() + args.seconds
    log_counts: list[int] = []
    forward_counts: list[int] = []
    forward_firsts: list[float] = []
    threads = []
    log_request = (f"GET /api/v1/namespaces/{ns}/pods/chatty/log?follow=true HTTP/1.1\r\n"
                   f"Host: {cluster.host}\r\n\r\n").encode()
    for _ in range(args.logs):
        threads.append(threading.Thread(target=slow_reader, args=(cluster.connect, log_request, args.read_rate,
                                                                   until, log_counts), daemon=True))
    file_request = b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for _ in range(args.forwards):
        threads.append(threading.Thread(
            target=slow_reader, args=(lambda: socket.create_connection(("127.0.0.1", local_port), timeout=30),
                                      file_request, args.read_rate, until, forward_counts, forward_firsts),
            daemon=True))
    probe = http.client.HTTPSConnection(cluster.host, cluster.port, context=cluster.context, timeout=30)
    probe.request("GET", "/readyz")  # the probe's own connection is made before the readers' are
    probe.getresponse().read()
    for t in threads:
        t.start()
    latencies: list[float] = []
    slowest: list[tuple[float, float]] = []  # (latency, seconds after the readers started)
    started = time.monotonic()
    peak = before
    while time.monotonic() < until:
        t0 = time.monotonic()
        probe.request("GET", "/readyz")
        answer = probe.getresponse()
        body = answer.read()
        latencies.append(time.monotonic() - t0)
        slowest.append((latencies[-1], t0 - started))
        if answer.status != 200 or body != b"ok":
            print(f"/readyz answered {answer.status} {body[:100]!r}")
        peak = max(peak, rss_kib(args.pid))
        time.sleep(0.2)
    for t in threads:
        t.join(30)
    if forward is not None:
        forward.kill()
        forward.wait()
    time.sleep(2)
    after = rss_kib(args.pid)
    latencies.sort()
    print(f"streams: {args.logs} logs -f ({sum(c > 0 for c in log_counts)} read data), {args.forwards} port-forward "
          f"downloads ({sum(c > 0 for c in forward_counts)} read data), readers at {args.read_rate} B/s, "
          f"{args.seconds:.0f} s")
    print(f"RSS: before {before / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB, after {after / 1024:.1f} MiB, "
          f"growth at peak {(peak - before) / 1024:.1f} MiB")
    print(f"/readyz: {len(latencies)} probes, median {statistics.median(latencies) * 1000:.1f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99) - 1] * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    if args.forwards:
        print("port-forward downloads' first bytes, s after the readers started: "
              + (", ".join(f"{t - started:.1f}" for t in sorted(forward_firsts)) or "none"))
    print("slowest /readyz: " + ", ".join(f"{lat * 1000:.0f} ms at {when:.1f} s" for lat, when in
                                          sorted(slowest, reverse=True)[:5]))


if __name__ == "__main__":
    main()
