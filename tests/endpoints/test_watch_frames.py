"""What a watch stream keeps of its events: the encoded frame each event memoizes for the other
watchers of its resource lives as long as the event stays in the watch cache's window."""
from __future__ import annotations

import gc
import inspect
import tracemalloc

import treq
from twisted.internet import reactor

from kapiserver.machinery import codec
from kapiserver.testing.cases import HANG_GUARD, ServerTestCase, run

CM = "/api/v1/namespaces/default/configmaps"


class WatchFrameMemoryTests(ServerTestCase):
    @run
    async def test_frames_kept_for_other_watchers_are_kept_at_their_own_size(self):
        # orjson hands back its output in a buffer several times its length (codec.exact_size):
        # the window's events must not keep those buffers for every frame they memoize
        if not tracemalloc.is_tracing():
            tracemalloc.start()
            self.addCleanup(tracemalloc.stop)
        source, first = inspect.getsourcelines(codec.encode_json)
        encoder = [tracemalloc.Filter(True, codec.__file__, lineno=first + i)
                   for i, line in enumerate(source) if "orjson.dumps" in line]
        start = (await self.client.get(CM)).body["metadata"]["resourceVersion"]
        for i in range(20):
            created = await self.client.post(CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "metadata": {"name": f"cm-{i:02d}"},
                                                  "data": {"payload": "0123456789" * 100}})
            self.assertEqual(created.code, 201)
        # the watch replays the 20 events from the cache's window as it starts, then ends a second
        # later (made after the creates: a watch open while they are made ended before they all
        # were on a busy machine)
        response = await treq.get(f"{self.server.url}{CM}?watch=true&resourceVersion={start}&timeoutSeconds=1",
                                  unbuffered=True, persistent=False)
        chunks: list[bytes] = []
        await treq.collect(response, chunks.append).addTimeout(HANG_GUARD, reactor)
        names = [codec.decode_json(line)["object"]["metadata"]["name"] for line in b"".join(chunks).splitlines()]
        self.assertEqual([n for n in names if n.startswith("cm-")], [f"cm-{i:02d}" for i in range(20)])
        del chunks
        gc.collect()
        held = tracemalloc.take_snapshot().filter_traces(encoder)
        self.assertEqual(sum(stat.size for stat in held.statistics("lineno")), 0,
                         "the window's events hold the encoder's buffers")
