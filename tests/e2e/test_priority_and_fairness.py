"""API Priority and Fairness end to end: a real server, users with client certificates, kubectl.

One noisy user floods LISTs; another user's GETs keep succeeding meanwhile (never
refused), the noisy one gets 429s, /readyz keeps answering from the exempt level.
"""
from __future__ import annotations

import http.client
import json
import os
import ssl
import threading
import time
from twisted.trial import unittest

from kapiserver.server.certs import issue_client_certificate
from kapiserver.testing.cases import HANG_GUARD, wait_for
from kapiserver.testing.process import ServerProcess, shared_server

NS = "/api/v1/namespaces/default"
GETS = 20  # the quiet user's GETs (and the health probes) while the noisy user floods
TENANTS = "tenants"
PRIORITY_LEVEL = """
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: tenants}
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 10
    limitResponse:
      type: Queue
      queuing: {queues: 64, handSize: 4, queueLengthLimit: 2}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: tenants}
spec:
  priorityLevelConfiguration: {name: tenants}
  matchingPrecedence: 500
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects: [{kind: Group, group: {name: tenants}}]
    resourceRules:
    - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}
---
# RBAC: the tenants may read ConfigMaps (else every request is a 403 before it queues)
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: tenants-read, namespace: default}
rules:
- {verbs: [get, list], apiGroups: [""], resources: [configmaps]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: tenants-read, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: tenants-read}
subjects: [{kind: Group, name: tenants, apiGroup: rbac.authorization.k8s.io}]
"""


_issuing = threading.Lock()


class User:
    """One keep-alive HTTPS connection authenticated by a client certificate of the cluster CA."""

    def __init__(self, server: ServerProcess, name: str, groups: tuple[str, ...] = ()) -> None:
        certs = os.path.join(server.workdir, "certs")
        base = os.path.join(server.workdir, name)
        with _issuing:
            if not os.path.exists(base + ".key"):
                cert, key = issue_client_certificate(certs, name, groups)
                with open(base + ".crt", "wb") as f:
                    f.write(cert)
                with open(base + ".key", "wb") as f:
                    f.write(key)
        self.ctx = ssl.create_default_context(cafile=os.path.join(certs, "ca.crt"))
        self.ctx.load_cert_chain(base + ".crt", base + ".key")
        self.host, port = server.server_url.removeprefix("https://").rsplit(":", 1)
        self.port = int(port)
        self.conn: http.client.HTTPSConnection | None = None

    def get(self, path: str) -> tuple[int, bytes, dict]:
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            try:
                self.conn.request("GET", path, headers={"Accept": "application/json"})
                response = self.conn.getresponse()
                return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


