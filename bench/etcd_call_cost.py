"""What one call to etcd's JSON gateway costs kapiserver's process, and etcd: CPU per call.

``python3 bench/etcd_call_cost.py [--calls 4000] [--concurrency 4] [--etcd URL]``

Runs ``--calls`` range requests of one key holding a ConfigMap-sized value
through ``EtcdClient.call`` (its unary HTTP/1.1 client, JSON) from
``--concurrency`` coroutines against a throw-away etcd (or ``--etcd``), and
prints this process's CPU per call (user and system, from
``time.process_time``), etcd's (from ``/proc``, with a throw-away etcd only)
and the calls per second, for the range with its value and ``keys_only``.
Every storage operation on etcd (a GET, a create's txn, an update's txn)
pays this once, on top of what the API server does with the answer; what
etcd pays barely depends on the value it carries.
"""
from __future__ import annotations

import argparse
import base64
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from twisted.internet import defer, task  # noqa: E402

from _common import cpu_seconds, machine, print_table, start_etcd  # noqa: E402
from kapiserver.storage.etcd.client import EtcdClient  # noqa: E402


KEY = base64.b64encode(b"/bench/etcd-call-cost").decode()
# a 200 B ConfigMap as kapiserver stores it, with its managedFields
VALUE = (b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-1","namespace":"bench","uid":'
         b'"5e054db3-3538-41b0-a339-95159357dfd5","creationTimestamp":"2026-11-27T20:36:08Z","managedFields":'
         b'[{"manager":"kbench","operation":"Update","apiVersion":"v1","time":"2026-11-27T20:36:08Z",'
         b'"fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}}}}]},"data":{"k":"' + b"x" * 200 + b'"}}')


async def measure(url: str, calls: int, concurrency: int, keys_only: bool,
                  etcd_pid: int) -> tuple[float, float, float]:
    """(microseconds of this process's and of etcd's CPU per call, calls per second)."""
    client = EtcdClient([url])
    await client.call("/v3/kv/put", {"key": KEY, "value": base64.b64encode(VALUE).decode()})
    body = {"key": KEY, **({"keys_only": True} if keys_only else {})}
    await client.call("/v3/kv/range", body)  # the connection is open before the clock starts
    etcd_cpu = cpu_seconds(etcd_pid) if etcd_pid else 0.0

    async def caller(n: int) -> None:
        for _ in range(n):
            await client.call("/v3/kv/range", body)
    cpu, wall = time.process_time(), time.monotonic()
    await defer.gatherResults([defer.Deferred.fromCoroutine(caller(calls // concurrency))
                               for _ in range(concurrency)])
    done = calls // concurrency * concurrency
    mine, rate = (time.process_time() - cpu) / done * 1e6, done / (time.monotonic() - wall)
    return mine, (cpu_seconds(etcd_pid) - etcd_cpu) / done * 1e6 if etcd_pid else float("nan"), rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--etcd", default="", help="an etcd's client URL (default: a throw-away etcd)")
    args = parser.parse_args()
    etcd = None if args.etcd else start_etcd()
    url = args.etcd or etcd.endpoint  # type: ignore[union-attr]
    results: list = []

    etcd_pid = etcd.process.pid if etcd is not None and etcd.process is not None else 0

    async def run(reactor: object) -> None:
        for _ in range(3):
            for keys_only in (False, True):
                results.append((keys_only, *await measure(url, args.calls, args.concurrency, keys_only, etcd_pid)))
    try:
        task.react(lambda reactor: defer.Deferred.fromCoroutine(run(reactor)))
    except SystemExit:
        pass
    finally:
        if etcd is not None:
            etcd.stop()
    print_table(["run", "range", "this process's CPU per call (µs)", "etcd's CPU per call (µs)", "calls/s"],
                [[i // 2 + 1, "keys only" if keys_only else f"with its {len(VALUE)} B value",
                  f"{mine:.0f}", f"{theirs:.0f}", f"{rate:.0f}"]
                 for i, (keys_only, mine, theirs, rate) in enumerate(results)],
                title=f"etcd range calls through EtcdClient.call ({machine()}; {args.concurrency} at a time)")


if __name__ == "__main__":
    main()
