"""The server under hostile or heavy traffic: does it hold, and does everyone else still get served?

``python3 bench/pressure.py [--scenario NAME ...] [--backend sqlite|etcd] [--connections 4000]
[--seconds 60] [--addresses 5]``

Scenarios (all by default, in this order), each against a fresh ``twistd -n kapiserver``
on 127.0.0.1 (traffic never leaves loopback):

* ``slow-headers``: ``--connections`` TLS connections that send a request line and then one
  header line every 28 s, never finishing the head, for ``--seconds``; a connection the
  server closes is opened again.  They come from ``--addresses`` loopback addresses
  (127.0.0.2, .3, ...; keep connections/addresses under ``connections.max_connections_per_address``)
  while a probe from 127.0.0.1 keeps asking for ``/readyz`` and a LIST, each over a new
  connection as a load balancer would;
* ``slow-headers-one-address``: the same flood from a single address (beyond the per-address cap);
* ``uploads``: 300 clients without a certificate POST a 3 MiB body at once;
* ``oversized-headers``: requests with a 20 KiB and a 2 MiB header (over Twisted's old 16 KiB
  limit, and over upstream's 1 MiB), and an authenticated one just under 1 MiB;
* ``sigterm``: 40 requests (30 LISTs of ~3 MB, 10 creates) and 5 watches (raw HTTP/1.1 chunked,
  the ``kubernetes`` Python client, ``kubectl get -w`` over HTTP/2) in flight, then SIGTERM.

For each: requests answered by status, p50/p99 of the probe GET and of ``/readyz`` during the
storm, the server's peak RSS (VmHWM), peak descriptors in use, and peak bytes of (deleted)
temporary files it held open.

The 1,000-concurrent-large-LIST scenario belongs with priority-and-fairness and list
streaming: add it to ``SCENARIOS`` (a function ``(args) -> None`` printing its tables).

The script only sets configuration keys older servers know too, so it can measure a checkout
from before these limits for comparison (run it from that checkout's ``bench/``).
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, ensure_namespace, host_port, machine, print_table,  # noqa: E402
                     scratch_dir, server_config, start_etcd)

NAMESPACE = "pressure"
PROBE_INTERVAL = 0.1
SAMPLE_INTERVAL = 0.25
HEADER_LINE_EVERY = 28.0   # the attacker: one header line every 28 s


# ------------------------------------------------------------------ the server and what it holds

class Sampler(threading.Thread):
    """Samples the server process: RSS, its high-water mark, open descriptors, temp-file bytes."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.stop_event = threading.Event()
        self.peak_fds = 0
        self.peak_temp_bytes = 0
        self.rss_start_mb = self.rss_mb()
        self.peak_rss_mb = self.rss_start_mb

    def rss_mb(self) -> float:
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def sample(self) -> None:
        fd_dir = f"/proc/{self.pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            return
        self.peak_fds = max(self.peak_fds, len(fds))
        temp = 0
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
                if target.endswith("(deleted)"):
                    temp += os.stat(f"{fd_dir}/{fd}").st_size
            except OSError:
                continue
        self.peak_temp_bytes = max(self.peak_temp_bytes, temp)
        self.peak_rss_mb = max(self.peak_rss_mb, self.rss_mb())

    def run(self) -> None:
        while not self.stop_event.wait(SAMPLE_INTERVAL):
            self.sample()

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


def tls_context(server: ServerProcess, certificate: bool, alpn: str = "http/1.1") -> ssl.SSLContext:
    certs = os.path.join(server.workdir, "certs")
    ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
    if certificate:
        ctx.load_cert_chain(os.path.join(certs, "admin.crt"), os.path.join(certs, "admin.key"))
    ctx.set_alpn_protocols([alpn])
    return ctx


def start(args: argparse.Namespace, **extra: Any) -> tuple[ServerProcess, Any]:
    etcd = start_etcd() if args.backend == "etcd" else None
    config = server_config(args.backend, etcd, **extra)
    server = ServerProcess(extra_config=config, workdir=scratch_dir()).start()
    return server, etcd


def stop(server: ServerProcess, etcd: Any) -> None:
    server.cleanup()
    if etcd is not None:
        etcd.stop()


# ------------------------------------------------------------------ the probe (a load balancer)

