"""LatestReads alone, with a client that answers when told: batching, order, failures."""
from __future__ import annotations

import base64

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.storage.etcd.client import EtcdKV, RangeResponse, TxnResponse
from kapiserver.storage.etcd.read_batch import LatestReads
from kapiserver.storage.interface import UnavailableError


def kv(key: bytes) -> EtcdKV:
    return EtcdKV(key, b"v-" + key, 1, 1, 0, 1)


class HeldClient:
    """range/txn answer only when the test releases them (the stored keys: ``present``)."""

    def __init__(self, present: set[bytes]) -> None:
        self.present = present
        self.calls: list[tuple[str, list[bytes], defer.Deferred]] = []
        self.broken = False

    def _answer(self, keys: list[bytes]) -> list[RangeResponse]:
        return [RangeResponse(1, [kv(k)] if k in self.present else [], False, int(k in self.present))
                for k in keys]

    def range(self, key: bytes) -> defer.Deferred:
        d: defer.Deferred = defer.Deferred()
        self.calls.append(("range", [key], d))
        return d.addCallback(lambda _: self._answer([key])[0])

    def txn(self, compare, success, failure) -> defer.Deferred:
        keys = [base64.b64decode(op.body["key"]) for op in success]
        d: defer.Deferred = defer.Deferred()
        self.calls.append(("txn", keys, d))
        return d.addCallback(lambda _: TxnResponse(True, 1, self._answer(keys)))

    def release(self) -> None:
        _, _, d = self.calls[-1]
        if self.broken:
            d.errback(UnavailableError("etcd is unreachable"))
        else:
            d.callback(None)


class LatestReadsTests(unittest.TestCase):
    def test_a_read_alone_goes_at_once_and_waiting_reads_share_the_next_round_trip(self):
        client = HeldClient({b"a", b"c"})
        reads = LatestReads(client)  # type: ignore[arg-type]
        first = reads.get(b"a")
        self.assertEqual([(kind, keys) for kind, keys, _ in client.calls], [("range", [b"a"])])
        waiting = [reads.get(k) for k in (b"b", b"c", b"a")]
        self.assertEqual(len(client.calls), 1)  # they wait for the read in flight
        client.release()
        self.assertEqual(self.successResultOf(first).value, b"v-a")
        self.assertEqual([(kind, keys) for kind, keys, _ in client.calls][1], ("txn", [b"b", b"c", b"a"]))
        client.release()
        self.assertEqual([r.value if r else None for r in map(self.successResultOf, waiting)],
                         [None, b"v-c", b"v-a"])
        self.assertEqual((reads.round_trips, reads.reads), (2, 4))

    def test_a_failed_round_trip_fails_its_reads_only(self):
        client = HeldClient({b"a"})
        reads = LatestReads(client, max_batch=2)  # type: ignore[arg-type]
        first = reads.get(b"a")
        batch = [reads.get(b"a"), reads.get(b"b")]
        later = reads.get(b"a")  # beyond max_batch: the round trip after
        client.broken = True
        client.release()
        self.failureResultOf(first, UnavailableError)
        client.broken = False
        client.release()
        self.assertEqual([r.value if r else None for r in map(self.successResultOf, batch)], [b"v-a", None])
        client.release()
        self.assertEqual(self.successResultOf(later).value, b"v-a")
        self.assertEqual(reads.round_trips, 3)
