"""Throughput of the embedded SQLite storage backend.

``python3 bench/storage_sqlite.py [--read-threads N ...]`` prints creates/s
(one at a time and 100 in flight), gets/s (same two ways), the time to list
1,000 keys, and watch fan-out latency, for each reader-thread setting given
(0 = reads share the writer thread and its connection).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from twisted.internet import defer, reactor  # noqa: E402

from kapiserver.storage.sqlite import SQLiteStorage  # noqa: E402

VALUE = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"},"data":{"k":"' + b"v" * 400 + b'"}}'


async def timed(label: str, n: int, make) -> None:
    t0 = time.perf_counter()
    await make()
    dt = time.perf_counter() - t0
    print(f"  {label:<34} {n / dt:10.0f} ops/s  ({dt * 1000:.0f} ms for {n})")


async def run(read_threads: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStorage(os.path.join(tmp, "bench.db"), read_threads=read_threads)
        await store.start()
        print(f"read_threads={read_threads}")

        async def sequential_creates():
            for i in range(n):
                await store.create(f"/seq/{i:06d}", VALUE)

        async def concurrent(fn, total: int, width: int = 100):
            for start in range(0, total, width):
                await defer.gatherResults([fn(i) for i in range(start, min(start + width, total))])

        async def sequential_gets():
            for i in range(n):
                await store.get(f"/seq/{i:06d}")

        await timed("create, one at a time", n, sequential_creates)
        await timed("create, 100 in flight", n, lambda: concurrent(
            lambda i: store.create(f"/par/{i:06d}", VALUE), n))
        await timed("get, one at a time", n, sequential_gets)
        await timed("get, 100 in flight", n, lambda: concurrent(lambda i: store.get(f"/seq/{i:06d}"), n))
        t0 = time.perf_counter()
        for _ in range(10):
            page = await store.list("/seq/", limit=1000)
        assert len(page.items) == 1000
        print(f"  list of 1,000 keys (latest)        {(time.perf_counter() - t0) * 100:10.1f} ms")
        rev = (await store.current_revision()) - 1000
        t0 = time.perf_counter()
        for _ in range(10):
            await store.list("/par/", revision=rev, limit=1000)
        print(f"  list of 1,000 keys (past revision) {(time.perf_counter() - t0) * 100:10.1f} ms")
        arrived: list[float] = []
        w = store.watch("/seq/", await store.current_revision(), lambda e: arrived.append(time.perf_counter()),
                        lambda e: None)
        lat = []
        for i in range(200):
            arrived.clear()
            t0 = time.perf_counter()
            kv = await store.get(f"/seq/{i:06d}")
            await store.update(kv.key, VALUE, kv.mod_revision)
            lat.append(arrived[0] - t0)
        w.cancel()
        lat.sort()
        print(f"  write->watch event, median         {lat[len(lat) // 2] * 1000:10.2f} ms")
        await store.stop()


async def main(args) -> None:
    try:
        for threads in args.read_threads:
            await run(threads, args.n)
    finally:
        reactor.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read-threads", type=int, nargs="+", default=[0, 1, 2, 4])
    parser.add_argument("-n", type=int, default=5000)
    reactor.callWhenRunning(lambda: defer.Deferred.fromCoroutine(main(parser.parse_args())))
    reactor.run()
