"""What a started server has not loaded yet: parts paid for on first use only.

Each of these costs idle memory and start time in every process (RE2 with its
C++ runtime about 2.4 MiB resident, the CEL function library 0.9 MiB, the
policy type checker 0.5 MiB, the connect subresources' streaming code 1.6 MiB)
and is needed only once a client sends a schema pattern, a CEL rule or a
ValidatingAdmissionPolicy, or connects to a pod, node, service or extension
API server (logs, exec, attach, port-forward, proxy).  The server is started in
a fresh interpreter, as twistd would, so nothing another test imported counts.
"""
from __future__ import annotations

import json
import subprocess
import sys

from twisted.trial import unittest

from kapiserver.testing.process import REPO_ROOT, child_env

LOADED_ON_FIRST_USE = (
    "re2",
    "kapiserver.cel.library",
    "kapiserver.machinery.cel_runtime",
    "kapiserver.admission.policy.typecheck",
    "kapiserver.endpoints.streaming.connector",
    "kapiserver.endpoints.streaming.splice",
    "kapiserver.endpoints.streaming.relay",
    "kapiserver.machinery.httpstream",
    "kapiserver.machinery.go_html",
)

_SCRIPT = """
import json, sys
from twisted.internet import defer, task
from kapiserver.testing.apiserver import start_api_server

async def main(reactor):
    server = await start_api_server(authorization_modes=["RBAC"])
    loaded = [name for name in sys.argv[1:] if name in sys.modules]
    await server.stop()
    print(json.dumps(loaded))

task.react(lambda reactor: defer.Deferred.fromCoroutine(main(reactor)))
"""


class StartFootprintTests(unittest.TestCase):
    def test_a_started_server_has_not_loaded_what_only_some_requests_need(self) -> None:
        done = subprocess.run([sys.executable, "-c", _SCRIPT, *LOADED_ON_FIRST_USE], cwd=REPO_ROOT,
                              env=child_env(), capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        self.assertEqual(json.loads(done.stdout.strip().splitlines()[-1]), [])
