"""Differential fuzzing: the same generated requests to kapiserver and to kube-apiserver, answers compared.

``python3 bench/differential_fuzz.py --kube-kubeconfig FILE [--kapiserver-kubeconfig FILE] [--cases N]
[--seed S] [--batch B] [--rate R] [--depth] [--examples K] [--json OUT] [--log OUT]``

Upstream kube-apiserver (v1.32.13) is the specification; this sends each
case of ``bench/fuzz.py``'s generator (malformed bodies, nasty field values
from the OpenAPI schemas, selectors, options, patches, protobuf mutants) to
both servers, one after the other, and compares the status codes and the
``reason`` of the answers (and the ``message`` when both answered a
``metav1.Status``).  Each case falls into one class:

* ``same``: the same code (and, for refusals, reason and message);
* ``same code and reason, different message``;
* ``kapiserver 5xx``: kapiserver failed (5xx or no answer) where kube-apiserver did not;
* ``accepted where kube refuses``, ``refused where kube accepts``;
* ``state differs``: one accepted and the other answered that the named object already exists (409
  AlreadyExists, also "object is being deleted") or does not (404 NotFound naming it): the two servers'
  stores differed before the case (an earlier divergence, counted where it happened, or a namespace that
  kube-apiserver without kube-controller-manager never finishes deleting), not the case itself;
* ``both refuse, different code/reason``; ``both accept, different code``.

The cases are those of the resources both servers serve (in a sorted order),
so the same ``--seed`` gives the same cases.  Writes go to the namespace
``fuzz`` (created on both) and to names starting with ``fuzz-``; objects a
previous run left there are deleted first, so both start from the same state,
and the cluster-scoped ``fuzz-*`` objects (webhook configurations, APIServices,
...) are deleted again at the end.  Deleting the namespace itself is skipped
(the two namespace controllers would finish at different times).

After every ``--batch`` cases every stored kind is listed on kapiserver as
JSON, YAML, Table and protobuf (and on kube-apiserver: a format kube-apiserver
does not serve for a kind, protobuf for custom resources, is not a failure),
and a thread asks kapiserver's ``/readyz`` twice a second while the cases run;
the summary gives those latencies (measured, nothing asserted).  Requests are
sequential and at most ``--rate`` a second.  Without ``--kapiserver-kubeconfig``
a throw-away kapiserver process of this checkout is started.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz  # noqa: E402  (bench/fuzz.py: the generator and its HTTPS client)
from fuzz import JSON, NAMESPACE, PROTOBUF, YAML, Case, Connection, Resource  # noqa: E402

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
LIST_FORMATS = {"json": JSON, "yaml": YAML, "table": TABLE, "protobuf": PROTOBUF}

SAME = "same"
MESSAGE = "same code and reason, different message"
KAPI_5XX = "kapiserver 5xx"
ACCEPTED = "accepted where kube refuses"
REFUSED = "refused where kube accepts"
BOTH_REFUSE = "both refuse, different code/reason"
BOTH_ACCEPT = "both accept, different code"
STATE = "state differs (an object one server has and the other has not)"
CLASSES = (SAME, MESSAGE, KAPI_5XX, ACCEPTED, REFUSED, STATE, BOTH_REFUSE, BOTH_ACCEPT)


@dataclass
class Answer:
    status: int
    reason: str = ""
    message: str = ""
    is_status: bool = False  # the body is a metav1.Status
    raw: bytes = b""
    name: str = ""  # the Status's details.name: the object it is about

    def about_existence(self) -> bool:
        """The answer is that the named object exists (409 AlreadyExists) or does not (404 NotFound)."""
        return bool(self.name) and (self.status, self.reason) in ((409, "AlreadyExists"), (404, "NotFound"))

    def short(self) -> str:
        if self.is_status:
            return f"{self.status} {self.reason}: {self.message[:200]}"
        return f"{self.status} {self.raw[:120]!r}"


def parse_answer(status: int, body: bytes) -> Answer:
    """The code, and the reason and message of a Status body in any of the three encodings."""
    obj: Any = None
    if body.startswith(b"k8s\x00"):
        try:
            from kapiserver.machinery import protobuf
            obj = protobuf.decode_object(body).obj
        except (ValueError, LookupError):
            obj = None
    else:
        try:
            obj = json.loads(body)
        except ValueError:
            try:
                obj = yaml.safe_load(body)
            except (yaml.YAMLError, ValueError, TypeError, RecursionError):  # a YAML answer of any content
                obj = None
    if isinstance(obj, dict) and obj.get("kind") == "Status":
        details = obj.get("details") if isinstance(obj.get("details"), dict) else {}
        return Answer(status, str(obj.get("reason") or ""), str(obj.get("message") or ""), True, body[:300],
                      str(details.get("name") or ""))
    return Answer(status, raw=body[:300])


def classify(kapi: Answer, kube: Answer) -> str:
    kapi_ok, kube_ok = 200 <= kapi.status < 300, 200 <= kube.status < 300
    if (kapi.status == 0 or kapi.status >= 500) and not (kube.status == 0 or kube.status >= 500):
        return KAPI_5XX
    if kapi_ok and kube_ok:
        return SAME if kapi.status == kube.status else BOTH_ACCEPT
    if kapi_ok or kube_ok:
        if (kube if kapi_ok else kapi).about_existence():
            return STATE
        return ACCEPTED if kapi_ok else REFUSED
    if (kapi.status, kapi.reason) != (kube.status, kube.reason):
        return BOTH_REFUSE
    if kapi.is_status and kube.is_status and kapi.message != kube.message:
        return MESSAGE
    return SAME


@dataclass
class Outcome:
    case: Case
    kapi: Answer
    kube: Answer
    klass: str

    def group(self) -> str:
        """What a fix would address: the kind of case and the two answers, without the random names."""
        return (f"{self.case.method} {self.case.label} | kapiserver {self.kapi.status} {self.kapi.reason}"
                f" | kube {self.kube.status} {self.kube.reason}")

    def example(self) -> dict:
        body = self.case.body
        return {"method": self.case.method, "path": self.case.path[:200], "content_type": self.case.content_type,
                "accept": self.case.accept, "body": body[:200].decode("utf-8", "replace") if body else None,
                "body_bytes": len(body) if body else 0,
                "kapiserver": self.kapi.short(), "kube": self.kube.short()}


@dataclass
class Summary:
    seed: int
    counts: collections.Counter = field(default_factory=collections.Counter)
    groups: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    examples: dict = field(default_factory=lambda: collections.defaultdict(list))
    list_failures: list = field(default_factory=list)
    list_checks: int = 0
    readyz: list = field(default_factory=list)
    skipped: int = 0
    seconds: float = 0.0

    def add(self, outcome: Outcome, keep: int) -> None:
        self.counts[outcome.klass] += 1
        self.groups[outcome.klass][outcome.group()] += 1
        if len(self.examples[outcome.klass]) < keep and outcome.klass != SAME:
            self.examples[outcome.klass].append(outcome.example())

    def as_dict(self) -> dict:
        return {"seed": self.seed, "counts": dict(self.counts), "seconds": round(self.seconds, 1),
                "groups": {k: v.most_common() for k, v in self.groups.items()},
                "examples": dict(self.examples), "list_checks": self.list_checks,
                "list_failures": self.list_failures, "readyz": self.readyz_stats(), "skipped": self.skipped}

    def readyz_stats(self) -> dict:
        times = sorted(t for _, t in self.readyz)
        if not times:
            return {}
        return {"probes": len(times), "not_200": sum(1 for s, _ in self.readyz if s != 200),
                "median_ms": round(times[len(times) // 2] * 1000, 1),
                "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 1),
                "max_ms": round(times[-1] * 1000, 1), "over_1s": sum(1 for t in times if t > 1.0)}

    def print(self, groups: int) -> None:
        total = sum(self.counts.values())
        print(f"{total} cases in {self.seconds:.0f} s (seed {self.seed}; {self.skipped} skipped)")
        for klass in CLASSES:
            if self.counts[klass]:
                print(f"  {klass}: {self.counts[klass]} ({100 * self.counts[klass] / max(total, 1):.2f} %)")
        for klass in CLASSES[1:]:
            if not self.counts[klass]:
                continue
            print(f"\n== {klass} ({self.counts[klass]})")
            for group, n in self.groups[klass].most_common(groups):
                print(f"  {n:5d}  {group}")
            for ex in self.examples[klass]:
                body = f" body[{ex['body_bytes']} {ex['content_type']}]={ex['body'][:100]!r}" if ex["body"] else ""
                print(f"    e.g. {ex['method']} {ex['path'][:140]} accept={ex['accept']}{body}\n"
                      f"         kapiserver: {ex['kapiserver']}\n         kube:       {ex['kube']}")
        print(f"\nlist checks: {self.list_checks}, failures: {len(self.list_failures)}")
        for failure in self.list_failures[:20]:
            print("  " + failure)
        print(f"/readyz while running: {self.readyz_stats()}")


# ------------------------------------------------------------------ both servers

class Pacer:
    """At most ``rate`` requests a second (the machine is shared)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next = time.monotonic()

    def wait(self) -> None:
        now = time.monotonic()
        if now < self.next:
            time.sleep(self.next - now)
        self.next = max(now, self.next) + self.interval


