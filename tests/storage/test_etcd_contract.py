"""The shared storage contract, run against a real etcd through EtcdStorage."""
from __future__ import annotations

import uuid

from twisted.trial import unittest

from kapiserver.storage.etcd import EtcdStorage
from tests.storage.contract import StorageContractTests
from kapiserver.testing.etcd import shared_etcd, skip_reason


class EtcdContractTests(StorageContractTests, unittest.TestCase):
    """One etcd for the whole class; every test gets its own key prefix."""

    skip = skip_reason()

    async def make_storage(self) -> EtcdStorage:
        self.etcd = shared_etcd()
        self.prefix = f"/contract-{uuid.uuid4().hex[:12]}"
        store = EtcdStorage([self.etcd.endpoint], prefix=self.prefix, request_timeout=5.0)
        await store.start()
        return store

    async def restart_storage(self) -> EtcdStorage:
        await self.storage.stop()
        self.etcd.restart()
        store = EtcdStorage([self.etcd.endpoint], prefix=self.prefix, request_timeout=5.0)
        await store.start()
        return store
