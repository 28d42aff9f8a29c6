"""The server builds the watch caches of the kinds it stores, and their standard indexes (a pod's
``spec.nodeName`` and labels), before it is ready, and the other kinds' label indexes right after: the
first lists after a restart are served from memory and answer what the store holds."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from twisted.internet import reactor, task
from twisted.trial import unittest

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import ListOptions
from kapiserver.registry.store import Store
from kapiserver.storage.cacher import CachedStorage
from kapiserver.storage.sqlite import SQLiteStorage
from kapiserver.testing.apiserver import start_in_memory_server


def pod(i: int) -> dict:
    return {"metadata": {"name": f"p{i:02d}", "labels": {"group": f"g{i % 3}", "tier": "web"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": f"node-{i % 4}"}}


class StartCachesTests(unittest.TestCase):
    async def stored_pods(self, path: str, count: int) -> None:
        """``count`` pods and as many ConfigMaps in the SQLite file at ``path``, written before any
        server runs on it."""
        backend = SQLiteStorage(path)
        await backend.start()
        types = {r.plural: r for r in builtin_resource_types() if r.group == "" and r.plural in ("pods", "configmaps")}
        pods, configmaps = Store(types["pods"], backend), Store(types["configmaps"], backend)
        for i in range(count):
            await pods.create(f"ns{i % 2}", pod(i))
            await configmaps.create("ns0", {"metadata": {"name": f"cm{i}", "labels": {"group": f"g{i % 3}"}}})
        await backend.stop()

    def names(self, listed: dict) -> list[str]:
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in listed["items"]]

    async def test_stored_kinds_are_cached_and_indexed_before_the_server_is_ready(self) -> None:
        tmpdir = tempfile.mkdtemp(prefix="kapiserver-test-")
        self.addCleanup(shutil.rmtree, tmpdir, True)
        path = os.path.join(tmpdir, "state.db")
        await self.stored_pods(path, 24)

        server = await start_in_memory_server(CachedStorage(SQLiteStorage(path), reactor=reactor))
        self.addCleanup(server.stop)
        storage = server.storage
        assert isinstance(storage, CachedStorage)
        # start() returned (the server's ready check waits for it): no read of a pod so far
        self.assertEqual(storage.cached_count("/pods/"), 24)
        cache = storage.cache_for("/pods/")
        assert cache is not None
        self.assertEqual({name for name, index in cache._indexes.items() if index.built},
                         {"field v1 spec.nodeName", "labels"})
        configmaps = storage.cache_for("/configmaps/")
        assert configmaps is not None
        for _ in range(1500):  # their label index follows in the background (a guard against a hang, 30 s)
            if "labels" in {name for name, index in configmaps._indexes.items() if index.built}:
                break
            await task.deferLater(reactor, 0.02, lambda: None)
        else:
            self.fail("the label index of ConfigMaps was not built after the start")

        pods = server.api.served.store("", "v1", "pods")
        expected = {
            ("group=g1", ""): [f"ns{i % 2}/p{i:02d}" for i in range(24) if i % 3 == 1],
            ("group in (g0,g2),tier=web", ""): [f"ns{i % 2}/p{i:02d}" for i in range(24) if i % 3 != 1],
            ("", "spec.nodeName=node-3"): [f"ns{i % 2}/p{i:02d}" for i in range(24) if i % 4 == 3],
        }
        for (label, field), names in expected.items():
            for rv in ("", "0"):
                opts = ListOptions(parse_label_selector(label), parse_field_selector(field), resource_version=rv)
                listed: Any = await pods.list("", opts)
                self.assertEqual(sorted(self.names(listed)), sorted(names), (label, field, rv))

    async def test_pods_are_cached_and_indexed_from_an_empty_start(self) -> None:
        # so a node's first list of its pods, after many were created, costs what it returns
        tmpdir = tempfile.mkdtemp(prefix="kapiserver-test-")
        self.addCleanup(shutil.rmtree, tmpdir, True)
        server = await start_in_memory_server(CachedStorage(SQLiteStorage(os.path.join(tmpdir, "state.db")),
                                                            reactor=reactor))
        self.addCleanup(server.stop)
        storage = server.storage
        assert isinstance(storage, CachedStorage)
        cache = storage.cache_for("/pods/")
        assert cache is not None
        self.assertTrue(cache.ready)
        self.assertEqual({name for name, index in cache._indexes.items() if index.built},
                         {"field v1 spec.nodeName", "labels"})
        pods = server.api.served.store("", "v1", "pods")
        for i in range(8):
            await pods.create("default", pod(i))
        nodes = cache._indexes["field v1 spec.nodeName"]
        for _ in range(1500):  # indexed in the background soon after (a guard against a hang, 30 s)
            if not nodes.pending and len(nodes.of_key) == 8:
                break
            await task.deferLater(reactor, 0.02, lambda: None)
        else:
            self.fail("the writes were not indexed in the background")
        opts = ListOptions(parse_label_selector(""), parse_field_selector("spec.nodeName=node-1"))
        self.assertEqual(sorted(self.names(await pods.list("", opts))), ["default/p01", "default/p05"])
