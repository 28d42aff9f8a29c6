"""Faults under load: no acknowledged write lost, no watch with a gap or a duplicate, 5xx only during faults.

Two writers create and update ConfigMaps steadily and 200 raw watches follow
them (:mod:`kapiserver.testing.faultload`), while the test breaks things in
turn:

* on a three-member etcd with two kapiservers, the third member in a network
  namespace of its own: that member, made leader, cut off from its peers but
  reachable by the servers (iptables), then healed; ``kill -9`` of the etcd
  leader (restarted once another leads); ``kill -9`` of one kapiserver (its
  watchers resume on the other; it is restarted); the third member
  partitioned by taking its link down, then healed;
* on SQLite with ``workers: 2``: ``kill -9`` of one worker, then of the
  other (the supervisor starts another each time).

Each fault has a window: from the fault until writes were acknowledged again
after the election or the repair; a request in flight at any moment of it is
inside.  A cut that lasts is outside: then writes
through both servers must succeed and every watch must keep up.  Afterwards:
every acknowledged write is stored with its last acknowledged content; every
watch saw every acknowledged write made after it began, once, in
resourceVersion order, or a relist after a 410 covered it; no 5xx came
outside the windows.  Each test prints what it saw (docs/etcd.md quotes a run).
"""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import uuid
from typing import Callable, Optional, Sequence

from twisted.trial import unittest

from kapiserver.testing import faultload
from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.etcd import EtcdCluster, EtcdServer, skip_reason
from kapiserver.testing.netns import NetworkNamespace, unavailable_reason
from kapiserver.testing.process import ServerProcess
from tests.e2e.test_workers import worker_pids

WATCHERS = 200
WRITERS = 2
WARM_UP_WRITES = 20
WRITES_PER_STEP = 10  # acknowledged writes of each writer that show the cluster took writes again after a step of a fault
PROGRESS_NOTIFY = "500ms"
SILENCE_TIMEOUT = 3  # seconds: a watch stream to etcd that sent nothing for this long is reopened elsewhere


class _Load:
    """Writers and watchers on one namespace, reached through ``targets``."""

    def __init__(self, targets: list[faultload.Target]) -> None:
        self.targets = targets
        self.recorder = faultload.Recorder()
        self.progress = faultload.Progress(WRITERS)
        self.stop_writing, self.stop_watching = threading.Event(), threading.Event()
        self.namespace = "faults-" + uuid.uuid4().hex[:8]
        status, body = faultload.request(targets[0], "POST", "/api/v1/namespaces",
                                         {"metadata": {"name": self.namespace}})
        assert status == 201, body
        self.path = f"/api/v1/namespaces/{self.namespace}/configmaps"
        status, listed = faultload.request(targets[0], "GET", self.path)
        assert status == 200, listed
        start = int(listed["metadata"]["resourceVersion"])
        self.writers = [faultload.Writer(i, targets, self.namespace, self.recorder, self.progress,
                                         self.stop_writing) for i in range(WRITERS)]
        self.watchers = [faultload.Watcher(i, targets, self.namespace, start, self.recorder, self.stop_watching)
                         for i in range(WATCHERS)]

    def start(self) -> None:
        for thread in (*self.watchers, *self.writers):
            thread.start()
        self.progress.wait_for_more(WARM_UP_WRITES, HANG_GUARD)

    def more_writes(self, count: int = WRITES_PER_STEP) -> None:
        self.progress.wait_for_more(count, HANG_GUARD)

    def every_server_writes(self) -> None:
        """A write through each server is acknowledged: a fault's window ends once every server
        writes again, not once one does (a server moves to a healthy etcd member only when its
        current one answers unavailable, so its first write after a fault may still fail)."""
        def acknowledged(target: faultload.Target) -> bool:
            try:
                status, _ = faultload.request(target, "POST", self.path, {"metadata": {"generateName": "marker-"}})
            except OSError:
                return False
            return status == 201
        for target in self.targets:
            _wait(lambda: acknowledged(target), f"a write through {target.label}")

    def send_writers_home(self) -> None:
        """Every writer writes through its own server again (after a fault sent it to the other)."""
        for writer in self.writers:
            writer.go_home.set()

    def watches_keep_up(self) -> None:
        """A write through each server reaches every watch (while a fault lasts: no watch is stale)."""
        latest = 0
        for target in self.targets:
            status, body = faultload.request(target, "POST", self.path,
                                             {"metadata": {"generateName": "marker-"}})
            assert status == 201, (target.label, status, body)
            latest = max(latest, int(body["metadata"]["resourceVersion"]))
        stale = [w.name for w in self.watchers if not w.wait_until(latest, HANG_GUARD)]
        assert not stale, f"watches that did not see a write made during the fault ({latest}): {stale[:10]}"

    def halt(self) -> None:
        """Stop everything (idempotent; also the cleanup when a test failed half-way)."""
        self.stop_writing.set()
        self.stop_watching.set()
        for watcher in self.watchers:
            watcher.halt()
        for thread in (*self.writers, *self.watchers):
            if thread.is_alive():
                thread.join(HANG_GUARD)

    def finish(self) -> faultload.Findings:
        """Stop writing, let every watch catch up with a last write, stop watching, and check."""
        self.stop_writing.set()
        for writer in self.writers:
            writer.join(HANG_GUARD)
        fence = self._write_fence()
        lagging = [w.name for w in self.watchers if not w.wait_until(fence, HANG_GUARD)]
        assert not lagging, f"watches that never reached the last write ({fence}): {lagging[:10]}"
        self.halt()
        status, listed = faultload.request(self.targets[0], "GET", self.path)
        assert status == 200, listed
        final = {i["metadata"]["name"]: (int(i["metadata"]["resourceVersion"]), (i.get("data") or {}).get("v"))
                 for i in listed["items"]}
        return faultload.check(self.writers, self.watchers, final, self.recorder)

    def _write_fence(self) -> int:
        def attempt() -> Optional[int]:
            status, body = faultload.request(self.targets[0], "POST", self.path, {"metadata": {"name": "fence"}})
            return int(body["metadata"]["resourceVersion"]) if status == 201 else None
        return wait_for(attempt, timeout=HANG_GUARD, interval=0.5)