def common_resources(kapi: Connection, kube: Connection) -> list[Resource]:
    """The resources both serve, with kube-apiserver's schemas, in a fixed order (for the seed)."""
    served = {(r.group_version, r.name) for r in fuzz.discover(kapi)}
    out = [r for r in fuzz.discover(kube) if (r.group_version, r.name) in served and r.name != "tokenreviews"]
    return sorted(out, key=lambda r: (r.group_version, r.name))


def clear(conn: Connection, resources: list[Resource], namespaced: bool) -> None:
    """Delete what earlier runs left: the objects named ``fuzz*`` in the namespace (``namespaced``) or
    cluster-scoped, other than the namespace itself."""
    for res in resources:
        if res.namespaced != namespaced or "list" not in res.verbs or "delete" not in res.verbs:
            continue
        status, data, _ = conn.request("GET", res.collection())
        if status != 200:
            continue
        for item in json.loads(data).get("items") or ():
            name = (item.get("metadata") or {}).get("name", "")
            if name.startswith("fuzz") and not (res.name == "namespaces" and name == NAMESPACE):
                conn.request("DELETE", f"{res.collection()}/{name}?gracePeriodSeconds=0",
                             json.dumps({"kind": "DeleteOptions", "apiVersion": "v1",
                                         "gracePeriodSeconds": 0}).encode())


