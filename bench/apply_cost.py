"""The cost of a server-side apply against a merge patch of the same Deployment.

``python3 bench/apply_cost.py [--requests 300] [--tmpfs]``

Both kinds of write change the same field (the image, alternating between
two values) of one realistic Deployment (two containers with ports, env,
probes and resources), one request at a time over a keep-alive HTTPS
connection, so each request does real work: the patch or apply, defaulting,
validation, managedFields bookkeeping and the write.  The apply is repeated
by the same manager, so every request also runs the pruning of fields it
applied last time.  Prints:

1. per-request latency through a real server (p50, mean; milliseconds), for
   written requests and for ``dryRun=All`` ones (no storage write, so the
   request handling alone), and the apply / merge-patch ratio;
2. the field manager alone, in process (no HTTP, no Store): microseconds
   per ``update`` (what a merge patch adds) and per ``apply``.

``--merge-only`` measures the merge patch alone, through a server: run it
from a checkout without managedFields to see what their bookkeeping adds to
every write.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Client, ensure_namespace, machine, print_table, scratch_dir, server_config  # noqa: E402
from _common import ServerProcess  # noqa: E402

NS = "bench-apply"
PATH = f"/apis/apps/v1/namespaces/{NS}/deployments"
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"
IMAGES = ("nginx:1.25", "nginx:1.26")


def container(name: str, image: str, port: int) -> dict:
    return {"name": name, "image": image,
            "ports": [{"name": "http", "containerPort": port}, {"name": "metrics", "containerPort": port + 1}],
            "env": [{"name": f"VAR_{i}", "value": f"value-{i}"} for i in range(6)],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": port}, "periodSeconds": 5},
            "livenessProbe": {"httpGet": {"path": "/live", "port": port}, "periodSeconds": 10},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}]}


def deployment(image: str) -> dict:
    labels = {"app": "web", "tier": "frontend"}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": labels, "annotations": {"team": "bench"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container("web", image, 8080),
                                                          container("sidecar", "busybox:1.36", 9090)],
                                           "volumes": [{"name": "config", "configMap": {"name": "web-config"}}]}}}}


def merge_patch(image: str) -> dict:
    return {"spec": {"template": {"spec": {"containers": [container("web", image, 8080),
                                                          container("sidecar", "busybox:1.36", 9090)]}}}}


def timed(client: Client, n: int, method: str, path: str, body_for, content_type: str) -> list[float]:
    out = []
    for i in range(n):
        body = json.dumps(body_for(IMAGES[i % 2])).encode()
        t0 = time.perf_counter()
        status, data = client.request(method, path, body, content_type=content_type)
        out.append(time.perf_counter() - t0)
        if status >= 400:
            raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
    return out


def server_rows(n: int, tmpfs: bool, merge_only: bool = False) -> list[list]:
    server = ServerProcess(extra_config=server_config("sqlite"), workdir=scratch_dir(tmpfs)).start()
    rows = []
    try:
        client = Client(server)
        ensure_namespace(client, NS)
        client.json("POST", PATH + "?fieldManager=creator", deployment(IMAGES[0]))
        timed(client, 20, "PATCH", PATH + "/web?fieldManager=warmup", merge_patch, MERGE)  # warm caches
        if not merge_only:
            timed(client, 20, "PATCH", PATH + "/web?fieldManager=deployer&force=true", deployment, APPLY)
        for label, query in (("written", ""), ("dryRun=All", "&dryRun=All")):
            merge = timed(client, n, "PATCH", PATH + "/web?fieldManager=patcher" + query, merge_patch, MERGE)
            if merge_only:
                rows.append([label, statistics.median(merge) * 1000, "", statistics.mean(merge) * 1000, "", "", ""])
                continue
            apply = timed(client, n, "PATCH", PATH + "/web?fieldManager=deployer&force=true" + query, deployment,
                          APPLY)
            m50, a50 = statistics.median(merge) * 1000, statistics.median(apply) * 1000
            mmean, amean = statistics.mean(merge) * 1000, statistics.mean(apply) * 1000
            rows.append([label, m50, a50, mmean, amean, f"{a50 / m50:.2f}x", f"{amean / mmean:.2f}x"])
        managed = client.json("GET", PATH + "/web")["metadata"].get("managedFields") or []
        print(f"managers on the object: {[e['manager'] for e in managed]}", file=sys.stderr)
    finally:
        server.cleanup()
    return rows


def in_process_rows(n: int) -> list[list]:
    from kapiserver.apis.builtin import builtin_resource_types
    from kapiserver.registry.fieldmanagers import field_manager
    rtype = next(r for r in builtin_resource_types() if r.api_version == "apps/v1" and r.kind == "Deployment")
    fm = field_manager(rtype)
    live = deployment(IMAGES[0])
    live["metadata"].update(namespace=NS, uid="u-1")
    live["metadata"]["managedFields"] = fm.update(None, live, None, "creator")
    obj, entries = fm.apply(live, deployment(IMAGES[1]), "deployer", True)
    live = {**obj, "metadata": {**obj["metadata"], "managedFields": entries}}
    rows = []
    for label, op in (
            ("update (a merge patch's bookkeeping)", lambda i: fm.update(live, _with_image(live, IMAGES[i % 2]),
                                                                        None, "patcher")),
            ("apply (merge, prune, bookkeeping)", lambda i: fm.apply(live, deployment(IMAGES[i % 2]), "deployer",
                                                                     True))):
        for i in range(20):
            op(i)
        t0 = time.perf_counter()
        for i in range(n):
            op(i)
        rows.append([label, (time.perf_counter() - t0) / n * 1e6])
    return rows


def _with_image(obj: dict, image: str) -> dict:
    out = copy.deepcopy(obj)
    out["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--tmpfs", action="store_true", help="SQLite data in /dev/shm")
    parser.add_argument("--merge-only", action="store_true", help="only the merge patch, through a server")
    args = parser.parse_args()
    print(f"# Server-side apply vs merge patch of one Deployment ({machine()})")
    print_table(["requests", "merge p50 ms", "apply p50 ms", "merge mean ms", "apply mean ms", "p50 ratio",
                 "mean ratio"], server_rows(args.requests, args.tmpfs, args.merge_only),
                title=f"Through a server (sqlite{' on tmpfs' if args.tmpfs else ''}), {args.requests} sequential "
                      "requests each")
    if args.merge_only:
        return
    print_table(["field manager operation", "µs per call"], in_process_rows(args.requests),
                title="The field manager alone (in process)")


if __name__ == "__main__":
    main()