def _report(test: unittest.TestCase, title: str, found: faultload.Findings,
            servers: Sequence[ServerProcess]) -> None:
    print(f"\n{title}: {found.summary()}", *found.errors_inside, sep="\n  ")
    test.assertEqual(found.lost_writes, [])
    test.assertEqual(found.watch_violations[:20], [])
    # a generic 500 hides its cause from the client: the servers' logs name it
    test.assertEqual(found.errors_outside, [], "\n\n".join(
        f"server-{i} logged:\n{failure}" for i, server in enumerate(servers) for failure in server.failures()))
    test.assertEqual(found.unexpected, [])
    # the faults were felt: watches were broken and resumed, and writes kept being acknowledged
    test.assertGreater(found.resumes, 0)
    test.assertGreater(found.acknowledged, WARM_UP_WRITES)
    test.assertGreaterEqual(found.events, found.acknowledged * WATCHERS // 2)


def _wait(predicate: Callable[[], object], what: str) -> None:
    try:
        wait_for(predicate, timeout=HANG_GUARD, interval=0.1)
    except AssertionError:
        raise AssertionError(f"never happened: {what}") from None


class EtcdFaultTests(unittest.TestCase):
    """Three etcd members (the third in a network namespace) and two kapiservers."""

    def setUp(self) -> None:
        reason = skip_reason() or unavailable_reason()
        if reason:
            raise unittest.SkipTest(reason)

    def test_leader_kill_server_kill_and_partition_under_writes_and_watches(self):
        netns = NetworkNamespace(f"kapiserver-faults-{os.getpid()}", index=1).create()
        self.addCleanup(netns.delete)
        flags = ["--experimental-watch-progress-notify-interval", PROGRESS_NOTIFY]
        members = [EtcdServer(flags, name="m1", host=netns.host_address),
                   EtcdServer(flags, name="m2", host=netns.host_address),
                   EtcdServer(flags, name="m3", host=netns.peer_address, command_prefix=netns.exec_prefix)]
        cluster = EtcdCluster(members).start()
        self.addCleanup(cluster.cleanup)
        cert_dir = tempfile.mkdtemp(prefix="kapiserver-faults-certs-")
        self.addCleanup(shutil.rmtree, cert_dir, True)
        servers = []
        # the first server prefers the member that will be cut off, the second another one
        for endpoints in ([members[2], *members[:2]], members):
            server = ServerProcess({"cert_dir": cert_dir, "storage": {"backend": "etcd3", "etcd": {
                "servers": [m.endpoint for m in endpoints],
                "watch_silence_timeout_seconds": SILENCE_TIMEOUT}}}).start()
            self.addCleanup(server.cleanup)
            servers.append(server)
        context = faultload.admin_context(cert_dir)
        targets = [faultload.target_for(f"server-{i}", s.server_url, context) for i, s in enumerate(servers)]
        load = _Load(targets)
        self.addCleanup(load.halt)
        load.start()

        isolated = members[2]
        # server-0 talks to the isolated member (its first endpoint), the leader, which keeps answering
        # it while cut off from its peers: its answers are errors, or stale
        # moving the leadership is an election too: its own window
        with load.recorder.window(f"etcd leadership moved to {isolated.name}"):
            _wait(lambda: cluster.transfer_leadership(isolated), f"{isolated.name} leading")
            load.more_writes()
            load.every_server_writes()
        self._partition(load, cluster, lambda: netns.cut_except(isolated.client_port), netns.heal,
                        f"etcd leader {isolated.name} cut off from its peers",
                        f"etcd member {isolated.name} back with its peers")

        _wait(lambda: cluster.leader(), "an etcd leader")
        leader = cluster.leader()
        assert leader is not None
        with load.recorder.window(f"etcd leader {leader.name} killed"):
            leader.stop(kill=True)
            _wait(lambda: cluster.leader() not in (None, leader), "a new etcd leader")
            load.more_writes()
            leader.start()
            _wait(lambda: cluster.leader(members) is not None, "the killed member rejoining")
            load.more_writes()
            load.every_server_writes()

        victim = servers[1]
        with load.recorder.window("kapiserver server-1 killed"):
            victim.stop(sig=signal.SIGKILL)
            load.more_writes()
            # back, preferring the member about to be partitioned
            victim.extra_config["storage"]["etcd"]["servers"] = [m.endpoint for m in (isolated, *members[:2])]
            victim.start()
            targets[1].port = faultload.target_for("", victim.server_url, context).port
            load.more_writes()
            load.every_server_writes()

        self._partition(load, cluster, netns.cut, netns.heal, f"etcd member {isolated.name} partitioned",
                        f"etcd member {isolated.name} reachable again")

        load.more_writes()  # outside every window
        _report(self, "etcd faults", load.finish(), servers)

    @staticmethod
    def _partition(load: _Load, cluster: EtcdCluster, cut: Callable[[], None], heal: Callable[[], None],
                   fault: str, healed: str) -> None:
        """Cut the third member off, then heal it, each in a window that ends once writes went on after
        the election.  While the cut lasts (outside every window) it is no excuse: writes through both
        servers (no 5xx) and a write through each server reaches every watch."""
        majority = cluster.members[:2]
        with load.recorder.window(fault):
            cut()
            _wait(lambda: cluster.leader(majority) is not None, "a leader on the majority side")
            load.more_writes()
            load.every_server_writes()
        load.send_writers_home()
        load.more_writes(2 * WRITES_PER_STEP)
        load.watches_keep_up()
        with load.recorder.window(healed):
            heal()
            _wait(lambda: cluster.leader(cluster.members) is not None, "the third member back in the cluster")
            load.more_writes()
            load.every_server_writes()


class WorkerFaultTests(unittest.TestCase):
    """SQLite with ``workers: 2``: one server address, two processes behind it."""

    def test_worker_kill_under_writes_and_watches(self):
        server = ServerProcess({"workers": 2}).start()
        self.addCleanup(server.cleanup)
        context = faultload.admin_context(server.cert_dir)
        target = faultload.target_for("server", server.server_url, context)
        load = _Load([target, target])
        self.addCleanup(load.halt)
        load.start()
        for victim in worker_pids(server):  # one, then the other (each worker may hold the controllers)
            with load.recorder.window(f"worker {victim} killed"):
                os.kill(victim, signal.SIGKILL)
                _wait(lambda: len(pids := worker_pids(server)) == 2 and victim not in pids, "a replacement worker")
                load.more_writes(2 * WRITES_PER_STEP)
                load.every_server_writes()
            load.more_writes()
        _report(self, "worker fault", load.finish(), [server])
