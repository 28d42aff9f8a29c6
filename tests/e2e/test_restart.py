"""A restart on the same data: the bootstrap work it repeats writes nothing that is already right."""
from __future__ import annotations

import json
import time

from twisted.trial import unittest

from kapiserver.testing.process import ServerProcess

# What the server creates or reconciles at every start.  Not: Leases, renewed by design, and
# the kubernetes Service's endpoints, which a server leaves when it stops and rejoins when it
# starts (upstream's lease reconciler).
KINDS = ("clusterroles,clusterrolebindings,roles,rolebindings,flowschemas,prioritylevelconfigurations,"
         "namespaces,apiservices,services,serviceaccounts,configmaps")


class RestartTests(unittest.TestCase):
    def resource_versions(self, server: ServerProcess) -> dict[str, str]:
        items = json.loads(server.kubectl("get", KINDS, "-A", "-o", "json").stdout)["items"]
        return {f"{i['kind']}/{i['metadata'].get('namespace', '')}/{i['metadata']['name']}":
                i["metadata"]["resourceVersion"] for i in items}

    def wait_for_dangling_conditions(self, server: ServerProcess) -> None:
        """The flow schemas' status is written once the APF controller has digested them."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            schemas = json.loads(server.kubectl("get", "flowschemas", "-o", "json").stdout)["items"]
            if schemas and all((s.get("status") or {}).get("conditions") for s in schemas):
                return
            time.sleep(0.2)
        self.fail("the flow schemas got no Dangling condition")

    def test_a_restart_rewrites_none_of_the_bootstrap_objects(self) -> None:
        server = ServerProcess().start()
        self.addCleanup(server.cleanup)
        self.wait_for_dangling_conditions(server)
        before = self.resource_versions(server)
        self.assertGreater(len(before), 100)
        server.stop()

        restarted = ServerProcess(workdir=server.workdir).start()
        self.addCleanup(restarted.stop)
        time.sleep(2)  # the controllers' first passes (APF digests once both of its kinds are listed)
        after = self.resource_versions(restarted)
        self.assertEqual(sorted(after), sorted(before))
        self.assertEqual({k: v for k, v in after.items() if before[k] != v}, {})
