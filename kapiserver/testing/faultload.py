"""Steady writes and many watches against running servers, for fault tests (tests/e2e/test_faults.py).

Writers create and update ConfigMaps through the servers and record every
attempt: acknowledged (with its resourceVersion) or not (a 5xx, a broken
connection: such a write may or may not have happened).  Watchers each hold
one raw HTTP/1.1 watch (no client library: 200 of them must stay cheap), and
on any disconnect resume from the last resourceVersion they saw, through the
other server when theirs does not answer; a 410 Gone makes them relist.
Every 5xx any of them gets is recorded with when its request began, so the
test can tell those inside a fault's window from those outside.

Threads, not the test's reactor: the servers are other processes and every
client here blocks on a socket.  Everything stops by itself: writers after a
fixed number of writes at most, watchers when told (their sockets are shut).
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Iterator, Optional

# a guard against a hang, longer than the server's own request timeout (60 s): its answer comes first
REQUEST_TIMEOUT = 90.0
# a watch that brings nothing (no event, no bookmark) for this long is dropped and resumed
WATCH_IDLE_TIMEOUT = 30.0


@dataclass
class Target:
    """Where one server listens (a restarted server gets another port: change ``port``)."""

    label: str
    host: str
    port: int
    context: ssl.SSLContext

    def connect(self, timeout: float = REQUEST_TIMEOUT) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=timeout)


def admin_context(cert_dir: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=os.path.join(cert_dir, "ca.crt"))
    ctx.load_cert_chain(os.path.join(cert_dir, "admin.crt"), os.path.join(cert_dir, "admin.key"))
    return ctx


def target_for(label: str, server_url: str, context: ssl.SSLContext) -> Target:
    host, port = server_url.removeprefix("https://").rsplit(":", 1)
    return Target(label, host, int(port), context)


def request(target: Target, method: str, path: str, body: Optional[dict] = None) -> tuple[int, dict]:
    conn = target.connect()
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"{}")
    finally:
        conn.close()


@dataclass
class Window:
    label: str
    start: float
    end: float = float("inf")


@dataclass
class ServerError:
    at: float  # when the request began
    ended: float  # when its answer came
    status: int
    what: str


class Recorder:
    """The 5xx answers seen by every client, and the windows around faults."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.errors: list[ServerError] = []
        self.windows: list[Window] = []

    def server_error(self, at: float, status: int, what: str, ended: Optional[float] = None) -> None:
        """A 5xx answer to a request begun at ``at`` and answered at ``ended`` (now, unless given)."""
        error = ServerError(at, time.monotonic() if ended is None else ended, status, what)
        with self.lock:
            self.errors.append(error)

    @contextlib.contextmanager
    def window(self, label: str) -> Iterator[Window]:
        """A request in flight at any moment of the ``with`` block is inside the fault's window: one
        begun just before a fault may be the one the fault breaks (a write sent to the etcd leader a
        moment before it is killed)."""
        window = Window(label, time.monotonic())
        with self.lock:
            self.windows.append(window)
        try:
            yield window
        finally:
            window.end = time.monotonic()

    def in_window(self, began: float, ended: float) -> Optional[str]:
        """The window a request begun at ``began`` and answered at ``ended`` overlaps, if any."""
        for window in self.windows:
            if began <= window.end and window.start <= ended:
                return window.label
        return None

    def where(self, at: float) -> str:
        """Where ``at`` falls among the windows, for a report: after which one, by how much."""
        ended = [w for w in self.windows if w.end < at]
        if not ended:
            return "before every window"
        last = max(ended, key=lambda w: w.end)
        return f"{at - last.end:.1f}s after the window '{last.label}'"

    def split(self) -> tuple[dict[str, list[ServerError]], list[ServerError]]:
        """(the 5xx in each window, the 5xx outside every window)."""
        inside: dict[str, list[ServerError]] = {w.label: [] for w in self.windows}
        outside = []
        with self.lock:
            for error in self.errors:
                label = self.in_window(error.at, error.ended)
                if label is None:
                    outside.append(error)
                else:
                    inside[label].append(error)
        return inside, outside


@dataclass
class Attempt:
    name: str
    content: str
    created: bool  # a POST (the watch shows ADDED), else a PUT (MODIFIED)
    acknowledged: bool
    resource_version: int = 0  # when acknowledged