class PriorityAndFairnessTests(unittest.TestCase):
    def setUp(self) -> None:
        # 20 + 10 seats for the whole server; the tenants level gets ceil(30 * 10 / 255) = 2
        self.server = shared_server("priority-and-fairness", extra_config={"log_level": "warn", "limits": {
            "max_requests_inflight": 20, "max_mutating_requests_inflight": 10}})

    def kubectl(self, *args: str, **kw) -> str:
        return self.server.kubectl(*args, **kw).stdout

    def wait_for_bootstrap(self) -> None:
        deadline = time.monotonic() + HANG_GUARD
        while time.monotonic() < deadline:
            out = self.kubectl("get", "flowschemas", "-o", "name", check=False)
            if "flowschema.flowcontrol.apiserver.k8s.io/global-default" in out:
                return
            time.sleep(0.2)
        self.fail("the bootstrap flow schemas did not appear")

    def test_kubectl_shows_upstreams_columns(self):
        self.wait_for_bootstrap()
        out = self.kubectl("get", "flowschemas,prioritylevelconfigurations")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "PRIORITYLEVEL", "MATCHINGPRECEDENCE", "DISTINGUISHERMETHOD",
                                            "AGE", "MISSINGPL"])
        self.assertEqual(lines[1].split()[:4], ["flowschema.flowcontrol.apiserver.k8s.io/exempt", "exempt", "1",
                                                "<none>"])
        header = next(line for line in lines[1:] if line.startswith("NAME"))
        self.assertEqual(header.split(), ["NAME", "TYPE", "NOMINALCONCURRENCYSHARES", "QUEUES", "HANDSIZE",
                                          "QUEUELENGTHLIMIT", "AGE"])
        global_default = next(line for line in lines if "prioritylevelconfiguration" in line and "global-default"
                              in line)
        self.assertEqual(global_default.split()[1:6], ["Limited", "20", "128", "6", "50"])
        described = self.kubectl("get", "flowschema", "catch-all", "-o", "json")
        self.assertEqual(json.loads(described)["spec"]["matchingPrecedence"], 10000)

    def test_a_noisy_user_does_not_starve_another(self):
        self.wait_for_bootstrap()
        self.kubectl("apply", "-f", "-", input=PRIORITY_LEVEL)
        admin = User(self.server, "setup", ("system:masters",))
        for i in range(150):  # about a megabyte to list
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"bulk-{i:03}"},
                               "data": {"blob": "x" * 6000}})
            admin.conn = admin.conn or http.client.HTTPSConnection(admin.host, admin.port, context=admin.ctx)
            admin.conn.request("POST", NS + "/configmaps", body=body, headers={"Content-Type": "application/json"})
            response = admin.conn.getresponse()
            response.read()
            self.assertIn(response.status, (201, 409))
        fs_uid = json.loads(self.kubectl("get", "flowschema", TENANTS, "-o", "json"))["metadata"]["uid"]
        exempt_uid = json.loads(self.kubectl("get", "prioritylevelconfiguration", "exempt", "-o", "json"))[
            "metadata"]["uid"]
        quiet_user = User(self.server, "quiet", (TENANTS,))
        # the filter has read the new configuration once the tenants' requests are classified by it
        wait_for(lambda: quiet_user.get(NS + "/configmaps/bulk-007")[2].get("x-kubernetes-pf-flowschema-uid")
                 == fs_uid, timeout=HANG_GUARD, interval=0.1)
        noisy_statuses: list[int] = []
        quiet: list[tuple[int, dict]] = []
        probes: list[tuple[int, dict]] = []
        noisy_answers_meanwhile: list[int] = []  # the noisy user's answers while the quiet one asked
        flooded = threading.Event()  # the noisy user's queues are full: it was refused
        stop = threading.Event()

        def flood() -> None:
            user = User(self.server, "noisy", (TENANTS,))
            while not stop.is_set():
                status, _, _ = user.get(NS + "/configmaps")
                noisy_statuses.append(status)
                if status == 429:
                    flooded.set()

        def polite() -> None:
            if not flooded.wait(HANG_GUARD):
                return
            first = len(noisy_statuses)
            for _ in range(GETS):
                status, _, headers = quiet_user.get(NS + "/configmaps/bulk-007")
                quiet.append((status, headers))
                time.sleep(0.05)
            noisy_answers_meanwhile.extend(noisy_statuses[first:])

        def probe() -> None:
            user = User(self.server, "monitor", ())
            if not flooded.wait(HANG_GUARD):
                return
            for _ in range(GETS):
                status, _, headers = user.get("/readyz")
                probes.append((status, headers))
                time.sleep(0.05)

        floods = [threading.Thread(target=flood) for _ in range(24)]
        asking = [threading.Thread(target=polite), threading.Thread(target=probe)]
        for t in floods + asking:
            t.start()
        for t in asking:
            t.join(HANG_GUARD)
        stop.set()
        for t in floods:
            t.join(HANG_GUARD)
        # the noisy user was limited: some LISTs answered 429 (its queues are full), the others 200,
        # and it kept being refused while the quiet user asked
        self.assertTrue(flooded.is_set(), "the noisy user was never refused")
        self.assertEqual(set(noisy_statuses), {200, 429})
        self.assertIn(429, noisy_answers_meanwhile)
        # the quiet user's GETs all succeeded, classified into the same level: never queued out
        self.assertEqual(len(quiet), GETS)
        self.assertEqual({status for status, _ in quiet}, {200})
        self.assertEqual({h.get("x-kubernetes-pf-flowschema-uid") for _, h in quiet}, {fs_uid})
        # health probes are exempt: they never queue behind the lists
        self.assertEqual(len(probes), GETS)
        self.assertEqual({status for status, _ in probes}, {200})
        self.assertEqual({h.get("x-kubernetes-pf-prioritylevel-uid") for _, h in probes}, {exempt_uid})
        print(f"noisy: {noisy_statuses.count(200)} x 200, {noisy_statuses.count(429)} x 429; quiet: {len(quiet)} "
              f"GETs; readyz: {len(probes)}")

