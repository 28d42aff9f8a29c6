"""Startup time and idle memory of a kapiserver process.

``python3 bench/startup.py [--runs 5] [--objects 10000] [--backend sqlite|etcd|both] [--workers 1]``

Startup time is measured from just before the process is spawned to the
``READY=1`` it sends on NOTIFY_SOCKET (sent only once ``/readyz`` passes).
Idle RSS is VmRSS one second after READY (with ``--workers N``, the sum over
the supervisor and its workers).  Rows:

* empty store, first start: a fresh working directory each run (new CA and
  certificates, new SQLite file);
* empty store, restart: the same directory again (certificates exist);
* N ConfigMaps stored: the store filled once over concurrent HTTPS, then the
  server restarted on it; "RSS after list" is after one full list of them
  (which fills the watch cache for ConfigMaps).

The first row is the floor: ``twistd -n web`` serving a directory over TLS
with a serving certificate kapiserver made, timed to its "starting on" line.
It is what the interpreter, twistd, Twisted's web server and pyOpenSSL cost
before an API server does anything, so a start or an idle RSS can be read as
the floor plus what kapiserver adds.  "File-backed" is the part of the RSS that
is mapped files (RssFile: libpython, OpenSSL, cryptography's Rust library).

``--cpu RUNS`` instead counts the CPU time a restart spends before it is up,
which wall time on a shared machine does not show: the user + system time
(``/proc/<pid>/stat``, in clock ticks of 10 ms) and the on-CPU time of its
living threads (``/proc/<pid>/task/*/schedstat``, in ns) each restarted
server process had used when its READY=1 came, and the floor's at its
"starting on" line; RUNS restarts of each ``--checkout DIR`` (repeatable;
default this one), the checkouts taking turns, so that a change can be
compared with the code before it (a ``git worktree`` of it); with two, the
median of their round-by-round differences too.

``--profile`` instead prints where the time of one start goes: the slowest
imports (``python -X importtime``) and a cProfile of the process up to READY.
``--memory`` prints where an idle process's memory goes: a ``tracemalloc``
snapshot (one frame) taken one second after READY on a restart, by what
allocated it: module loading (code objects), kapiserver's packages, the rest
by package.
"""
from __future__ import annotations

import argparse
import compileall
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, ServerProcess, cpu_seconds, create_many, ensure_namespace, machine, median,  # noqa: E402
                     print_table, server_config, start_etcd, tree_rss_mb)

from kapiserver.testing.process import REPO_ROOT, child_env, twistd_command  # noqa: E402

TARGET_SECONDS = 0.3  # issue 14: start to /readyz on the embedded store
TARGET_RSS_MB = 60.0  # issue 14: idle RSS of one process