class Progress:
    """How many writes each writer had acknowledged, which the fault driver waits on."""

    def __init__(self, writers: int) -> None:
        self.condition = threading.Condition()
        self.acknowledged = [0] * writers

    def add(self, writer: int) -> None:
        with self.condition:
            self.acknowledged[writer] += 1
            self.condition.notify_all()

    def wait_for_more(self, count: int, timeout: float) -> None:
        """Block until every writer had ``count`` more writes acknowledged (``timeout`` guards against a hang)."""
        with self.condition:
            goal = [n + count for n in self.acknowledged]
            if not self.condition.wait_for(lambda: all(n >= g for n, g in zip(self.acknowledged, goal)), timeout):
                raise AssertionError(f"writes stalled: {self.acknowledged} acknowledged, waited for {goal}")


_UNSENT = (ConnectionRefusedError, socket.gaierror)


class Writer(threading.Thread):
    """Creates then updates ``objects`` ConfigMaps in turn, through one of ``targets``: the next one after a
    failure, its own (``index``) again every ``RETURN_HOME`` writes."""

    RETURN_HOME = 50

    def __init__(self, index: int, targets: list[Target], namespace: str, recorder: Recorder, progress: Progress,
                 stop: threading.Event, objects: int = 10, pause: float = 0.05, max_writes: int = 5000) -> None:
        super().__init__(name=f"writer-{index}", daemon=True)
        self.index, self.targets, self.recorder, self.progress = index, targets, recorder, progress
        self.path = f"/api/v1/namespaces/{namespace}/configmaps"
        self.stop, self.objects, self.pause, self.max_writes = stop, objects, pause, max_writes
        self.attempts: list[Attempt] = []
        self.connection_errors = 0
        self.go_home = threading.Event()  # set: the next write goes through its own target again
        self.unexpected: list[tuple[int, str]] = []  # answers no fault explains (a 4xx other than the below)
        self._conns: dict[int, http.client.HTTPSConnection] = {}

    def _send(self, which: int, method: str, path: str, body: dict) -> tuple[int, dict]:
        conn = self._conns.get(which)
        if conn is None:
            conn = self._conns[which] = self.targets[which].connect()
        try:
            conn.request(method, path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"{}")
        except BaseException:
            conn.close()
            del self._conns[which]
            raise

    def run(self) -> None:
        existing: set[str] = set()
        home = which = self.index % len(self.targets)
        for n in range(self.max_writes):
            if self.stop.is_set():
                break
            if n % self.RETURN_HOME == 0 or self.go_home.is_set():
                self.go_home.clear()
                which = home
            name = f"w{self.index}-{n % self.objects}"
            created = name not in existing
            body = {"metadata": {"name": name}, "data": {"v": str(n)}}
            began = time.monotonic()
            attempt = Attempt(name, str(n), created, False)
            try:
                status, answer = self._send(which, "POST" if created else "PUT",
                                            self.path if created else f"{self.path}/{name}", body)
            except _UNSENT:
                self.connection_errors += 1  # never reached a server: nothing was written
                which = (which + 1) % len(self.targets)
                time.sleep(self.pause)
                continue
            except (OSError, http.client.HTTPException, ValueError):
                self.connection_errors += 1
                self.attempts.append(attempt)  # it may have been written
                which = (which + 1) % len(self.targets)
                time.sleep(self.pause)
                continue
            if status in (200, 201):
                attempt.acknowledged = True
                attempt.resource_version = int(answer["metadata"]["resourceVersion"])
                self.attempts.append(attempt)
                existing.add(name)
                self.progress.add(self.index)
            else:
                self.attempts.append(attempt)
                if status >= 500:
                    self.recorder.server_error(began, status, f"{self.targets[which].label} write {name}: "
                                                              f"{answer.get('message', '')[:200]}")
                    which = (which + 1) % len(self.targets)
                elif status == 409 and created:  # an earlier POST whose answer was lost did create it
                    existing.add(name)
                elif status == 404 and not created:  # an earlier POST whose answer was lost did not
                    existing.discard(name)
                elif status != 429:
                    self.unexpected.append((status, json.dumps(answer)[:300]))
            time.sleep(self.pause)
        for conn in self._conns.values():
            conn.close()


