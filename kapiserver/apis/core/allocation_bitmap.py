"""A set of small integers kept as a bitmap: which offsets of a range are taken.

Upstream's ``AllocationBitmap`` (pkg/registry/core/service/allocator): the
cluster IP and node port allocators map a value (an IP, a port) to an offset
in ``0..size-1`` and keep one bit per offset.  The stored form is Go's
``big.Int.Bytes()`` of that bitmap (big-endian, no leading zero bytes), the
``data`` field of a ``RangeAllocation``; bit ``i`` of the integer is offset
``i``.

Dynamic allocation is upstream's random scan with an offset: offsets below
``reserved`` are a band kept for values users ask for by number (the
``kubernetes`` Service's first IP, static node ports); a random free offset
is taken from the upper band first and from the lower band only when the
upper one is full.
"""
from __future__ import annotations

import random
import re
from typing import Iterator, Optional

_NOT_FULL = re.compile(b"[^\xff]")


class AllocationBitmap:
    def __init__(self, size: int, reserved: int = 0) -> None:
        if size < 0:
            raise ValueError("size must not be negative")
        self.size = size
        self.reserved = reserved if 0 <= reserved < size else 0
        # little-endian: byte k holds offsets 8k..8k+7, lowest bit first
        self._bits = bytearray((size + 7) // 8)
        self.count = 0

    # ------------------------------------------------------------ snapshots

    @classmethod
    def from_snapshot(cls, size: int, reserved: int, data: bytes) -> "AllocationBitmap":
        """A bitmap from upstream's stored bytes; bits beyond ``size`` are dropped."""
        bitmap = cls(size, reserved)
        value = int.from_bytes(data, "big") & ((1 << size) - 1) if size else 0
        bitmap._bits = bytearray(value.to_bytes(len(bitmap._bits), "little"))
        bitmap.count = value.bit_count()
        return bitmap

    def snapshot(self) -> bytes:
        """The bitmap as Go's ``big.Int.Bytes()``: big-endian, no leading zeros."""
        value = int.from_bytes(self._bits, "little")
        return value.to_bytes((value.bit_length() + 7) // 8, "big")

    def copy(self) -> "AllocationBitmap":
        other = AllocationBitmap(self.size, self.reserved)
        other._bits = bytearray(self._bits)
        other.count = self.count
        return other

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AllocationBitmap) and self.size == other.size and self._bits == other._bits

    # ------------------------------------------------------------ queries

    def has(self, offset: int) -> bool:
        if not 0 <= offset < self.size:
            return False
        return bool(self._bits[offset >> 3] & (1 << (offset & 7)))

    @property
    def free(self) -> int:
        return self.size - self.count

    def offsets(self) -> Iterator[int]:
        """Every allocated offset, ascending."""
        for index, byte in enumerate(self._bits):
            if byte:
                for bit in range(8):
                    if byte & (1 << bit):
                        yield index * 8 + bit

    # ------------------------------------------------------------ changes

    def allocate(self, offset: int) -> bool:
        """Take ``offset``; False when it was taken already."""
        if not 0 <= offset < self.size:
            raise ValueError(f"offset {offset} out of range [0,{self.size}]")
        if self.has(offset):
            return False
        self._bits[offset >> 3] |= 1 << (offset & 7)
        self.count += 1
        return True

    def release(self, offset: int) -> None:
        if self.has(offset):
            self._bits[offset >> 3] &= ~(1 << (offset & 7)) & 0xFF
            self.count -= 1

    def allocate_next(self, rng: Optional[random.Random] = None) -> Optional[int]:
        """Take a random free offset (upper band first); None when the range is full."""
        if self.count >= self.size:
            return None
        randrange = rng.randrange if rng else random.randrange
        for low, high in ((self.reserved, self.size), (0, self.reserved)):
            if high <= low:
                continue
            start = low + randrange(high - low)
            found = self._first_free(start, high)
            if found is None:
                found = self._first_free(low, start)
            if found is not None:
                self.allocate(found)
                return found
        return None

    def _first_free(self, low: int, high: int) -> Optional[int]:
        """The lowest free offset in ``[low, high)``: bytes that are all ones are skipped in C."""
        offset = low
        while offset < high:
            if offset & 7 == 0:
                match = _NOT_FULL.search(self._bits, offset >> 3, (high + 7) >> 3)
                if match is None:
                    return None
                offset = max(offset, match.start() * 8)
                if offset >= high:
                    return None
            if not self._bits[offset >> 3] & (1 << (offset & 7)):
                return offset
            offset += 1
        return None