class Probe(threading.Thread):
    """GET ``/readyz`` and a one-item LIST alternately, each over a new TLS connection."""

    def __init__(self, server: ServerProcess, timeout: float = 10.0) -> None:
        super().__init__(daemon=True)
        self.host, self.port = host_port(server)
        self.ctx = tls_context(server, certificate=True)
        self.timeout = timeout
        self.stop_event = threading.Event()
        self.results: dict[str, list[tuple[float, str]]] = {"readyz": [], "list": []}

    def once(self, path: str) -> tuple[float, str]:
        t0 = time.perf_counter()
        try:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            outcome = str(response.status)
            conn.close()
        except Exception as e:
            outcome = type(e).__name__
        return time.perf_counter() - t0, outcome

    def run(self) -> None:
        paths = {"readyz": "/readyz", "list": f"/api/v1/namespaces/{NAMESPACE}/configmaps?limit=1"}
        turn = 0
        while not self.stop_event.is_set():
            name = ("readyz", "list")[turn % 2]
            self.results[name].append(self.once(paths[name]))
            turn += 1
            self.stop_event.wait(PROBE_INTERVAL)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()

    def rows(self) -> list[list[Any]]:
        rows = []
        for name, results in self.results.items():
            ok = sorted(t for t, outcome in results if outcome == "200")
            rows.append([f"probe {name}", len(results), outcomes(o for _, o in results),
                         pct(ok, 0.5), pct(ok, 0.99), max(ok) * 1000 if ok else float("nan")])
        return rows


def pct(sorted_seconds: list[float], p: float) -> float:
    if not sorted_seconds:
        return float("nan")
    return sorted_seconds[min(len(sorted_seconds) - 1, int(len(sorted_seconds) * p))] * 1000


def outcomes(values: Any) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(Counter(values).items()))


def print_server(title: str, sampler: Sampler, extra: Optional[list[list[Any]]] = None) -> None:
    rows = [["peak RSS (MiB)", f"{sampler.peak_rss_mb:.0f} (at start {sampler.rss_start_mb:.0f})"],
            ["peak descriptors", sampler.peak_fds],
            ["peak temporary-file bytes", sampler.peak_temp_bytes]]
    print_table(["server", "value"], rows + (extra or []), title)


# ------------------------------------------------------------------ slow-header flood

def _flood_process(host: str, port: int, cafile: str, sources: list[str], connections: int, seconds: float,
                   results: Any) -> None:
    """A client process holding ``connections`` slow-header connections (asyncio)."""
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    counts: Counter = Counter()
    held = [0]
    peak = [0]

    async def one(index: int, stop_at: float) -> None:
        source = sources[index % len(sources)]
        await asyncio.sleep(index * 0.002)  # ramp up over a few seconds
        while time.monotonic() < stop_at:
            opened = time.monotonic()
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname="127.0.0.1", local_addr=(source, 0)), 30)
            except (OSError, ssl.SSLError, asyncio.TimeoutError) as e:
                counts[f"refused ({type(e).__name__})"] += 1
                await asyncio.sleep(1.0)
                continue
            counts["opened"] += 1
            held[0] += 1
            peak[0] = max(peak[0], held[0])
            try:
                writer.write(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                while time.monotonic() < stop_at:
                    try:
                        data = await asyncio.wait_for(reader.read(1), min(HEADER_LINE_EVERY, stop_at - time.monotonic()))
                    except asyncio.TimeoutError:
                        if time.monotonic() >= stop_at:
                            break
                        writer.write(b"X-Slow: 1\r\n")
                        continue
                    if not data:
                        counts["cut by the server"] += 1
                        counts["held seconds"] += int(time.monotonic() - opened)
                        break
                    counts["answered (!)"] += 1
                    break
            except (OSError, ssl.SSLError):
                counts["cut by the server"] += 1
                counts["held seconds"] += int(time.monotonic() - opened)
            finally:
                held[0] -= 1
                writer.close()

    async def main() -> None:
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(one(i, stop_at) for i in range(connections)))

    asyncio.run(main())
    counts["peak held"] = peak[0]
    results.put(dict(counts))


