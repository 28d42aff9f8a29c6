#!/usr/bin/env python3
"""CPU per request spent in named functions of a running server, without a profiler.

``python bench/function_cost.py [--op create] [--kind configmap|pod] [--seconds 8] [--backend sqlite|etcd] [--write-path | --functions m:Q.f,...]``

Starts one server process (``workers: 1``) with ``bench/function_timer`` on
its ``sys.path``: that ``sitecustomize`` wraps each named function and adds up
the thread CPU of its calls (see its docstring).  The server's threads are
pinned to the first CPU and the clients (``--clients`` keep-alive HTTPS
connections, threads of this process) to the others, so the server's CPU per
request is not inflated by clients running on its core.  The load is
kbench's, on ConfigMaps of 200 B (``--kind pod``: one-container pods of about
250 B): ``create``, ``get``, ``update`` (merge patch), ``replace`` (PUT),
``apply`` (server-side apply) or ``delete``, for ``--seconds`` after a warm-up.  ``--write-path`` times the passes a write makes
over its object (JSON parses and encodes, copies, defaulting) instead of the stages.

Prints the server's CPU per request (all its threads, from ``/proc``), and
for each function its calls per request, CPU per call and per request, and
that as a share of the server's.  Times are inclusive, so nested functions
overlap.  cProfile and py-spy overstate code that makes many small calls
(each call pays the profiler); here only the named functions pay one
wrapper call each (about 1 µs).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, configmap, cpu_seconds, ensure_namespace, machine,  # noqa: E402
                     print_table, run_parallel, server_config, start_etcd)

TIMER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "function_timer")
NAMESPACE = "function-cost"

# A request's stages on the reactor thread, outermost first (times are inclusive: a row
# holds the rows indented under it in the comments), then each backend's own.
REQUEST_FUNCTIONS = (
    "twisted.protocols.tls:TLSMemoryBIOProtocol.dataReceived",  # decrypt, then:
    "twisted.web.http:HTTPChannel.dataReceived",  # parse the head and body, then:
    "kapiserver.endpoints.filters.request:APIRequest.begin",  # authenticate at the head's end
    "twisted.web.server:Request.process",  # filters and handler, up to the storage call
    "kapiserver.endpoints.filters.priority_and_fairness:WithPriorityAndFairness.apply",
    "kapiserver.endpoints.scope:RequestScope.decode_object",
    "kapiserver.registry.store:Store._check_metadata",
    "kapiserver.machinery.managedfields.fieldmanager:FieldManager.update",
    "twisted.internet.base:ReactorBase.runUntilCurrent",  # timers and threads' results, then:
    "twisted.web.http:Request.finish",
)
# The passes a write makes over its object: every JSON parse and encode in the process
# (orjson's, whoever calls them), the copies, the kind's defaulting, the stored value's decode.
WRITE_PATH_FUNCTIONS = (
    "orjson:loads",
    "orjson:dumps",
    "kapiserver.machinery.codec:copy_json",
    "copy:deepcopy",
    "kapiserver.registry.resource_type:Strategy.default",
    "kapiserver.registry.store:decode",
    "kapiserver.registry.store:Store._check_namespace",
    "kapiserver.registry.store:Store._stamp_type",
    "kapiserver.registry.store:Store.to_external",
)
# a kind's own defaulting (Strategy.default above times only the kinds that keep the base's)
KIND_DEFAULTING = {"pod": ("kapiserver.apis.core.pods:PodStrategy.default",)}
BACKEND_FUNCTIONS = {
    "sqlite": (
        "kapiserver.storage.sqlite:SQLiteStorage._batch_done",  # a commit's results (the answers)
        "kapiserver.storage.sqlite_watch:WatchHub.publish",  # its events to the watch caches
        "kapiserver.storage.sqlite:SQLiteStorage._commit_batch",  # the writer thread's transaction
    ),
    "etcd": (
        "kapiserver.storage.etcd.unary_http:GatewayConnection.dataReceived",  # an answer (and what it resumes)
        "kapiserver.storage.etcd.websocket:WebSocketStream.dataReceived",  # watch events, parsed and delivered
    ),
}


def pod(name: str, note: str) -> dict:
    """A one-container pod no node runs; ``note`` (an annotation) is what an update changes."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": {"note": note}},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]}}


def obj(kind: str, name: str, text: str) -> dict:
    """The object a request writes: a ConfigMap of 200 B or a pod of about 250 B."""
    return pod(name, text) if kind == "pod" else configmap(name, k=text)


def change(kind: str, text: str) -> dict:
    """An update's merge patch."""
    return {"metadata": {"annotations": {"note": text}}} if kind == "pod" else {"data": {"k": text}}


def operation(op: str, base: str, tag: str, objects: int, kind: str = "configmap"):
    """kbench's requests on ConfigMaps (or pods) ``pre-<i>`` (``objects`` of them stored) or, to
    create, ``<tag>-<i>``: ``op(client, i)`` returns the HTTP status."""
    if op == "create":
        return lambda c, i: c.request("POST", base, obj(kind, f"{tag}-{i}", "x" * 200))[0]
    if op == "get":
        return lambda c, i: c.request("GET", f"{base}/pre-{i % objects}")[0]
    if op == "update":
        return lambda c, i: c.request("PATCH", f"{base}/pre-{i % objects}", change(kind, f"{i}" + "y" * 200),
                                      content_type="application/merge-patch+json")[0]
    if op == "replace":
        return lambda c, i: c.request("PUT", f"{base}/pre-{i % objects}", obj(kind, f"pre-{i % objects}",
                                                                             f"{i}" + "y" * 200))[0]
    if op == "apply":
        return lambda c, i: c.request("PATCH", f"{base}/pre-{i % objects}?fieldManager=bench&force=true",
                                      obj(kind, f"pre-{i % objects}", f"{i}" + "y" * 200),
                                      content_type="application/apply-patch+yaml")[0]
    if op == "delete":
        return lambda c, i: c.request("DELETE", f"{base}/pre-{i}")[0]
    raise ValueError(op)


