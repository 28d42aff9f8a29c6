"""Lists with a selective label or field selector answered from the watch cache's indexes give what
a list of every object filtered by the same selectors gives (a Store on the backend alone), through
updates that change the indexed label or field, deletes, pages and resourceVersions."""
from __future__ import annotations

from typing import Any

from twisted.trial import unittest

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.store import Store
from kapiserver.storage.cacher import CachedStorage
from kapiserver.storage.sqlite import SQLiteStorage

SELECTORS = [
    ("group=g1", ""), ("group in (g1,g2)", ""), ("group==g2,tier=web", ""), ("group=nothing", ""),
    ("", "spec.nodeName=node-1"), ("", "spec.nodeName="), ("", "spec.nodeName=node-2,metadata.namespace=ns1"),
    ("group=g1", "spec.nodeName=node-0"), ("", "metadata.name=p03"), ("", "metadata.namespace=ns2"),
    ("tier!=web", ""), ("", "spec.nodeName!=node-1"),
]

NOW = DeleteOptions(grace_period_seconds=0)


def pod(name: str, group: str, node: str) -> dict:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": {"group": group, "tier": "web" if int(name[1:]) % 2 else "db"}},
            "spec": spec}


class IndexedListTests(unittest.TestCase):
    async def asyncSetUp(self) -> tuple[Store, Store, CachedStorage]:
        backend = SQLiteStorage(":memory:")
        cached = CachedStorage(backend)
        await cached.start()
        self.addCleanup(cached.stop)
        rtype = next(r for r in builtin_resource_types() if (r.group, r.plural) == ("", "pods"))
        return Store(rtype, cached), Store(rtype, backend), cached

    def opts(self, label: str, field: str, **kw: Any) -> ListOptions:
        return ListOptions(parse_label_selector(label), parse_field_selector(field), **kw)

    async def names(self, store: Store, namespace: str, opts: ListOptions) -> list[str]:
        listed = await store.list(namespace, opts)
        return [f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in listed["items"]]

    async def assert_same(self, cached: Store, plain: Store) -> None:
        for namespace in ("", "ns1"):
            for label, field in SELECTORS:
                for rv in ("", "0"):
                    opts = self.opts(label, field, resource_version=rv)
                    self.assertEqual(await self.names(cached, namespace, opts),
                                     await self.names(plain, namespace, opts), (namespace, label, field, rv))

    async def test_indexed_lists_answer_as_full_scans(self):
        cached, plain, storage = await self.asyncSetUp()
        for i in range(24):
            await cached.create(f"ns{i % 3}", pod(f"p{i:02d}", f"g{i % 4}", f"node-{i % 3}" if i % 5 else ""))
        await self.assert_same(cached, plain)
        cache = storage.cache_for("/pods/")
        self.assertTrue({"labels", "field v1 spec.nodeName"} <= set(cache._indexes), "the indexes answered")
        # labels change; pods go, and come back on another node
        for i in range(0, 24, 3):
            await cached.guaranteed_update(f"ns{i % 3}", f"p{i:02d}", lambda cur: {
                **cur, "metadata": {**cur["metadata"], "labels": {"group": "g1", "tier": "web"}}})
        await cached.guaranteed_update("ns1", "p01", lambda cur: {
            **cur, "metadata": {**cur["metadata"], "labels": {}}})
        for i in (4, 9, 10, 15):
            await cached.delete(f"ns{i % 3}", f"p{i:02d}", NOW)
        for i in (4, 10):
            await cached.create(f"ns{i % 3}", pod(f"p{i:02d}", "g2", "node-2"))
        await cached.create("ns1", pod("p40", "g1", "node-1"))
        await self.assert_same(cached, plain)

    async def test_pages_of_an_indexed_list_continue_at_their_revision(self):
        cached, plain, _ = await self.asyncSetUp()
        for i in range(30):
            await cached.create(f"ns{i % 2}", pod(f"p{i:02d}", f"g{i % 2}", f"node-{i % 2}"))
        for label, field in (("group=g1", ""), ("", "spec.nodeName=node-0")):
            pages: list[list[str]] = []
            opts = self.opts(label, field, limit=4)
            while True:
                listed = await cached.list("", opts)
                pages.append([o["metadata"]["name"] for o in listed["items"]])
                token = listed["metadata"].get("continue")
                if not pages[-1] or not token:
                    break
                if len(pages) == 2:  # writes between pages are not in the later pages
                    for namespace in ("ns0", "ns1"):
                        await cached.create(namespace, pod("p99", "g1", "node-0"))
                opts = self.opts(label, field, limit=4, continue_token=token)
            whole = [name for page in pages for name in page]
            self.assertEqual([len(p) for p in pages], [4, 4, 4, 3], (label, field))
            self.assertNotIn("p99", whole)
            self.assertEqual(whole, sorted(whole))
            for namespace in ("ns0", "ns1"):
                await cached.delete(namespace, "p99", NOW)
        await self.assert_same(cached, plain)