def slow_headers(args: argparse.Namespace, sources: Optional[list[str]] = None) -> None:
    sources = sources or [f"127.0.0.{2 + i}" for i in range(args.addresses)]
    server, etcd = start(args)
    try:
        admin = Client(server)
        ensure_namespace(admin, NAMESPACE)
        admin.close()
        sampler = Sampler(server.proc.pid)
        sampler.start()
        probe = Probe(server)
        probe.start()
        time.sleep(2)  # the probe's baseline
        host, port = host_port(server)
        results: Any = multiprocessing.Queue()
        flood = multiprocessing.Process(target=_flood_process, args=(
            host, port, os.path.join(server.workdir, "certs", "ca.crt"), sources, args.connections,
            args.seconds, results))
        flood.start()
        counts = results.get()
        flood.join()
        probe.stop()
        sampler.stop()
        cut = counts.get("cut by the server", 0)
        held = counts.pop("held seconds", 0)
        title = (f"slow-header flood: {args.connections} connections from {len(sources)} address(es) for "
                 f"{args.seconds:.0f} s ({args.backend})")
        print_table(["flood", "count"], [[k, v] for k, v in sorted(counts.items())] +
                    [["mean seconds held before the cut", held / cut if cut else float("nan")]], title)
        print_table(["probe (new connection each)", "requests", "answers", "p50 ms", "p99 ms", "max ms"],
                    probe.rows())
        print_server("server", sampler)
    finally:
        stop(server, etcd)


def slow_headers_one_address(args: argparse.Namespace) -> None:
    slow_headers(args, sources=["127.0.0.2"])


# ------------------------------------------------------------------ unauthenticated uploads

def _upload_process(host: str, port: int, cafile: str, clients: int, body_bytes: int, results: Any) -> None:
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.set_alpn_protocols(["http/1.1"])
    outcomes_: list[tuple[str, float, int]] = []
    chunk = b"x" * 65536

    async def one() -> None:
        t0 = time.monotonic()
        sent = 0
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(
                host, port, ssl=ctx, server_hostname="127.0.0.1"), 30)
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as e:
            outcomes_.append((f"connect: {type(e).__name__}", time.monotonic() - t0, 0))
            return
        writer.write(f"POST /api/v1/namespaces/{NAMESPACE}/configmaps HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Content-Type: application/json\r\nContent-Length: {body_bytes}\r\n\r\n".encode())
        answer = asyncio.ensure_future(reader.readline())
        try:
            while sent < body_bytes and not answer.done():
                writer.write(chunk[:body_bytes - sent])
                sent += min(len(chunk), body_bytes - sent)
                try:
                    await asyncio.wait_for(asyncio.shield(writer.drain()), 1.0)
                except asyncio.TimeoutError:
                    continue
            line = await asyncio.wait_for(answer, 60)
            status = line.split(b" ")[1].decode() if line.startswith(b"HTTP/") else "no answer"
        except (OSError, ssl.SSLError, asyncio.TimeoutError, IndexError) as e:
            status = answer.result().split(b" ")[1].decode() if answer.done() and not answer.exception() \
                and answer.result().startswith(b"HTTP/") else type(e).__name__
        outcomes_.append((status, time.monotonic() - t0, sent))
        writer.close()

    async def main() -> None:
        await asyncio.gather(*(one() for _ in range(clients)))

    asyncio.run(main())
    results.put(outcomes_)


def uploads(args: argparse.Namespace, clients: int = 300, body_bytes: int = 3 * 1024 * 1024) -> None:
    server, etcd = start(args)
    try:
        sampler = Sampler(server.proc.pid)
        sampler.start()
        host, port = host_port(server)
        results: Any = multiprocessing.Queue()
        t0 = time.monotonic()
        process = multiprocessing.Process(target=_upload_process, args=(
            host, port, os.path.join(server.workdir, "certs", "ca.crt"), clients, body_bytes, results))
        process.start()
        done = results.get()
        process.join()
        elapsed = time.monotonic() - t0
        time.sleep(SAMPLE_INTERVAL * 2)
        sampler.stop()
        times = sorted(t for _, t, _ in done)
        sent = sorted(s for _, _, s in done)
        print_table(["uploads", "value"], [
            ["clients (no certificate), body each", f"{clients}, {body_bytes:,} bytes"],
            ["answers", outcomes(s for s, _, _ in done)],
            ["time to answer p50 / p99 ms", f"{pct(times, 0.5):.0f} / {pct(times, 0.99):.0f}"],
            ["body bytes a client sent before its answer, p50 / max", f"{sent[len(sent) // 2]:,} / {sent[-1]:,}"],
            ["all answered within (s)", elapsed]],
            f"unauthenticated uploads ({args.backend})")
        print_server("server", sampler)
    finally:
        stop(server, etcd)


# ------------------------------------------------------------------ oversized headers