def read_report(server: ServerProcess, path: str) -> dict:
    if os.path.exists(path):
        os.unlink(path)
    server.proc.send_signal(signal.SIGUSR2)
    for _ in range(100):
        if os.path.exists(path):  # renamed into place whole
            with open(path) as f:
                return json.load(f)
        time.sleep(0.05)
    raise RuntimeError("the server wrote no function report (is bench/function_timer on its path?)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=("create", "get", "update", "replace", "apply", "delete"), default="create")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--objects", type=int, default=2000, help="objects stored first (get, update, delete)")
    parser.add_argument("--kind", choices=("configmap", "pod"), default="configmap",
                        help="what the requests write: ConfigMaps, or pods (their kind's defaulting timed too)")
    parser.add_argument("--backend", choices=("sqlite", "etcd"), default="sqlite")
    parser.add_argument("--functions", default="",
                        help="comma-separated module:Qualified.name (synchronous functions); "
                             "default: a request's stages and the backend's")
    parser.add_argument("--write-path", action="store_true", help="time the passes a write makes over its object")
    args = parser.parse_args()
    write_path = [*WRITE_PATH_FUNCTIONS, *KIND_DEFAULTING.get(args.kind, ())]
    functions = ([f.strip() for f in args.functions.split(",") if f.strip()]
                 or (write_path if args.write_path else [*REQUEST_FUNCTIONS, *BACKEND_FUNCTIONS[args.backend]]))

    cpus = sorted(os.sched_getaffinity(0))
    # the server on the first CPU from its start (as watch_latency.py's --server-cpus), the clients on the others
    pinned = ("taskset", "-c", str(cpus[0])) if len(cpus) > 1 else ()
    etcd = start_etcd() if args.backend == "etcd" else None
    server = ServerProcess(server_config(args.backend, etcd), command_prefix=pinned)
    report_path = os.path.join(server.workdir, "function-cost.json")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "KAPI_TIME_FUNCTIONS", "KAPI_TIME_OUT")}
    os.environ.update(PYTHONPATH=TIMER_PATH + os.pathsep + (saved["PYTHONPATH"] or ""),
                      KAPI_TIME_FUNCTIONS=",".join(functions), KAPI_TIME_OUT=report_path)
    try:
        server.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        if pinned:
            os.sched_setaffinity(0, set(cpus[1:]))
        admin = Client(server)
        ensure_namespace(admin, NAMESPACE)
        admin.close()
        base = f"/api/v1/namespaces/{NAMESPACE}/{args.kind}s"
        if args.op != "create":
            print(f"storing {args.objects} {args.kind}s...", file=sys.stderr)
            run_parallel(server, 8, args.objects, operation("create", base, "pre", args.objects, args.kind))
        # warm up (a delete's warm-up reads: each object is deleted once, in the timed run)
        warm_up = "get" if args.op == "delete" else args.op
        run_parallel(server, args.clients, 500, operation(warm_up, base, "warm", args.objects, args.kind))
        if args.op == "delete":
            count = args.objects
        else:  # as many requests as --seconds allow at the warm-up's rate
            probe = run_parallel(server, args.clients, 500, operation(args.op, base, "probe", args.objects,
                                                                      args.kind))
            count = max(500, int(probe.rate * args.seconds))
        run = operation(args.op, base, "timed", args.objects, args.kind)
        read_report(server, report_path)  # reset
        cpu_before = cpu_seconds(server.proc.pid)
        result = run_parallel(server, args.clients, count, run)
        cpu_after = cpu_seconds(server.proc.pid)
        report = read_report(server, report_path)
    finally:
        server.cleanup()
        if etcd is not None:
            etcd.cleanup()

    per_request = (cpu_after - cpu_before) / result.count * 1e6
    print(f"\n{args.op} of {args.kind}s on {args.backend}, {args.clients} clients, {machine()}: "
          f"{result.count} requests, "
          f"{result.rate:,.0f}/s, {result.errors} errors; the server's CPU {per_request:.0f} µs per request "
          "(its threads pinned to one CPU, the clients on the others)\n")
    rows = []
    for name in functions:
        found = report["functions"].get(name)
        if found is None:
            rows.append([name, "-", "-", "-", report["not_timed"].get(name, "not timed")])
            continue
        calls, seconds = found["calls"], found["cpu_seconds"]
        us_per_request = seconds / result.count * 1e6
        rows.append([name, calls / result.count, seconds / calls * 1e6 if calls else 0.0, us_per_request,
                     f"{us_per_request / per_request:.0%}"])
    print_table(["function (inclusive)", "calls per request", "µs per call", "µs per request", "of the server's CPU"],
                rows)


if __name__ == "__main__":
    main()
