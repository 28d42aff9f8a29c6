"""Shuffle sharding: a flow's hash picks a hand of queues (upstream's util/shufflesharding)."""
from __future__ import annotations

import math

MAX_HASH_BITS = 60
# hands remembered per dealer: a flow (flow schema + user or namespace) keeps its hash,
# so the same few hands are dealt again and again
HANDS_REMEMBERED = 4096


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    return int(math.ceil(math.log2(deck_size) * hand_size))


class Dealer:
    """Deals ``hand_size`` distinct cards out of ``deck_size`` from a 64-bit hash, as upstream does."""

    def __init__(self, deck_size: int, hand_size: int) -> None:
        if deck_size <= 0 or hand_size <= 0:
            raise ValueError(f"deckSize {deck_size} or handSize {hand_size} is not positive")
        if hand_size > deck_size:
            raise ValueError(f"handSize {hand_size} is greater than deckSize {deck_size}")
        if deck_size > 1 << 26:
            raise ValueError(f"deckSize {deck_size} is impractically large")
        if required_entropy_bits(deck_size, hand_size) > MAX_HASH_BITS:
            raise ValueError(f"required entropy bits of deckSize {deck_size} and handSize {hand_size} is greater "
                             f"than {MAX_HASH_BITS}")
        self.deck_size = deck_size
        self.hand_size = hand_size
        self._hands: dict[int, tuple[int, ...]] = {}

    def deal(self, hash_value: int) -> tuple[int, ...]:
        hand = self._hands.get(hash_value)
        if hand is None:
            if len(self._hands) >= HANDS_REMEMBERED:
                self._hands.clear()
            hand = self._hands[hash_value] = tuple(self._deal(hash_value))
        return hand

    def _deal(self, hash_value: int) -> list[int]:
        remainders = []
        for i in range(self.hand_size):
            hash_value, remainder = divmod(hash_value, self.deck_size - i)
            remainders.append(remainder)
        hand = []
        for i in range(self.hand_size):
            card = remainders[i]
            for j in range(i, 0, -1):
                if card >= remainders[j - 1]:
                    card += 1
            hand.append(card)
        return hand
