"""Watch fan-out through the watch cache, and list_cached of a big prefix.

``python3 bench/watch_fanout.py [--watchers 500] [--rate 100] [--seconds 10]``
runs N watchers on one prefix of ``CachedStorage(SQLiteStorage)`` while
creates arrive at a fixed rate, and prints p50/p99/max of the delay from the
start of each write to its delivery in each watcher (the same run directly on
the SQLite backend's own watches for comparison), then times ``list_cached``
and the consistent ``list`` of 10,000 keys against the backend's list.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from twisted.internet import defer, reactor, task  # noqa: E402

from kapiserver.storage.cacher import CachedStorage  # noqa: E402
from kapiserver.storage.sqlite import SQLiteStorage  # noqa: E402

VALUE = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"},"data":{"k":"' + b"v" * 400 + b'"}}'


def pct(samples: list[float], p: float) -> float:
    return samples[min(len(samples) - 1, int(len(samples) * p))] * 1000


async def fanout(label: str, store, watchers: int, rate: float, seconds: float) -> None:
    started: dict[str, float] = {}
    delays: list[float] = []
    counts = [0] * watchers
    start = (await store.list("/configmaps/")).revision

    def handler(i: int):
        def on_event(event) -> None:
            delays.append(time.perf_counter() - started[event.kv.key])
            counts[i] += 1
        return on_event

    handles = [store.watch("/configmaps/", start, handler(i), lambda err: print("watch error:", err))
               for i in range(watchers)]
    await task.deferLater(reactor, 0.2, lambda: None)
    n = int(rate * seconds)
    writes: list[defer.Deferred] = []
    seq = iter(range(n))

    def write() -> None:
        i = next(seq, None)
        if i is None:
            loop.stop()
            return
        key = f"/configmaps/bench/k{i:06d}"
        started[key] = time.perf_counter()
        writes.append(store.create(key, VALUE))
    loop = task.LoopingCall(write)
    loop.clock = reactor
    t0 = time.perf_counter()
    await loop.start(1.0 / rate)
    await defer.gatherResults(writes, consumeErrors=True)
    deadline = time.monotonic() + 30
    while sum(counts) < n * watchers and time.monotonic() < deadline:
        await task.deferLater(reactor, 0.05, lambda: None)
    elapsed = time.perf_counter() - t0
    for h in handles:
        h.cancel()
    delays.sort()
    print(f"  {label:<28} {watchers:>8} {n / elapsed:>8.0f} {sum(counts):>10} "
          f"{pct(delays, 0.5):>8.1f} {pct(delays, 0.99):>8.1f} {delays[-1] * 1000:>8.1f}")


async def big_list(tmp: str, keys: int) -> None:
    backend = SQLiteStorage(os.path.join(tmp, "list.db"))
    store = CachedStorage(backend)
    await store.start()
    for base in range(0, keys, 500):
        await defer.gatherResults([store.create(f"/configmaps/ns{i % 10}/k{i:06d}", VALUE)
                                   for i in range(base, min(base + 500, keys))], consumeErrors=True)
    t0 = time.perf_counter()
    await store.list_cached("/configmaps/")
    build = time.perf_counter() - t0

    async def timed(fn, rounds: int = 10) -> float:
        t0 = time.perf_counter()
        for _ in range(rounds):
            page = await fn()
        assert page.count >= keys // 10, page.count
        return (time.perf_counter() - t0) / rounds * 1000
    print(f"\n  {keys:,} keys (values {len(VALUE)} B)                  ms per call")
    print(f"  first use: build the cache (paged backend list)     {build * 1000:8.1f}")
    print(f"  list_cached, all keys                               {await timed(lambda: store.list_cached('/configmaps/')):8.2f}")
    print(f"  list_cached, one namespace (1/10)                   {await timed(lambda: store.list_cached('/configmaps/ns3/')):8.2f}")
    print(f"  list_cached, limit=500                              {await timed(lambda: store.list_cached('/configmaps/', limit=500)):8.2f}")
    print(f"  list (consistent, from the cache), all keys         {await timed(lambda: store.list('/configmaps/')):8.2f}")
    print(f"  backend list (SQLite), all keys                     {await timed(lambda: backend.list('/configmaps/')):8.2f}")
    await store.stop()


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        print(f"  {'watch fan-out':<28} {'watchers':>8} {'writes/s':>8} {'delivered':>10} "
              f"{'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        cached = CachedStorage(SQLiteStorage(os.path.join(tmp, "cached.db")))
        await cached.start()
        await fanout("CachedStorage(SQLite)", cached, args.watchers, args.rate, args.seconds)
        await cached.stop()
        if not args.skip_direct:
            direct = SQLiteStorage(os.path.join(tmp, "direct.db"))
            await direct.start()
            await fanout("SQLiteStorage (no cache)", direct, args.watchers, args.rate, args.seconds)
            await direct.stop()
        await big_list(tmp, args.keys)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--watchers", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--skip-direct", action="store_true", help="skip the run without the cache")
    task.react(lambda _: defer.Deferred.fromCoroutine(main(parser.parse_args())))
