#!/usr/bin/env python3
"""What one SQLite commit costs on the disk a data directory lives on.

``python3 bench/commit_cost.py [--dir DIR] [--commits 2000] [--rows 1]``

Commits ``--commits`` transactions of ``--rows`` creates each (a ConfigMap's
size, into kapiserver's own tables: ``storage/sqlite.py``'s schema) to a new
database in ``--dir`` (default: a temporary directory under ``var/``, the
disk the default data directory is on), with ``synchronous = FULL``, as
kapiserver commits (every commit fsyncs the write-ahead log, so an
acknowledged write survives power loss), and with ``NORMAL`` (no fsync at
commit: survives a killed process, not power loss), and prints the wall time
and this process's CPU per commit.  The difference is what durability costs
each commit; on tmpfs it is nothing.
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import REPO, machine, print_table  # noqa: E402

sys.path.insert(0, REPO)

from kapiserver.storage.sqlite import SCHEMA  # noqa: E402

VALUE = b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"},"data":{"k":"' + b"v" * 500 + b'"}}'


def commit_cost(path: str, synchronous: str, commits: int, rows: int, first_rev: int) -> tuple[float, float]:
    """(wall µs, CPU µs) per commit of ``rows`` creates, on the database at ``path``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA journal_size_limit = 8388608")
    conn.executescript(SCHEMA)
    rev = first_rev
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(commits):
        conn.execute("BEGIN IMMEDIATE")
        for _ in range(rows):
            rev += 1
            key = b"/registry/configmaps/bench/cm-%d" % rev
            conn.execute("INSERT INTO kv VALUES (?, ?, ?, ?, 0, 0, 0)", (rev, key, VALUE, rev))
            conn.execute("INSERT INTO latest VALUES (?, ?, 0)", (key, rev))
        conn.execute("UPDATE meta SET value = ? WHERE name = 'revision'", (rev,))
        conn.execute("COMMIT")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    conn.close()
    return wall / commits * 1e6, cpu / commits * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="", help="where the database goes (default: a temporary directory in var/)")
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=1, help="creates per commit (group commit holds several)")
    args = parser.parse_args()
    base = args.dir or os.path.join(REPO, "var")
    os.makedirs(base, exist_ok=True)
    print(f"# {machine()}; {args.commits} commits of {args.rows} create(s) each, in {base}")
    rows = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        path = os.path.join(tmp, "commit.db")
        commit_cost(path, "FULL", 200, args.rows, 0)  # warm-up: the file and its WAL exist
        for rounds, synchronous in enumerate(("FULL", "NORMAL", "FULL", "NORMAL")):
            wall, cpu = commit_cost(path, synchronous, args.commits, args.rows, (rounds + 1) * 10 ** 7)
            rows.append([synchronous, f"{wall:,.0f}", f"{cpu:,.0f}", f"{1e6 / wall:,.0f}"])
    print_table(["synchronous", "wall µs per commit", "CPU µs per commit", "commits/s, one writer"], rows)


if __name__ == "__main__":
    main()
