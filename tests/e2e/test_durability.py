"""kill -9 of the server under write load loses nothing it acknowledged."""
from __future__ import annotations

import signal
import threading
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import ServerProcess

ACKS_BEFORE_KILL = 150
WRITERS = 4


class KillNineTests(unittest.TestCase):
    def test_acknowledged_writes_survive_kill_9(self):
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        server = ServerProcess().start()
        self.addCleanup(server.cleanup)
        core = client.CoreV1Api(server.python_client())
        ns = "dur-" + uuid.uuid4().hex[:6]
        core.create_namespace({"metadata": {"name": ns}})

        acked: dict[str, tuple[str, int]] = {}
        lock = threading.Lock()
        enough = threading.Event()

        def writer(worker: int) -> None:
            api = client.CoreV1Api(server.python_client())
            i = 0
            while True:
                name = f"w{worker}-{i}"
                value = uuid.uuid4().hex
                try:
                    created = api.create_namespaced_config_map(
                        ns, {"metadata": {"name": name}, "data": {"v": value}}, _request_timeout=5)
                except Exception:
                    return  # the server is gone
                with lock:
                    acked[name] = (value, int(created.metadata.resource_version))
                    if len(acked) >= ACKS_BEFORE_KILL:
                        enough.set()
                i += 1

        threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(WRITERS)]
        for t in threads:
            t.start()
        self.assertTrue(enough.wait(60), "the writers did not get enough acknowledgements")
        server.stop(sig=signal.SIGKILL)
        for t in threads:
            t.join(10)
        with lock:
            snapshot = dict(acked)
        last_acked = max(rv for _, rv in snapshot.values())

        restarted = ServerProcess(workdir=server.workdir).start()
        self.addCleanup(restarted.stop)
        core = client.CoreV1Api(restarted.python_client())
        stored = {cm.metadata.name: cm for cm in core.list_namespaced_config_map(ns).items}
        for name, (value, rv) in snapshot.items():
            self.assertIn(name, stored, f"acknowledged {name} was lost")
            self.assertEqual(stored[name].data, {"v": value})
            self.assertEqual(int(stored[name].metadata.resource_version), rv)
        after = core.create_namespaced_config_map(ns, {"metadata": {"name": "after-restart"}})
        self.assertGreater(int(after.metadata.resource_version), last_acked)
        try:
            core.read_namespaced_config_map("after-restart", ns)
        except ApiException as e:  # pragma: no cover - a failure message only
            self.fail(f"new write not readable: {e}")
