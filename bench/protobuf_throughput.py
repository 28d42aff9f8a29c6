"""Protobuf against JSON: gets, lists and creates of a kapiserver process, and the codec alone.

``python3 bench/protobuf_throughput.py [--objects 1000] [--tmpfs]``

Prints two tables:

1. raw HTTPS over keep-alive connections at 1 and 16 clients, ConfigMaps and
   Pods (a realistic spec: two containers, probes, resources, volumes):
   GETs of single objects, LISTs of the whole namespace (``resourceVersion=0``,
   served from the watch cache) and creates, each with ``Accept``/
   ``Content-Type`` JSON and protobuf: ops/s, p50/p99 ms and bytes per answer;
2. the codec in-process (no server): encoding and decoding one Pod, JSON
   (orjson) against protobuf (machinery/protobuf.py), in microseconds.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, configmap, ensure_namespace, machine, print_table,  # noqa: E402
                     run_parallel, scratch_dir, server_config)

import orjson  # noqa: E402

from kapiserver.machinery import protobuf  # noqa: E402

PB = protobuf.MEDIA_TYPE
JSON = "application/json"


def pod(name: str) -> dict:
    container = {
        "name": "app", "image": "registry.example.com/team/app:1.2.3", "args": ["--port=8080", "--verbose"],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": "MODE", "value": "production"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": 8080}, "initialDelaySeconds": 10},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
    }
    sidecar = {"name": "proxy", "image": "registry.example.com/proxy:3.4", "ports": [{"containerPort": 15001}],
               "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "web", "tier": "frontend", "release": "stable"},
                         "annotations": {"example.com/owner": "team-a"}},
            "spec": {"containers": [container, sidecar],
                     "volumes": [{"name": "config", "configMap": {"name": "app-config"}}],
                     "nodeSelector": {"zone": "a"}, "serviceAccountName": "default",
                     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web",
                                      "effect": "NoSchedule"}]}}


def server_rows(server: ServerProcess, count: int, concurrency_levels: list[int]) -> list[list]:
    rows = []
    setup = Client(server)
    for kind, make, plural in (("ConfigMap", configmap, "configmaps"), ("Pod", pod, "pods")):
        ns = f"pb-{plural}"
        ensure_namespace(setup, ns)
        path = f"/api/v1/namespaces/{ns}/{plural}"
        names = [f"{plural[:-1]}-{i:05d}" for i in range(count)]
        for encoding, body_type in (("json", JSON), ("protobuf", PB)):
            bodies = [make(f"{n}-{encoding}") for n in names]
            raw = [protobuf.encode_object(b) if body_type == PB else orjson.dumps(b) for b in bodies]
            result = run_parallel(server, 16, count, lambda c, i: c.request(
                "POST", path, raw[i], accept=body_type, content_type=body_type)[0])
            rows.append([kind, "create", encoding, 16, result.rate, result.pct(0.5), result.pct(0.99), "",
                         result.errors])
        for concurrency in concurrency_levels:
            for encoding, accept in (("json", JSON), ("protobuf", PB)):
                sizes = []

                def get(c: Client, i: int) -> int:
                    status, data = c.request("GET", f"{path}/{names[i % count]}-json", accept=accept)
                    sizes.append(len(data))
                    return status
                result = run_parallel(server, concurrency, count, get)
                rows.append([kind, "get", encoding, concurrency, result.rate, result.pct(0.5), result.pct(0.99),
                             sum(sizes) // len(sizes), result.errors])
            lists = max(10, 40 // concurrency * concurrency)
            for encoding, accept in (("json", JSON), ("protobuf", PB)):
                sizes = []

                def list_all(c: Client, i: int) -> int:
                    status, data = c.request("GET", f"{path}?resourceVersion=0", accept=accept)
                    sizes.append(len(data))
                    return status
                result = run_parallel(server, concurrency, lists, list_all)
                rows.append([kind, f"list {2 * count}", encoding, concurrency, result.rate, result.pct(0.5),
                             result.pct(0.99), sum(sizes) // len(sizes), result.errors])
    return rows


def codec_rows(rounds: int) -> list[list]:
    obj = pod("codec")
    obj["metadata"].update({"namespace": "default", "uid": "5279389d-8754-4398-b8ac-036d0db95e3a",
                            "resourceVersion": "123456", "creationTimestamp": "2024-01-02T03:04:05Z"})
    as_json, as_pb = orjson.dumps(obj), protobuf.encode_object(obj)

    def timed(fn) -> float:
        t0 = time.perf_counter()
        for _ in range(rounds):
            fn()
        return (time.perf_counter() - t0) / rounds * 1e6
    return [["Pod", "json (orjson)", len(as_json), timed(lambda: orjson.dumps(obj)), timed(lambda: orjson.loads(as_json))],
            ["Pod", "protobuf", len(as_pb), timed(lambda: protobuf.encode_object(obj)),
             timed(lambda: protobuf.decode_object(as_pb))]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000, help="objects of each kind created per encoding")
    parser.add_argument("--tmpfs", action="store_true", help="SQLite data in /dev/shm")
    args = parser.parse_args()
    print(f"machine: {machine()}", file=sys.stderr)
    codec = codec_rows(2000)
    server = ServerProcess(extra_config=server_config("sqlite"), workdir=scratch_dir(args.tmpfs)).start()
    try:
        rows = server_rows(server, args.objects, [1, 16])
    finally:
        server.stop()
        server.cleanup()
    print_table(["kind", "op", "encoding", "clients", "ops/s", "p50 ms", "p99 ms", "bytes/answer", "errors"], rows,
                f"kapiserver over HTTPS, sqlite, {args.objects} objects per encoding")
    print_table(["object", "encoding", "bytes", "encode µs", "decode µs"], codec, "the codec alone, one Pod")


if __name__ == "__main__":
    main()
