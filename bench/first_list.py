"""The first ``resourceVersion=0`` LIST of all pods after a restart, in protobuf and JSON, of this
checkout and (``--against``) another, taking turns on one store (issue 34).

``python bench/first_list.py [--pods 20000] [--rounds 3] [--against DIR] [--workdir DIR]``

Loads ``--pods`` of bench/scale.py's realistic pods into a kapiserver store (two workers, no
controllers, as scale.py runs it; ``--workdir`` keeps or reuses it), then for each round starts a
server of each checkout on that store in turn (``--against``: another checkout's root, e.g. a
``git archive`` of the commit before) and reads, after ``/readyz``, one ``resourceVersion=0`` list
of all pods in protobuf, then one in JSON (the first encode of every item of each: nothing is
memoized after a start): wall seconds, and the CPU seconds of all the server's processes during
each list. Taking turns spreads a busy machine's load over both checkouts alike.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import tree_cpu_seconds  # noqa: E402

import scale  # noqa: E402

CONFIG = {"log_level": "warn", "workers": 2, "controllers": {"enabled": False},
          "limits": {"max_requests_inflight": 2000, "max_mutating_requests_inflight": 1000}}
PODS = "/api/v1/pods?resourceVersion=0"


def serve(workdir: str, load_pods: int) -> None:
    """Start this checkout's server on ``workdir``; load pods, or time the two first lists."""
    from kapiserver.testing.process import ServerProcess
    server = ServerProcess(extra_config=CONFIG, workdir=workdir).start()
    try:
        scale.wait_ready(server.kubeconfig)
        if load_pods:
            scale.load(server.kubeconfig, 0, load_pods, 4)
            return
        assert server.proc is not None
        conn = scale.Connection(scale.Endpoint.from_kubeconfig(server.kubeconfig))
        figures = []
        for accept in (scale.PROTOBUF, "application/json"):
            cpu = tree_cpu_seconds(server.proc.pid)
            seconds, size = scale.timed_list(conn, PODS, accept)
            figures.append(f"{seconds:.3f} s wall, {tree_cpu_seconds(server.proc.pid) - cpu:.2f} s CPU, "
                           f"{size} B")
        conn.close()
        print(f"  protobuf {figures[0]}; JSON {figures[1]}; load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        server.stop()


def run(root: str, workdir: str, load_pods: int = 0) -> None:
    script = os.path.join(root, "bench", os.path.basename(__file__))
    env = {**os.environ, "PYTHONPATH": root}
    subprocess.run([sys.executable, script, "--serve", workdir, "--load", str(load_pods)], env=env, cwd=root,
                   check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", help="another checkout's root (its bench/first_list.py is this file's copy)")
    parser.add_argument("--workdir", help="the store's directory (made and loaded when it does not exist)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--load", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.load)
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    workdir = args.workdir or os.path.join(tempfile.mkdtemp(prefix="first-list-"), "server")
    if not os.path.exists(workdir):
        os.makedirs(workdir)
        run(here, workdir, args.pods)
    roots = [here] + ([os.path.abspath(args.against)] if args.against else [])
    for round_ in range(args.rounds):
        for root in roots:
            print(f"round {round_ + 1}, {root}:", flush=True)
            run(root, workdir)


if __name__ == "__main__":
    main()