class TwistdWebFloor:
    """``twistd -n web`` over TLS with kapiserver's serving certificate from ``certs``:
    started, it is up once it logs that its site is listening."""

    def __init__(self, certs: str, workdir: str) -> None:
        self.certs = certs
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None

    def start(self) -> "TwistdWebFloor":
        key, crt = (os.path.join(self.certs, name) for name in ("apiserver.key", "apiserver.crt"))
        listen = f"ssl:0:interface=127.0.0.1:privateKey={key}:certKey={crt}"
        self.proc = subprocess.Popen(twistd_command(None, "--listen", listen, "--path", self.workdir, plugin="web"),
                                     cwd=self.workdir, env=child_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if b"starting on" in line:
                return self
        raise RuntimeError(f"twistd web exited with {self.proc.wait()} before listening")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.communicate(timeout=10)


def timed_start(server: ServerProcess | TwistdWebFloor) -> tuple[float, float, float]:
    """Start ``server``; return (seconds until it serves, idle RSS MiB, of it file-backed MiB)."""
    t0 = time.perf_counter()
    server.start()
    elapsed = time.perf_counter() - t0
    time.sleep(1.0)
    assert server.proc is not None
    return elapsed, tree_rss_mb(server.proc.pid), tree_rss_mb(server.proc.pid, "RssFile")


def measure(label: str, make, runs: int, after=None) -> list:
    """``make(run)`` returns an unstarted server; ``after(server)`` optionally returns an extra RSS."""
    times, rss, file_rss, extra = [], [], [], []
    for run in range(runs):
        server = make(run)
        try:
            t, r, f = timed_start(server)
            times.append(t)
            rss.append(r)
            file_rss.append(f)
            if after is not None:
                extra.append(after(server))
        finally:
            server.stop()
    row = [label, median(times), min(times), max(times), median(rss), median(file_rss)]
    row.append(median(extra) if extra else "")
    print(f"  {label}: {', '.join(f'{t:.2f}s' for t in times)}", file=sys.stderr)
    return row


def list_rss(namespace: str):
    def after(server: ServerProcess) -> float:
        Client(server).json("GET", f"/api/v1/namespaces/{namespace}/configmaps")
        time.sleep(0.5)
        return tree_rss_mb(server.proc.pid)
    return after


def backend_rows(backend: str, runs: int, objects: int, workers: int = 1) -> list[list]:
    rows = []
    etcd = start_etcd() if backend == "etcd" else None
    tmp = tempfile.mkdtemp(prefix="kapi-bench-startup-")
    try:
        def fresh(run: int) -> ServerProcess:
            return ServerProcess(extra_config=server_config(backend, etcd, workers=workers),
                                 workdir=tempfile.mkdtemp(dir=tmp))
        rows.append(measure(f"{backend}, empty, first start", fresh, runs))
        reuse_dir = tempfile.mkdtemp(dir=tmp)
        config = server_config(backend, etcd, workers=workers)
        ServerProcess(extra_config=config, workdir=reuse_dir).start().stop()
        rows.append(measure(f"{backend}, empty, restart", lambda run: ServerProcess(config, workdir=reuse_dir), runs))
        if objects:
            filler = ServerProcess(extra_config=config, workdir=reuse_dir).start()
            try:
                ensure_namespace(Client(filler), "startup")
                result = create_many(filler, "startup", objects, concurrency=32)
                print(f"  stored {objects} ConfigMaps in {result.seconds:.1f}s ({result.errors} errors)",
                      file=sys.stderr)
            finally:
                filler.stop()
            rows.append(measure(f"{backend}, {objects:,} ConfigMaps, restart",
                                lambda run: ServerProcess(config, workdir=reuse_dir), runs,
                                after=list_rss("startup")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if etcd is not None:
            etcd.cleanup()
    return rows


def floor_row(runs: int) -> list:
    tmp = tempfile.mkdtemp(prefix="kapi-bench-floor-")
    try:
        certs_from = ServerProcess(server_config("sqlite"), workdir=tempfile.mkdtemp(dir=tmp))
        certs_from.start().stop()  # its certificates, made as for any start
        certs = os.path.join(certs_from.workdir, "certs")
        return measure("floor: twistd web on TLS, no API server",
                       lambda run: TwistdWebFloor(certs, tempfile.mkdtemp(dir=tmp)), runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def on_cpu_seconds(pid: int) -> float:
    """The time the living threads of ``pid`` ran on a CPU (schedstat: ns, not ticks)."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


def from_checkout(checkout: str) -> tuple[str, ...]:
    """A command prefix that runs the server from ``checkout`` (``env`` execs it in the same process)."""
    return ("env", f"PYTHONPATH={checkout}")


def cpu_at_ready(checkouts: list[str], runs: int) -> None:
    """CPU used by READY=1 (the floor: by its "starting on"), restarts of ``checkouts`` taking turns."""
    floor = "floor: twistd web on TLS"
    used: dict[str, list[tuple[float, float]]] = {name: [] for name in (*checkouts, floor)}
    tmp = tempfile.mkdtemp(prefix="kapi-bench-cpu-")
    try:
        workdirs = {}
        for checkout in checkouts:
            compile_checkout(checkout)
            workdirs[checkout] = tempfile.mkdtemp(dir=tmp)
            ServerProcess(server_config("sqlite"), workdir=workdirs[checkout],
                          command_prefix=from_checkout(checkout)).start().stop()  # first start: certificates
        certs = os.path.join(workdirs[checkouts[0]], "certs")
        for run in range(runs):
            for checkout in checkouts:
                server = ServerProcess(server_config("sqlite"), workdir=workdirs[checkout],
                                       command_prefix=from_checkout(checkout))
                try:
                    server.start(on_ready=lambda proc, into=used[checkout]: into.append(
                        (cpu_seconds(proc.pid), on_cpu_seconds(proc.pid))))
                finally:
                    server.stop()
            web = TwistdWebFloor(certs, tempfile.mkdtemp(dir=tmp)).start()
            assert web.proc is not None
            used[floor].append((cpu_seconds(web.proc.pid), on_cpu_seconds(web.proc.pid)))
            web.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = []
    for name, samples in used.items():
        ticks, on_cpu = [s[0] for s in samples], [s[1] for s in samples]
        print(f"  {name}: user+system {', '.join(f'{t:.2f}' for t in ticks)}; "
              f"on-CPU {', '.join(f'{t:.3f}' for t in on_cpu)}", file=sys.stderr)
        rows.append([name, median(ticks), min(ticks), round(1000 * median(on_cpu)), round(1000 * min(on_cpu))])
    print_table(["process", "user+system s median", "min", "on-CPU ms median", "min"], rows,
                title=f"CPU used by READY=1, restarts, {runs} of each ({machine()})")
    if len(checkouts) == 2:  # each round's two restarts ran back to back: their difference drifts less with the load
        first, second = ([s[1] for s in used[c]] for c in checkouts)
        change = sorted(1000 * (b - a) for a, b in zip(first, second))
        print(f"on-CPU of {checkouts[1]} minus {checkouts[0]}, round by round: median {median(change):+.0f} ms "
              f"(middle half {change[len(change) // 4]:+.0f} to {change[(3 * len(change)) // 4]:+.0f} ms)")


def profile() -> None:
    """Where one start's time goes: slowest imports (-X importtime), then cProfile to READY."""
    from kapiserver.testing import process
    tmp = tempfile.mkdtemp(prefix="kapi-bench-profile-")
    try:
        os.environ["PYTHONPROFILEIMPORTTIME"] = "1"  # inherited by the child (child_env copies os.environ)
        try:
            server = ServerProcess(server_config("sqlite"), workdir=os.path.join(tmp, "imports"))
            os.makedirs(server.workdir)
            t, _, _ = timed_start(server)
            server.stop()
        finally:
            del os.environ["PYTHONPROFILEIMPORTTIME"]
        imports = []
        for line in open(server.log_path, errors="replace"):
            parts = line.removeprefix("import time:").split("|")
            if line.startswith("import time:") and len(parts) == 3 and parts[1].strip().isdigit():
                imports.append((int(parts[1]), int(parts[0]), parts[2].rstrip()))
        print(f"start to READY=1 with -X importtime: {t:.2f}s; all imports: "
              f"{sum(own for _, own, _ in imports) / 1e6:.2f}s of own time")
        print("\nSlowest imports (cumulative ms, own ms):")
        for cumulative, own, name in sorted(imports, reverse=True)[:25]:
            print(f"  {cumulative / 1000:8.1f} {own / 1000:8.1f}  {name}")

        script = os.path.join(tmp, "twistd_main.py")
        with open(script, "w") as f:
            f.write("import sys\nsys.argv[0] = 'twistd'\nfrom twisted.scripts.twistd import run\nrun()\n")
        stats = os.path.join(tmp, "start.prof")
        original = process.twistd_command
        process.twistd_command = lambda config, *extra: [
            sys.executable, "-m", "cProfile", "-o", stats, script, "-n", "--pidfile=", "kapiserver",
            "--config", config, *extra]
        try:
            server = ServerProcess(server_config("sqlite"), workdir=os.path.join(tmp, "cprofile"))
            os.makedirs(server.workdir)
            t, _, _ = timed_start(server)
            server.stop()
        finally:
            process.twistd_command = original
        print(f"\nstart to READY=1 under cProfile: {t:.2f}s (profiling slows it); "
              "top functions by cumulative time over start, 1 s idle and SIGTERM:")
        pstats.Stats(stats).sort_stats("cumulative").print_stats(30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_TRACED_TWISTD = """\
import signal, sys, tracemalloc
tracemalloc.start(1)
dump = sys.argv.pop(1)
sys.argv[0] = "twistd"
from twisted.internet import reactor

def snapshot():
    import gc
    gc.collect()
    tracemalloc.take_snapshot().dump(dump)

signal.signal(signal.SIGUSR1, lambda *_: reactor.callFromThread(snapshot))
from twisted.scripts.twistd import run
run()
"""


_PACKAGE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kapiserver", "")


def _allocated_by(filename: str) -> str:
    """What a traced allocation is put down to: module loading, a kapiserver package, or a package."""
    if filename.startswith("<frozen importlib"):
        return "module loading (code objects and their constants)"
    if filename.startswith(_PACKAGE_DIR):
        return "kapiserver." + filename[len(_PACKAGE_DIR):].split("/")[0].removesuffix(".py")
    if "/site-packages/" in filename:
        return filename.split("/site-packages/", 1)[1].split("/")[0].removesuffix(".py")
    return "standard library and interpreter"


def memory(top: int = 20) -> None:
    """Where an idle process's traced memory is, one second after READY on a restart."""
    import collections
    import tracemalloc
    from kapiserver.testing import process
    tmp = tempfile.mkdtemp(prefix="kapi-bench-memory-")
    try:
        script, dump = os.path.join(tmp, "traced_twistd.py"), os.path.join(tmp, "idle.snapshot")
        with open(script, "w") as f:
            f.write(_TRACED_TWISTD)
        workdir = os.path.join(tmp, "server")
        os.makedirs(workdir)
        ServerProcess(server_config("sqlite"), workdir=workdir).start().stop()  # first start: certificates
        original = process.twistd_command
        process.twistd_command = lambda config, *extra: [
            sys.executable, script, dump, "-n", "--pidfile=", "kapiserver", "--config", config, *extra]
        try:
            server = ServerProcess(server_config("sqlite"), workdir=workdir)
            _, rss, _ = timed_start(server)
            assert server.proc is not None
            server.proc.send_signal(signal.SIGUSR1)
            for _ in range(100):
                if os.path.exists(dump):
                    break
                time.sleep(0.1)
            server.stop()
        finally:
            process.twistd_command = original
        by: collections.Counter = collections.Counter()
        for stat in tracemalloc.Snapshot.load(dump).statistics("filename"):
            by[_allocated_by(stat.traceback[0].filename)] += stat.size
        total = sum(by.values())
        print(f"idle RSS {rss:.1f} MiB (traced by tracemalloc, which inflates it); traced {total / 2**20:.1f} MiB")
        rows = [[name, round(size / 2**20, 2), f"{100 * size / total:.0f} %"] for name, size in by.most_common(top)]
        print_table(["allocated by", "MiB", "share"], rows, title="Traced memory of an idle process (restart)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def compile_checkout(root: str = REPO_ROOT) -> None:
    """Write the checkout's bytecode before any start is timed.  An installed server imports
    ``.pyc`` files; without them (a fresh checkout, PYTHONDONTWRITEBYTECODE set, as in some
    shells) every start compiles kapiserver from source: 0.3 s more and 9 MiB more idle RSS."""
    for package in ("kapiserver", "twisted"):
        compileall.compile_dir(os.path.join(root, package), quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--backend", choices=("sqlite", "etcd", "both"), default="both")
    parser.add_argument("--profile", action="store_true", help="profile one start instead")
    parser.add_argument("--memory", action="store_true", help="where an idle process's memory is, instead")
    parser.add_argument("--workers", type=int, default=1,
                        help="server processes (0 = one per CPU); RSS is then the sum over all of them")
    parser.add_argument("--cpu", type=int, metavar="RUNS",
                        help="instead, the CPU time restarts had used by READY=1, RUNS of each checkout")
    parser.add_argument("--checkout", action="append",
                        help="with --cpu: a checkout to restart (repeat to compare; default this one)")
    args = parser.parse_args()
    if args.cpu:
        cpu_at_ready([os.path.abspath(c) for c in args.checkout or [REPO_ROOT]], args.cpu)
        return
    compile_checkout()
    if args.profile:
        profile()
        return
    if args.memory:
        memory()
        return
    rows = [floor_row(args.runs)]
    for backend in (("sqlite", "etcd") if args.backend == "both" else (args.backend,)):
        rows += backend_rows(backend, args.runs, args.objects, args.workers)
    print_table(["case", "median s", "min s", "max s", "idle RSS MiB", "of it file-backed MiB",
                 "RSS after list MiB"], rows,
                title=f"Startup to READY=1, median of {args.runs} ({machine()}); "
                      f"targets: <= {TARGET_SECONDS:g} s, <= {TARGET_RSS_MB:.0f} MB")


if __name__ == "__main__":
    main()