@dataclass
class Relist:
    after: int  # the resourceVersion the watch had reached
    at: int  # the list's resourceVersion, where the watch went on
    items: dict[str, tuple[int, Optional[str]]]  # name -> (resourceVersion, data.v)


@dataclass
class Event:
    type: str
    name: str
    resource_version: int
    content: Optional[str]


class Watcher(threading.Thread):
    """One watch on a namespace's ConfigMaps that resumes from its last resourceVersion whenever it breaks."""

    def __init__(self, index: int, targets: list[Target], namespace: str, start: int, recorder: Recorder,
                 stop: threading.Event) -> None:
        super().__init__(name=f"watcher-{index}", daemon=True)
        self.index, self.targets, self.recorder, self.stop = index, targets, recorder, stop
        self.path = f"/api/v1/namespaces/{namespace}/configmaps"
        self.start_version = self.resource_version = start
        self.events: list[Event] = []
        self.relists: list[Relist] = []
        self.resumes = 0
        self.bookmarks = 0
        self.unexpected: list[tuple[int, str]] = []
        self.progressed = threading.Condition()
        self._conn: Optional[http.client.HTTPSConnection] = None
        self._lock = threading.Lock()

    def halt(self) -> None:
        """End the watch now (called from another thread after ``stop`` was set)."""
        with self._lock:
            conn = self._conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)

    def wait_until(self, resource_version: int, timeout: float) -> bool:
        with self.progressed:
            return self.progressed.wait_for(lambda: self.resource_version >= resource_version, timeout)

    def _advance(self, resource_version: int) -> None:
        with self.progressed:
            self.resource_version = resource_version
            self.progressed.notify_all()

    def _relist(self, target: Target) -> None:
        began = time.monotonic()
        status, listed = request(target, "GET", self.path)
        if status >= 500:
            self.recorder.server_error(began, status, f"{target.label} relist: {listed.get('message', '')[:200]}")
            return
        items = {i["metadata"]["name"]: (int(i["metadata"]["resourceVersion"]), (i.get("data") or {}).get("v"))
                 for i in listed["items"]}
        at = int(listed["metadata"]["resourceVersion"])
        self.relists.append(Relist(self.resource_version, at, items))
        self._advance(at)

    def run(self) -> None:
        failures = 0
        opened = 0
        while not self.stop.is_set():
            if failures:
                time.sleep(0.05)
            target = self.targets[(self.index + failures) % len(self.targets)]
            began = time.monotonic()
            try:
                conn = target.connect(timeout=WATCH_IDLE_TIMEOUT)
                with self._lock:
                    self._conn = conn
                if self.stop.is_set():
                    break
                try:
                    conn.request("GET", f"{self.path}?watch=1&allowWatchBookmarks=true"
                                        f"&resourceVersion={self.resource_version}")
                    resp = conn.getresponse()
                    if resp.status == 410:
                        resp.read()
                        self._relist(target)
                        continue
                    if resp.status != 200:
                        body = resp.read()
                        if resp.status >= 500:
                            self.recorder.server_error(began, resp.status, f"{target.label} watch: {body[:200]!r}")
                        else:
                            self.unexpected.append((resp.status, body[:300].decode("utf-8", "replace")))
                        failures += 1
                        continue
                    failures = 0
                    opened += 1
                    self.resumes = opened - 1  # watches opened again from a resourceVersion
                    self._stream(resp, target)
                finally:
                    with self._lock:
                        self._conn = None
                    conn.close()
            except (OSError, http.client.HTTPException, ValueError):
                failures += 1

    def _stream(self, resp: http.client.HTTPResponse, target: Target) -> None:
        while True:
            line = resp.readline()
            if not line:
                return
            event = json.loads(line)
            kind, obj = event["type"], event["object"]
            if kind == "ERROR":
                if obj.get("code") == 410:
                    self._relist(target)
                else:
                    self.unexpected.append((obj.get("code", 0), json.dumps(obj)[:300]))
                return
            rv = int(obj["metadata"]["resourceVersion"])
            if kind == "BOOKMARK":
                self.bookmarks += 1
            else:
                self.events.append(Event(kind, obj["metadata"]["name"], rv, (obj.get("data") or {}).get("v")))
            self._advance(rv)


