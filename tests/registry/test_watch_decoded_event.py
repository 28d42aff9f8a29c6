"""The decoded event the selector watchers of a store share is kept for its reactor turn only:
a large object's decoded form is not held until the next event."""
from twisted.internet.task import Clock
from twisted.trial import unittest

from kapiserver.registry.watch import _DecodedEvent


class DecodedEventTests(unittest.TestCase):
    def test_kept_for_the_turn_that_hands_it_out(self):
        clock, slot = Clock(), ("store", "/pods/ns/p", 7, "PUT")
        decoded = _DecodedEvent()
        objects = ({"metadata": {"name": "p"}}, None)
        decoded.put(slot, objects, clock)
        self.assertIs(decoded.get(slot), objects)
        self.assertIsNone(decoded.get(("store", "/pods/ns/p", 8, "PUT")))  # another event
        clock.advance(0)
        self.assertIsNone(decoded.get(slot))
        self.assertEqual(decoded.objects, ({}, None))  # nothing of the object is held
