"""new_uid: the UUIDs objects and requests are given are random RFC 4122 version 4 UUIDs."""
from __future__ import annotations

import uuid

from twisted.trial import unittest

from kapiserver.machinery.meta import new_uid


class NewUIDTests(unittest.TestCase):
    def test_random_version_4_uuids_in_canonical_form(self):
        seen = set()
        for _ in range(2000):
            text = new_uid()
            parsed = uuid.UUID(text)
            self.assertEqual((parsed.version, parsed.variant, str(parsed)), (4, uuid.RFC_4122, text))
            seen.add(text)
        self.assertEqual(len(seen), 2000)
        # every variant digit occurs (the variant bits are set, the others stay random)
        self.assertEqual({u[19] for u in seen}, set("89ab"))