def _raw_request(server: ServerProcess, head: bytes, certificate: bool, timeout: float) -> tuple[str, float]:
    host, port = host_port(server)
    ctx = tls_context(server, certificate)
    t0 = time.perf_counter()
    try:
        sock = ctx.wrap_socket(socket.create_connection((host, port), timeout=timeout), server_hostname=host)
        sock.settimeout(timeout)
        try:
            sock.sendall(head)
        except OSError:
            pass  # answered and closed while we were still sending: read the answer
        data = b""
        while b"\r\n" not in data:
            more = sock.recv(4096)
            if not more:
                break
            data += more
        sock.close()
        status = data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "closed, no answer"
    except socket.timeout:
        status = "no answer (timeout)"
    except OSError as e:
        status = type(e).__name__
    return status, time.perf_counter() - t0


def oversized_headers(args: argparse.Namespace, each: int = 20, timeout: float = 15.0) -> None:
    server, etcd = start(args)
    try:
        sampler = Sampler(server.proc.pid)
        sampler.start()
        rows = []
        for label, size in (("20 KiB header", 20 * 1024), ("2 MiB header", 2 * 1024 * 1024),
                            ("1000 KiB header (under the limit)", 1000 * 1024)):
            head = (b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * size + b"\r\n\r\n")
            results: list[tuple[str, float]] = []
            lock = threading.Lock()

            def worker() -> None:
                r = _raw_request(server, head, certificate=True, timeout=timeout)
                with lock:
                    results.append(r)
            threads = [threading.Thread(target=worker) for _ in range(each)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            times = sorted(t for _, t in results)
            rows.append([label, each, outcomes(s for s, _ in results), pct(times, 0.5), pct(times, 0.99)])
        sampler.stop()
        print_table(["request", "sent", "answers", "p50 ms", "p99 ms"], rows,
                    f"oversized request heads ({args.backend}; a request without an answer waits {timeout:.0f} s)")
        print_server("server", sampler)
    finally:
        stop(server, etcd)


# ------------------------------------------------------------------ SIGTERM with work in flight

def _raw_watch(server: ServerProcess, path: str, outcome: dict, name: str, ready: threading.Event) -> None:
    """An HTTP/1.1 chunked watch read to its end: clean when the terminating chunk arrived."""
    host, port = host_port(server)
    ctx = tls_context(server, certificate=True)
    try:
        sock = ctx.wrap_socket(socket.create_connection((host, port), timeout=60), server_hostname=host)
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\r\n".encode())
        data = b""
        ready.set()
        while True:
            more = sock.recv(65536)
            if not more:
                break
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        outcome[name] = "ended cleanly" if body.endswith(b"0\r\n\r\n") else f"cut ({len(body)} bytes, no last chunk)"
    except OSError as e:
        outcome[name] = f"error {type(e).__name__}"
        ready.set()


def _python_client_watch(server: ServerProcess, outcome: dict, ready: threading.Event) -> None:
    from kubernetes import client, watch
    api = client.CoreV1Api(server.python_client())
    events = 0
    try:
        # with timeout_seconds the client returns when the server ends the stream (without it,
        # it would watch again at once: here, against a closed listener)
        stream = watch.Watch().stream(api.list_namespaced_config_map, NAMESPACE, timeout_seconds=600,
                                      _request_timeout=120)
        ready.set()
        for _ in stream:
            events += 1
        outcome["python client watch"] = f"ended cleanly ({events} events)"
    except Exception as e:
        outcome["python client watch"] = f"error {type(e).__name__}: {str(e)[:80]}"
        ready.set()


def sigterm(args: argparse.Namespace, lists: int = 30, creates: int = 10, objects: int = 600) -> None:
    shutdown: dict[str, Any] = {"drain_seconds": 10}
    if args.shutdown_delay:
        shutdown["delay_seconds"] = args.shutdown_delay
    server, etcd = start(args, shutdown=shutdown)
    try:
        admin = Client(server)
        ensure_namespace(admin, NAMESPACE)
        for i in range(objects):
            admin.json("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"fill-{i:04d}"},
                        "data": {"k": "v" * 16000}})
        admin.close()
        watch_path = f"/api/v1/namespaces/{NAMESPACE}/configmaps?watch=1&resourceVersion=0"
        watches: dict[str, str] = {}
        threads = []
        for name in ("raw HTTP/1.1 watch 1", "raw HTTP/1.1 watch 2", "raw HTTP/1.1 watch 3"):
            ready = threading.Event()
            t = threading.Thread(target=_raw_watch, args=(server, watch_path, watches, name, ready), daemon=True)
            t.start()
            ready.wait(10)
            threads.append(t)
        ready = threading.Event()
        t = threading.Thread(target=_python_client_watch, args=(server, watches, ready), daemon=True)
        t.start()
        threads.append(t)
        ready.wait(10)
        kubectl = subprocess.Popen([server_kubectl(), "--kubeconfig", server.kubeconfig, "get", "configmaps", "-n",
                                    NAMESPACE, "--watch-only", "-o", "name", "-v=6"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        kubectl_log: list[str] = []
        kubectl_watching = threading.Event()

        def read_kubectl() -> None:
            assert kubectl.stderr is not None
            for line in kubectl.stderr:
                kubectl_log.append(line)
                if "watch=true" in line and " 200 OK" in line:
                    kubectl_watching.set()
        threading.Thread(target=read_kubectl, daemon=True).start()
        kubectl_watching.wait(30)
        time.sleep(0.5)  # the other watches are established too

        answers: list[str] = []
        lock = threading.Lock()
        sent = threading.Barrier(lists + creates + 1)

        def request(method: str, path: str, body: Optional[dict]) -> None:
            host, port = host_port(server)
            conn = http.client.HTTPSConnection(host, port, context=tls_context(server, True), timeout=60)
            try:
                data = json.dumps(body).encode() if body else None
                conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            except Exception as e:
                sent.wait()
                with lock:
                    answers.append(f"not sent: {type(e).__name__}")
                return
            sent.wait()
            try:
                response = conn.getresponse()
                payload = response.read()
                outcome = str(response.status) if payload else f"{response.status} empty body"
            except http.client.RemoteDisconnected:
                outcome = "empty reply"
            except Exception as e:
                outcome = type(e).__name__
            with lock:
                answers.append(outcome)

        workers = [threading.Thread(target=request, args=("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps", None))
                   for _ in range(lists)]
        workers += [threading.Thread(target=request, args=(
            "POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "late-"}, "data": {"k": "v"}}))
            for _ in range(creates)]
        for w in workers:
            w.start()
        sent.wait()           # every request is on the wire
        time.sleep(0.05)      # ... and read by the server
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(60)
        exited = time.monotonic() - t0
        for w in workers:
            w.join(30)
        for t in threads:
            t.join(30)
        try:
            kubectl_code = kubectl.wait(30)
            errors = [line.strip() for line in kubectl_log if " E1" in line or "error" in line.lower()]
            watches["kubectl get -w (HTTP/2)"] = (f"exited {kubectl_code}" +
                                                  (f": {errors[-1][:100]}" if kubectl_code and errors else ""))
        except subprocess.TimeoutExpired:
            kubectl.kill()
            watches["kubectl get -w (HTTP/2)"] = "still running 30 s after the server exited"
        print_table(["after SIGTERM", "value"], [
            ["shutdown.delay_seconds", args.shutdown_delay],
            ["requests in flight", f"{lists} LISTs of {objects} x 16 kB, {creates} creates"],
            ["answers", outcomes(answers)],
            ["exit status", code], ["seconds from SIGTERM to exit", exited]] +
            [[name, result] for name, result in sorted(watches.items())],
            f"SIGTERM with requests and watches in flight ({args.backend})")
    finally:
        stop(server, etcd)


def server_kubectl() -> str:
    from kapiserver.testing.process import kubectl_binary
    return kubectl_binary()


SCENARIOS: dict[str, Callable[[argparse.Namespace], None]] = {
    "slow-headers": slow_headers,
    "slow-headers-one-address": slow_headers_one_address,
    "uploads": uploads,
    "oversized-headers": oversized_headers,
    "sigterm": sigterm,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="default: all")
    parser.add_argument("--backend", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--connections", type=int, default=4000, help="slow-header connections (bounded: <= 5000)")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--addresses", type=int, default=5, help="loopback source addresses of the flood")
    parser.add_argument("--shutdown-delay", type=float, default=0.0,
                        help="sigterm: shutdown.delay_seconds (0: not set, upstream's default)")
    args = parser.parse_args()
    if not 0 < args.connections <= 5000:
        parser.error("--connections must be between 1 and 5000 (the load is bounded)")
    print(f"# bench/pressure.py on {machine()}")
    for name in args.scenario or list(SCENARIOS):
        SCENARIOS[name](args)


if __name__ == "__main__":
    main()
