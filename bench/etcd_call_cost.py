"""What one call to etcd's JSON gateway costs kapiserver's process: CPU per call.

``python3 bench/etcd_call_cost.py [--calls 4000] [--concurrency 4] [--etcd URL]``

Runs ``--calls`` range requests of one key through ``EtcdClient.call`` (its unary
HTTP/1.1 client, JSON) from ``--concurrency`` coroutines against a
throw-away etcd (or ``--etcd``), and prints this process's CPU per call (user
and system, from ``time.process_time``) and the calls per second.  Every
storage operation on etcd (a GET, a create's txn, an update's txn) pays this
once, on top of what the API server does with the answer.
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

from _common import machine, print_table, start_etcd  # noqa: E402
from kapiserver.storage.etcd.client import EtcdClient  # noqa: E402


async def measure(url: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(microseconds of this process's CPU per call, calls per second)."""
    client = EtcdClient([url])
    body = {"key": base64.b64encode(b"/bench/etcd-call-cost").decode()}
    await client.call("/v3/kv/range", body)  # the connection is open before the clock starts

    async def caller(n: int) -> None:
        for _ in range(n):
            await client.call("/v3/kv/range", body)
    cpu, wall = time.process_time(), time.monotonic()
    await defer.gatherResults([defer.Deferred.fromCoroutine(caller(calls // concurrency))
                               for _ in range(concurrency)])
    done = calls // concurrency * concurrency
    return (time.process_time() - cpu) / done * 1e6, done / (time.monotonic() - wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--etcd", default="", help="an etcd's client URL (default: a throw-away etcd)")
    args = parser.parse_args()
    etcd = None if args.etcd else start_etcd()
    url = args.etcd or etcd.endpoint  # type: ignore[union-attr]
    results: list = []

    async def run(reactor: object) -> None:
        for _ in range(3):
            results.append(await measure(url, args.calls, args.concurrency))
    try:
        task.react(lambda reactor: defer.Deferred.fromCoroutine(run(reactor)))
    except SystemExit:
        pass
    finally:
        if etcd is not None:
            etcd.stop()
    print_table(["run", "CPU per call (us)", "calls/s"],
                [[i + 1, f"{cpu:.0f}", f"{rate:.0f}"] for i, (cpu, rate) in enumerate(results)],
                title=f"etcd range calls through EtcdClient.call ({machine()}; {args.concurrency} at a time)")


if __name__ == "__main__":
    main()
