"""Writes keys into a SQLiteStorage forever, printing each acknowledged write.

Run by test_sqlite_durability, which kills it with SIGKILL mid-stream:
``python durability_writer.py <db path>``.  Each stdout line is
``<key> <revision>``, printed (and flushed) only after the write's Deferred
fired, i.e. after the store acknowledged it.
"""
from __future__ import annotations

import json
import sys

from twisted.internet import defer, reactor

from kapiserver.storage.sqlite import SQLiteStorage

WRITERS = 8  # concurrent writers, so acknowledgements come from group commits


async def writer(store: SQLiteStorage, n: int) -> None:
    i = 0
    while True:
        key = f"/d/{n}/{i:06d}"
        value = json.dumps({"writer": n, "i": i, "pad": "x" * (100 + i % 400)}).encode()
        kv = await store.create(key, value)
        sys.stdout.write(f"{key} {kv.mod_revision}\n")
        sys.stdout.flush()
        i += 1


async def main(path: str) -> None:
    store = SQLiteStorage(path)
    await store.start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    await defer.gatherResults([defer.Deferred.fromCoroutine(writer(store, n)) for n in range(WRITERS)])


if __name__ == "__main__":
    reactor.callWhenRunning(lambda: defer.Deferred.fromCoroutine(main(sys.argv[1])))
    reactor.run()
