"""``shared_server``: one process per name, and every test asking for a name asks for the same server."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.testing import process
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, shared_server


class SharedServerArgumentsTests(unittest.TestCase):
    def setUp(self) -> None:
        # a server that was never started stands in: the arguments are checked before any start
        self.name = "argument-check"
        self.server = ServerProcess(extra_config=E2E_CONFIG)
        process._shared[self.name] = (self.server, {"extra_config": E2E_CONFIG})
        self.addCleanup(process._shared.pop, self.name, None)
        self.addCleanup(self.server.cleanup)

    def test_other_arguments_for_a_started_name_are_refused(self) -> None:
        # (the bug this guards: one test took the default server without its fast compaction, and
        # whether another test then waited in vain for a 410 depended on which ran first)
        with self.assertRaises(ValueError) as ctx:
            shared_server(self.name)
        self.assertIn("argument-check", str(ctx.exception))
        self.assertIn("compaction_interval_seconds", str(ctx.exception))
