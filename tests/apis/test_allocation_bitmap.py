"""The allocation bitmap and the service ranges: upstream's stored format and allocation order."""
from __future__ import annotations

import random

from twisted.trial import unittest

from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.apis.core.service_ranges import IPRange, PortRange


class BitmapTests(unittest.TestCase):
    def test_snapshot_is_go_big_int_bytes(self) -> None:
        """Offset i is bit i of a big-endian integer without leading zero bytes (big.Int.Bytes())."""
        bitmap = AllocationBitmap(300)
        self.assertEqual(bitmap.snapshot(), b"")
        bitmap.allocate(0)
        bitmap.allocate(9)
        self.assertEqual(bitmap.snapshot(), b"\x02\x01")
        bitmap.allocate(299)
        data = bitmap.snapshot()
        self.assertEqual(int.from_bytes(data, "big"), (1 << 299) | (1 << 9) | 1)
        again = AllocationBitmap.from_snapshot(300, 0, data)
        self.assertEqual(list(again.offsets()), [0, 9, 299])
        self.assertEqual((again.count, again.free), (3, 297))
        self.assertEqual(again, bitmap)

    def test_snapshot_of_a_larger_range_keeps_only_what_fits(self) -> None:
        data = ((1 << 40) | (1 << 3)).to_bytes(6, "big")
        self.assertEqual(list(AllocationBitmap.from_snapshot(16, 0, data).offsets()), [3])

    def test_allocate_and_release(self) -> None:
        bitmap = AllocationBitmap(10)
        self.assertTrue(bitmap.allocate(4))
        self.assertFalse(bitmap.allocate(4))
        self.assertTrue(bitmap.has(4))
        bitmap.release(4)
        bitmap.release(4)
        self.assertEqual((bitmap.has(4), bitmap.count), (False, 0))
        with self.assertRaises(ValueError):
            bitmap.allocate(10)

    def test_dynamic_allocation_fills_the_upper_band_first_then_the_reserved_one(self) -> None:
        bitmap = AllocationBitmap(40, reserved=8)
        rng = random.Random(7)
        upper = [bitmap.allocate_next(rng) for _ in range(32)]
        self.assertEqual(sorted(upper), list(range(8, 40)))
        lower = [bitmap.allocate_next(rng) for _ in range(8)]
        self.assertEqual(sorted(lower), list(range(8)))
        self.assertIsNone(bitmap.allocate_next(rng))
        bitmap.release(21)
        self.assertEqual(bitmap.allocate_next(rng), 21)

    def test_free_offsets_are_found_past_full_bytes(self) -> None:
        bitmap = AllocationBitmap(1 << 16)
        for offset in range(1 << 16):
            if offset != 54321:
                bitmap.allocate(offset)
        self.assertEqual(bitmap.allocate_next(random.Random(1)), 54321)
        self.assertIsNone(bitmap.allocate_next())


class RangeTests(unittest.TestCase):
    def test_ipv4_range_as_upstream(self) -> None:
        r = IPRange("10.0.0.0/24")
        self.assertEqual((r.spec, r.size, r.reserved, r.first_ip, r.family), ("10.0.0.0/24", 254, 16, "10.0.0.1", "IPv4"))
        self.assertEqual((r.offset_of("10.0.0.1"), r.offset_of("10.0.0.254")), (0, 253))
        for outside in ("10.0.0.0", "10.0.0.255", "10.0.1.1", "fd00::1", "nonsense"):
            self.assertIsNone(r.offset_of(outside), outside)
        self.assertEqual(r.value_at(16), "10.0.0.17")
        self.assertEqual(IPRange("10.96.0.0/12").reserved, 256)
        self.assertEqual(IPRange("10.0.0.0/29").size, 6)

    def test_ipv6_range_is_capped(self) -> None:
        r = IPRange("fd00:10:96::/64")
        self.assertEqual((r.size, r.reserved, r.first_ip, r.family), (65535, 256, "fd00:10:96::1", "IPv6"))
        self.assertEqual(r.offset_of("fd00:10:96::ffff"), 65534)
        self.assertIsNone(r.offset_of("fd00:10:96::1:0"))

    def test_node_port_range(self) -> None:
        r = PortRange()
        self.assertEqual((r.spec, r.size, r.reserved), ("30000-32767", 2768, 86))
        self.assertEqual((r.offset_of(30000), r.offset_of(32767), r.offset_of(29999), r.offset_of(True)),
                         (0, 2767, None, None))