def prepare(conn: Connection, resources: list[Resource]) -> None:
    """The namespace, no leftovers, the ``fuzz-anchor`` ConfigMap, and the default ServiceAccount (Pods)."""
    for _ in range(60):  # a namespace an earlier run deleted may still be terminating
        status, data, _ = conn.request("GET", f"/api/v1/namespaces/{NAMESPACE}")
        if status != 200 or not json.loads(data).get("metadata", {}).get("deletionTimestamp"):
            break
        time.sleep(1)
    fuzz.prepare(conn)
    clear(conn, resources, namespaced=True)
    clear(conn, resources, namespaced=False)
    fuzz.prepare(conn)
    for _ in range(50):
        status, _, _ = conn.request("GET", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default")
        if status == 200:
            break
        time.sleep(0.2)


def check_lists(kapi: Connection, kube: Connection, resources: list[Resource], summary: Summary,
                pacer: Pacer) -> None:
    """Every stored kind still lists on kapiserver in every format kube-apiserver lists it in."""
    for res in resources:
        if "list" not in res.verbs:
            continue
        for name, accept in LIST_FORMATS.items():
            pacer.wait()
            status, body, _ = kapi.request("GET", res.collection(), accept=accept)
            summary.list_checks += 1
            if status == 200:
                continue
            pacer.wait()
            kube_status, _, _ = kube.request("GET", res.collection(), accept=accept)
            if kube_status == 200 or status >= 500 or status == 0:
                summary.list_failures.append(f"{res.group_version} {res.name} as {name}: kapiserver {status}"
                                             f" {body[:160]!r}, kube {kube_status}")


class ReadyzProbe(threading.Thread):
    """Asks kapiserver's /readyz every ``interval`` seconds until stopped, recording (status, seconds)."""

    def __init__(self, kubeconfig: str, into: list, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.conn = Connection(kubeconfig, timeout=10)
        self.into, self.interval = into, interval
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            status, _, seconds = self.conn.request("GET", "/readyz")
            self.into.append((status, seconds))
        self.conn.close()


def skip(case: Case) -> bool:
    path = case.path.split("?", 1)[0]
    if case.method == "DELETE" and path.rstrip("/").endswith(f"/namespaces/{NAMESPACE}"):
        return True  # see the module docstring
    return case.method == "DELETE" and not path.rsplit("/", 1)[-1].startswith("fuzz")


def run(kapi_kubeconfig: str, kube_kubeconfig: str, count: int, seed: int, batch: int = 200, rate: float = 100,
        depth: bool = False, keep: int = 5, quiet: bool = False, log: Optional[str] = None) -> Summary:
    kapi, kube = Connection(kapi_kubeconfig), Connection(kube_kubeconfig)
    resources = common_resources(kapi, kube)
    for conn in (kapi, kube):
        prepare(conn, resources)
    summary = Summary(seed)
    probe = ReadyzProbe(kapi_kubeconfig, summary.readyz)
    pacer = Pacer(rate)
    started = time.monotonic()
    probe.start()
    log_file = open(log, "w") if log else None
    try:
        for i, case in enumerate(fuzz.cases(resources, count, seed, depth)):
            if skip(case):
                summary.skipped += 1
                continue
            answers = []
            for conn in (kapi, kube):
                pacer.wait()
                status, body, _ = conn.request(case.method, case.path, case.body, case.content_type, case.accept)
                answers.append(parse_answer(status, body))
            outcome = Outcome(case, answers[0], answers[1], classify(answers[0], answers[1]))
            summary.add(outcome, keep)
            if log_file is not None and outcome.klass != SAME:
                log_file.write(json.dumps({"index": i, "class": outcome.klass, "label": case.label,
                                           **outcome.example()}) + "\n")
            if (i + 1) % batch == 0:
                check_lists(kapi, kube, resources, summary, pacer)
                if not quiet:
                    print(f"... {i + 1} cases, {dict(summary.counts)}", file=sys.stderr, flush=True)
        check_lists(kapi, kube, resources, summary, pacer)
    finally:
        probe.stopped.set()
        probe.join()
        if log_file is not None:
            log_file.close()
        summary.seconds = time.monotonic() - started
        for conn in (kapi, kube):
            clear(conn, resources, namespaced=False)  # no stray webhook configuration stays behind
            conn.close()
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kube-kubeconfig", required=True, help="admin kubeconfig of the kube-apiserver")
    parser.add_argument("--kapiserver-kubeconfig", help="admin kubeconfig of a running kapiserver"
                        " (default: start one from this checkout)")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=250, help="list every kind after this many cases")
    parser.add_argument("--rate", type=float, default=100, help="at most this many requests a second")
    parser.add_argument("--depth", action="store_true", help="also the 50,000- and 1,000,000-level bodies")
    parser.add_argument("--examples", type=int, default=5, help="examples kept per class")
    parser.add_argument("--groups", type=int, default=12, help="most frequent groups printed per class")
    parser.add_argument("--json", help="write the whole summary here")
    parser.add_argument("--log", help="write every case that is not the same here, a JSON object a line")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    server = None
    kubeconfig = args.kapiserver_kubeconfig
    if not kubeconfig:
        from kapiserver.testing.process import ServerProcess
        server = ServerProcess(extra_config={"log_level": "warn"}).start()
        kubeconfig = server.kubeconfig
    try:
        summary = run(kubeconfig, args.kube_kubeconfig, args.cases, args.seed, args.batch, args.rate, args.depth,
                      args.examples, args.quiet, args.log)
    finally:
        if server is not None:
            server.stop()
    summary.print(args.groups)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary.as_dict(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
