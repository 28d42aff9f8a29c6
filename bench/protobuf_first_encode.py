"""The first protobuf encode of many stored pods, in process: what a first ``resourceVersion=0``
protobuf LIST pays per item before its encodings are memoized (issue 34).

``python bench/protobuf_first_encode.py [--pods 20000] [--templates 200] [--runs 3] [--profile]``

1. starts one kapiserver (SQLite, one worker), creates ``--templates`` of bench/scale.py's realistic
   pods through it and reads them back as the server stores and lists them (defaults, status,
   managedFields included), then stops it;
2. makes ``--pods`` pods of them (each template's copies renamed, new uids), as JSON bytes;
3. per run, in a fresh process (no encoder state, as after a restart): the decode of each pod's JSON
   (orjson, what the list does first) and ``protobuf.encode_message("core.Pod", ...)`` of each,
   wall seconds and µs per pod; the sha256 of all the encoded bytes (must not change with the
   encoder); ``--profile``: cProfile's top functions of one run instead.
"""
from __future__ import annotations

import argparse
import cProfile
import hashlib
import os
import pstats
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Client, ensure_namespace, start_server, server_config  # noqa: E402

import orjson  # noqa: E402

import scale  # noqa: E402

MESSAGE = "core.Pod"


def stored_pods(templates: int) -> list[dict]:
    """``templates`` of scale.py's pods as a server lists them."""
    # no controllers, as scale.py runs it (the pod garbage collector would delete pods of absent nodes)
    server = start_server("sqlite", config=server_config("sqlite", controllers={"enabled": False}))
    try:
        client = Client(server)
        ensure_namespace(client, "enc")
        client.json("POST", "/api/v1/namespaces/enc/serviceaccounts",
                    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        for i in range(templates):
            client.json("POST", "/api/v1/namespaces/enc/pods", scale.pod(i))
        return client.json("GET", "/api/v1/namespaces/enc/pods")["items"]
    finally:
        server.stop()


def pod_bodies(templates: list[dict], count: int) -> list[bytes]:
    bodies = []
    for j in range(count):
        pod = orjson.loads(orjson.dumps(templates[j % len(templates)]))
        pod["metadata"]["name"] = f"pod-{j:06d}"
        pod["metadata"]["uid"] = f"{j:08x}-0000-4000-8000-{j:012x}"
        pod["apiVersion"], pod["kind"] = "v1", "Pod"
        bodies.append(orjson.dumps(pod))
    return bodies


def run_once(path: str, profile: bool) -> None:
    """One cold run (this process has encoded nothing yet): decode, then encode, every pod."""
    from kapiserver.machinery import protobuf
    with open(path, "rb") as f:
        bodies = orjson.loads(f.read())
    bodies = [b.encode() for b in bodies]
    profiler = cProfile.Profile() if profile else None
    encoded = []
    decoded = took = cpu = 0.0
    clock, cpu_clock = time.perf_counter, time.process_time
    for body in bodies:  # one at a time, as a list does: decode, encode, drop the decoded pod
        start = clock()
        obj = orjson.loads(body)
        middle, cpu_start = clock(), cpu_clock()
        if profiler is not None:
            profiler.enable()
        encoded.append(protobuf.encode_message(MESSAGE, obj))
        if profiler is not None:
            profiler.disable()
        end = clock()
        cpu += cpu_clock() - cpu_start
        decoded += middle - start
        took += end - middle
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    digest = hashlib.sha256(b"".join(encoded)).hexdigest()[:16]
    n = len(encoded)
    print(f"pods {n}: decode {decoded:.3f} s ({decoded / n * 1e6:.1f} µs/pod); "
          f"encode {took:.3f} s ({took / n * 1e6:.1f} µs/pod, CPU {cpu / n * 1e6:.1f} µs/pod); "
          f"{sum(map(len, encoded)) / n:.0f} B/pod; sha256 {digest}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--templates", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--data", help="reuse (or write) the pods' JSON here")
    parser.add_argument("--run-once", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_once:
        run_once(args.run_once, args.profile)
        return
    path = args.data or os.path.join(tempfile.mkdtemp(prefix="kapi-bench-"), "pods.json")
    if not os.path.exists(path):
        bodies = pod_bodies(stored_pods(args.templates), args.pods)
        with open(path, "wb") as f:
            f.write(orjson.dumps([b.decode() for b in bodies]))
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for _ in range(1 if args.profile else args.runs):
        cmd = [sys.executable, os.path.abspath(__file__), "--run-once", path] + (["--profile"] if args.profile else [])
        subprocess.run(cmd, check=True)
    print(f"load average {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
