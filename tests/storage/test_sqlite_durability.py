"""An acknowledged write to the SQLite backend survives kill -9 of the process."""
from __future__ import annotations

import json
import os
import sys

from twisted.internet import defer, protocol, reactor
from twisted.trial import unittest

import kapiserver
from kapiserver.storage.sqlite import SQLiteStorage

WRITER = os.path.join(os.path.dirname(__file__), "durability_writer.py")
REPO = os.path.dirname(os.path.dirname(kapiserver.__file__))
KILL_AFTER = 400  # acknowledged writes before SIGKILL


class AckReader(protocol.ProcessProtocol):
    """Collects ``key revision`` lines; kills the writer once enough arrived."""

    def __init__(self) -> None:
        self.acks: dict[str, int] = {}
        self.buffer = b""
        self.stderr = b""
        self.killed = False
        self.ended: defer.Deferred = defer.Deferred()

    def outReceived(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            parts = line.decode().split()
            if len(parts) == 2:
                self.acks[parts[0]] = int(parts[1])
        if len(self.acks) >= KILL_AFTER and not self.killed:
            self.killed = True
            self.transport.signalProcess("KILL")

    def errReceived(self, data: bytes) -> None:
        self.stderr += data

    def processEnded(self, reason) -> None:
        self.ended.callback(reason.value)


class KillNineTests(unittest.TestCase):
    timeout = 60

    async def test_acknowledged_writes_survive_sigkill(self):
        path = os.path.abspath(self.mktemp()) + ".db"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        reader = AckReader()
        env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = reactor.spawnProcess(reader, sys.executable, [sys.executable, WRITER, path], env=env)
        self.addCleanup(lambda: proc.pid and proc.signalProcess("KILL"))
        await reader.ended
        self.assertTrue(reader.killed, f"the writer died on its own: {reader.stderr.decode()[-2000:]}")
        self.assertGreaterEqual(len(reader.acks), KILL_AFTER)

        store = SQLiteStorage(path)
        await store.start()
        self.addCleanup(store.stop)
        last_ack = max(reader.acks.values())
        current = await store.current_revision()
        self.assertGreaterEqual(current, last_ack)
        stored = {kv.key: kv for kv in (await store.list("/d/")).items}
        for key, revision in reader.acks.items():
            self.assertIn(key, stored, f"acknowledged {key} at {revision} was lost")
            self.assertEqual(stored[key].mod_revision, revision)
        for kv in stored.values():  # nothing half-written, acknowledged or not
            doc = json.loads(kv.value)
            self.assertEqual(kv.key, f"/d/{doc['writer']}/{doc['i']:06d}")
        self.assertEqual(len(stored), current, "one key per revision, no holes")
        after = await store.create("/d/after", b"{}")
        self.assertEqual(after.mod_revision, current + 1)