@dataclass
class Findings:
    """What one run saw, and every violation of the guarantees (empty lists when all held)."""

    acknowledged: int = 0
    unacknowledged: int = 0
    connection_errors: int = 0
    events: int = 0
    bookmarks: int = 0
    resumes: int = 0
    relists: int = 0
    errors_in_windows: dict[str, int] = field(default_factory=dict)
    errors_outside: list[str] = field(default_factory=list)
    errors_inside: list[str] = field(default_factory=list)  # "<window>: <status> <what>"
    lost_writes: list[str] = field(default_factory=list)
    watch_violations: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.acknowledged} writes acknowledged, {self.unacknowledged} not (5xx or broken connection; "
                f"{self.connection_errors} connection errors), {self.events} watch events and "
                f"{self.bookmarks} bookmarks received, {self.resumes} watch resumes, {self.relists} relists, "
                f"5xx inside fault windows {self.errors_in_windows}, 5xx outside {len(self.errors_outside)}")


def check(writers: list[Writer], watchers: list[Watcher], final: dict[str, tuple[int, Optional[str]]],
          recorder: Recorder) -> Findings:
    """Hold the run's records against the guarantees.

    ``final`` is the namespace's ConfigMaps as listed at the end (name -> (resourceVersion, data.v)).
    """
    found = Findings()
    acked = [a for w in writers for a in w.attempts if a.acknowledged]
    found.acknowledged = len(acked)
    found.unacknowledged = sum(1 for w in writers for a in w.attempts if not a.acknowledged)
    found.connection_errors = sum(w.connection_errors for w in writers)
    for w in writers:
        found.unexpected += [f"{w.name}: {status} {body}" for status, body in w.unexpected]
    # every acknowledged write is there with its last acknowledged content, unless a later attempt
    # whose answer was lost overwrote it
    history: dict[str, list[Attempt]] = {}
    for w in writers:
        for a in w.attempts:
            history.setdefault(a.name, []).append(a)
    for name, attempts in history.items():
        last = max((i for i, a in enumerate(attempts) if a.acknowledged), default=None)
        if last is None:
            continue
        allowed = {a.content for a in attempts[last:]}  # those after the last acknowledged one were not
        got = final.get(name)
        if got is None or got[1] not in allowed:
            found.lost_writes.append(f"{name}: stored {got}, last acknowledged {attempts[last]}")
        elif got[1] == attempts[last].content and got[0] != attempts[last].resource_version:
            found.lost_writes.append(f"{name}: stored at {got[0]}, acknowledged at {attempts[last].resource_version}")
    # every watch saw every acknowledged write after its start, in order, once
    for watcher in watchers:
        found.events += len(watcher.events)
        found.bookmarks += watcher.bookmarks
        found.resumes += watcher.resumes
        found.relists += len(watcher.relists)
        found.unexpected += [f"{watcher.name}: {status} {body}" for status, body in watcher.unexpected]
        previous = watcher.start_version
        seen: dict[tuple[str, int], Event] = {}
        for event in watcher.events:
            if event.resource_version <= previous:
                found.watch_violations.append(f"{watcher.name}: {event} after resourceVersion {previous} "
                                              "(out of order or repeated)")
            previous = max(previous, event.resource_version)
            seen[(event.name, event.resource_version)] = event
        for a in acked:
            if a.resource_version <= watcher.start_version:
                continue
            matching = seen.get((a.name, a.resource_version))
            if matching is not None:
                if (matching.type, matching.content) != ("ADDED" if a.created else "MODIFIED", a.content):
                    found.watch_violations.append(f"{watcher.name}: {matching} for {a}")
                continue
            covered = [r for r in watcher.relists if r.after < a.resource_version <= r.at
                       and r.items.get(a.name, (0, None))[0] >= a.resource_version]
            if not covered:
                found.watch_violations.append(f"{watcher.name} missed {a}")
    inside, outside = recorder.split()
    found.errors_in_windows = {label: len(errors) for label, errors in inside.items()}
    found.errors_inside = [f"{label}: {e.status} {e.what}" for label, errors in inside.items() for e in errors]
    found.errors_outside = [f"{e.status} {e.what} ({recorder.where(e.at)}, answered {e.ended - e.at:.1f}s later)"
                            for e in outside]
    return found
