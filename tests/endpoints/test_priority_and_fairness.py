"""API Priority and Fairness in a real server: classification, queuing, 429s, dumps, configuration objects."""
from __future__ import annotations

import datetime
import socket

from twisted.internet import defer, reactor, task

from kapiserver.flowcontrol import bootstrap
from kapiserver.testing.cases import ServerTestCase, run

FC = "/apis/flowcontrol.apiserver.k8s.io/v1"
FS = FC + "/flowschemas"
PL = FC + "/prioritylevelconfigurations"
CM = "/api/v1/namespaces/default/configmaps"
DEBUG = "/debug/api_priority_and_fairness"
TABLE = "application/json;as=Table;g=meta.k8s.io;v=v1"
TOO_MANY = b"Too many requests, please try again later.\n"
# the dump prints the server's time.time() to the microsecond, rounded to the nearest
ROUNDING = datetime.timedelta(microseconds=1)


def as_user(name: str, *groups: str) -> dict:
    headers = {"Impersonate-User": name}
    if groups:
        headers["Impersonate-Group"] = groups[0]  # the client sends one value per header name
    return headers


def level(name: str, shares: int, queues: int = 0, hand: int = 0, length: int = 0) -> dict:
    response: dict = {"type": "Reject"}
    if queues:
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}}
    return {"apiVersion": bootstrap.API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": {"name": name},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "limitResponse": response}}}


def schema(name: str, level_name: str, user: str, precedence: int = 100) -> dict:
    return {"apiVersion": bootstrap.API_VERSION, "kind": "FlowSchema", "metadata": {"name": name},
            "spec": {"priorityLevelConfiguration": {"name": level_name}, "matchingPrecedence": precedence,
                     "distinguisherMethod": {"type": "ByUser"},
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                   "namespaces": ["*"], "clusterScope": True}]}]}}


class APFTestCase(ServerTestCase):
    async def uids(self, fs_name: str, pl_name: str) -> tuple[str, str]:
        fs = await self.client.get(f"{FS}/{fs_name}")
        pl = await self.client.get(f"{PL}/{pl_name}")
        return fs.body["metadata"]["uid"], pl.body["metadata"]["uid"]

    async def configure(self, *objects: dict) -> None:
        """Create the objects and wait until the filter uses them."""
        for obj in objects:
            path = FS if obj["kind"] == "FlowSchema" else PL
            self.assertEqual((await self.client.post(path, obj)).code, 201)
        controller = self.server.api.flow_control
        names = {o["metadata"]["name"] for o in objects}

        async def digested():
            await task.deferLater(reactor, 0.02, lambda: None)
            known = set(controller.levels) | {fs["metadata"]["name"] for fs in controller.flow_schemas}
            return names <= known
        await self.wait_for(digested)

    async def dump(self, which: str, query: str = "") -> list[list[str]]:
        r = await self.client.get(f"{DEBUG}/{which}{query}")
        self.assertEqual(r.code, 200, r.raw)
        self.assertEqual(r.header("content-type"), "text/plain; charset=utf-8")
        return [[cell.strip() for cell in line.split(",")] for line in r.raw.decode().splitlines()]


class ClassificationTests(APFTestCase):
    @run
    async def test_headers_name_the_flow_schema_and_priority_level(self):
        await self.wait_for(lambda: self.client.get(f"{FS}/global-default").addCallback(lambda r: r.code == 200))
        cases = [
            ({}, "/api/v1/namespaces", "global-default", "global-default"),  # anonymous
            (as_user("alice"), "/api/v1/namespaces", "global-default", "global-default"),
            (as_user("root", "system:masters"), "/api/v1/namespaces", "exempt", "exempt"),
            (as_user("system:serviceaccount:team:bot", "system:serviceaccounts"), CM, "service-accounts",
             "workload-low"),
            ({}, "/readyz", "probes", "exempt"),
            ({}, "/livez", "probes", "exempt"),
        ]
        for headers, path, fs_name, pl_name in cases:
            r = await self.client.get(path, headers=headers)
            self.assertEqual(r.code, 200, (path, r.raw))
            self.assertEqual((r.header("X-Kubernetes-PF-FlowSchema-UID"), r.header("X-Kubernetes-PF-PriorityLevel-UID")),
                             await self.uids(fs_name, pl_name), (headers, path))

    @run
    async def test_kubectl_columns_of_the_bootstrap_objects(self):
        await self.wait_for(lambda: self.client.get(f"{FS}/probes").addCallback(lambda r: r.code == 200))
        r = await self.client.get(FS, headers={"Accept": TABLE})
        self.assertEqual([c["name"] for c in r.body["columnDefinitions"]],
                         ["Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age", "MissingPL"])
        rows = [row["cells"][:4] for row in r.body["rows"]]
        self.assertEqual(rows[:3], [["exempt", "exempt", 1, "<none>"], ["probes", "exempt", 2, "<none>"],
                                    ["system-leader-election", "leader-election", 100, "ByUser"]])
        self.assertEqual(rows[-2:], [["global-default", "global-default", 9900, "ByUser"],
                                     ["catch-all", "catch-all", 10000, "ByUser"]])
        r = await self.client.get(PL, headers={"Accept": TABLE})
        self.assertEqual([c["name"] for c in r.body["columnDefinitions"]],
                         ["Name", "Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit", "Age"])
        rows = {row["cells"][0]: row["cells"][1:6] for row in r.body["rows"]}
        self.assertEqual(rows["exempt"], ["Exempt", "<none>", "<none>", "<none>", "<none>"])
        self.assertEqual(rows["catch-all"], ["Limited", 5, "<none>", "<none>", "<none>"])
        self.assertEqual(rows["global-default"], ["Limited", 20, 128, 6, 50])
        self.assertEqual(len(rows), 8)
        # every bootstrap object carries the auto-update annotation; the Dangling condition is written
        fs = await self.wait_for(lambda: self.client.get(f"{FS}/global-default").addCallback(
            lambda r: r.body.get("status", {}).get("conditions") and r.body))
        self.assertEqual(fs["metadata"]["annotations"], {bootstrap.AUTO_UPDATE_ANNOTATION: "true"})
        self.assertEqual(fs["status"]["conditions"][0]["type"], "Dangling")
        self.assertEqual(fs["status"]["conditions"][0]["status"], "False")
        self.assertEqual(fs["status"]["conditions"][0]["reason"], "Found")


class QueuingTests(APFTestCase):
    """(A request's wait in its queue, a fake-clock step, is in test_chain_in_memory.)"""

    settings = {"request_timeout_seconds": 4}  # a request waits in its queue at most a second

    @run
    async def test_429_with_retry_after_when_the_queues_are_full(self):
        # 1 share of 246: ceil(600 / 246) = 3 seats, one queue of one request
        await self.configure(level("tiny", 1, queues=1, hand=1, length=1), schema("tiny", "tiny", "flooder"))
        uids = await self.uids("tiny", "tiny")
        held = self.hold_lists()
        sent = datetime.datetime.now(datetime.timezone.utc)
        lists = [self.client.get(CM, headers=as_user("flooder")) for _ in range(4)]
        await task.deferLater(reactor, 0.2, lambda: None)
        rejected = await self.client.get(CM, headers=as_user("flooder"))
        self.assertEqual(rejected.code, 429)
        self.assertEqual(rejected.raw, TOO_MANY)
        self.assertEqual(rejected.header("x-content-type-options"), "nosniff")
        self.assertEqual(rejected.header("content-type"), "text/plain; charset=utf-8")
        self.assertEqual(rejected.header("retry-after"), "1")
        self.assertEqual((rejected.header("X-Kubernetes-PF-FlowSchema-UID"),
                          rejected.header("X-Kubernetes-PF-PriorityLevel-UID")), uids)
        # someone else is not held up by the flooder's level
        other = await self.client.get(CM + "/missing", headers=as_user("bystander"))
        self.assertEqual(other.code, 404)
        levels = {row[0]: row for row in await self.dump("dump_priority_levels")}
        self.assertEqual(levels["PriorityLevelName"][1:], ["ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests",
                                                          "ExecutingRequests", "DispatchedRequests",
                                                          "RejectedRequests", "TimedoutRequests", "CancelledRequests"])
        self.assertEqual(levels["tiny"][1:], ["1", "false", "false", "1", "3", "3", "1", "0", "0"])
        requests = await self.dump("dump_requests", "?includeRequestDetails=1")
        tiny = [row for row in requests if row[0] == "tiny"]
        self.assertEqual(sorted((row[2], row[3]) for row in tiny), [("0", "-1")] * 3 + [("0", "0")])
        # (with a single queue there is no flow to tell apart: no distinguisher, as upstream)
        self.assertEqual({(row[1], row[4], row[10], row[11], row[12]) for row in tiny},
                         {("tiny", "", "flooder", "list", CM)})
        # arrival and start in UTC as Go prints them (the arrival after the lists were sent, before
        # now); the waiting request has not started (Go's zero time)
        now = datetime.datetime.now(datetime.timezone.utc)
        for row in tiny:
            arrived = datetime.datetime.fromisoformat(row[5])
            self.assertTrue(sent - ROUNDING <= arrived <= now, (sent, row))
            if row[3] == "0":
                self.assertEqual(row[9], "0001-01-01T00:00:00Z")
            else:
                self.assertGreaterEqual(datetime.datetime.fromisoformat(row[9]), arrived)
        queues = [row for row in await self.dump("dump_queues") if row[0] == "tiny"]
        self.assertEqual([row[1:6] for row in queues], [["0", "1", "3", "3", queues[0][5]]])
        self.assertTrue(queues[0][5].endswith("ss"))
        metrics = (await self.client.get("/metrics")).raw.decode()
        self.assertIn('apiserver_flowcontrol_rejected_requests_total{flow_schema="tiny",priority_level="tiny",'
                      'reason="queue-full"} 1.0', metrics)
        self.assertIn('apiserver_flowcontrol_current_inqueue_requests{flow_schema="tiny",priority_level="tiny"} 1.0',
                      metrics)
        self.assertIn('apiserver_flowcontrol_nominal_limit_seats{priority_level="tiny"} 3.0', metrics)
        held.release()
        self.assertEqual([r.code for r in await defer.gatherResults(lists)], [200] * 4)

    @run
    async def test_reject_level_and_an_exempt_user_beside_it(self):
        await self.configure(level("strict", 1), schema("strict", "strict", "flooder"))
        held = self.hold_lists()
        running = [self.client.get(CM, headers=as_user("flooder")) for _ in range(3)]
        await task.deferLater(reactor, 0.1, lambda: None)
        self.assertEqual((await self.client.get(CM, headers=as_user("flooder"))).code, 429)
        self.assertEqual((await self.client.get(CM + "/x", headers=as_user("root", "system:masters"))).code, 404)
        held.release()
        await defer.gatherResults(running)
        self.assertEqual((await self.client.get(CM, headers=as_user("flooder"))).code, 200)

    @run
    async def test_a_watch_gives_its_seat_back_once_initialized(self):
        await self.configure(level("tiny", 1, queues=1, hand=1, length=1), schema("tiny", "tiny", "watcher"))
        port = int(self.server.url.rsplit(":", 1)[1])
        heads = []
        for _ in range(5):  # more watches than the level's three seats, open one after the other
            sock = socket.create_connection(("127.0.0.1", port))
            self.addCleanup(sock.close)
            sock.sendall(b"GET " + CM.encode() + b"?watch=true HTTP/1.1\r\nHost: x\r\n"
                         b"Impersonate-User: watcher\r\n\r\n")
            sock.setblocking(False)
            head = b""
            for _ in range(100):  # until its initial events are there
                try:
                    head += sock.recv(65536)
                except BlockingIOError:
                    await task.deferLater(reactor, 0.02, lambda: None)
                if b"kube-root-ca.crt" in head:
                    break
            heads.append(head)
        self.assertTrue(all(h.startswith(b"HTTP/1.1 200") for h in heads), heads)
        self.assertTrue(all(b"X-Kubernetes-Pf-Flowschema-Uid" in h or b"x-kubernetes-pf-flowschema-uid" in h.lower()
                            for h in heads))
        levels = {row[0]: row for row in await self.dump("dump_priority_levels")}
        self.assertEqual(levels["tiny"][5:8], ["0", "5", "0"])  # none executing, five dispatched, none rejected


class ConfigurationObjectTests(APFTestCase):
    @run
    async def test_a_schema_of_a_missing_level_is_dangling(self):
        r = await self.client.post(FS, schema("lost", "nowhere", "someone"))
        self.assertEqual(r.code, 201)
        self.assertEqual(r.body["status"], {})
        lost = await self.wait_for(lambda: self.client.get(f"{FS}/lost").addCallback(
            lambda r: r.body["status"].get("conditions") and r.body))
        self.assertEqual(lost["status"]["conditions"][0]["status"], "True")
        self.assertEqual(lost["status"]["conditions"][0]["message"],
                         'This FlowSchema references the PriorityLevelConfiguration object named "nowhere" but there '
                         'is no such object')
        rows = {row["cells"][0]: row["cells"] for row in (await self.client.get(FS, headers={"Accept": TABLE})).body[
            "rows"]}
        self.assertEqual(rows["lost"][5], "True")
        self.assertEqual((await self.client.post(PL, level("nowhere", 5))).code, 201)
        found = await self.wait_for(lambda: self.client.get(f"{FS}/lost").addCallback(
            lambda r: r.body["status"]["conditions"][0]["status"] == "False" and r.body))
        self.assertEqual(found["status"]["conditions"][0]["reason"], "Found")

    @run
    async def test_validation_as_upstream(self):
        await self.wait_for(lambda: self.client.get(f"{PL}/exempt").addCallback(lambda r: r.code == 200))
        bad = level("bad", -1, queues=2, hand=3, length=-1)
        r = await self.client.post(PL, bad)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"],
                         'PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io "bad" is invalid: ['
                         'spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer, '
                         'spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: -1: must be positive, '
                         'spec.limited.limitResponse.queuing.handSize: Invalid value: 3: should not be greater than '
                         'queues (2)]')
        bad = schema("bad", "x", "u", precedence=1)
        bad["spec"]["distinguisherMethod"] = {"type": "ByColour"}
        r = await self.client.post(FS, bad)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["message"],
                         'FlowSchema.flowcontrol.apiserver.k8s.io "bad" is invalid: ['
                         'spec.matchingPrecedence: Invalid value: 1: only the schema named \'exempt\' may have '
                         'matchingPrecedence 1, spec.distinguisherMethod.type: Unsupported value: '
                         '&flowcontrol.FlowDistinguisherMethod{Type:"ByColour"}: supported values: "ByNamespace", '
                         '"ByUser"]')
        # the mandatory objects keep their spec (exempt may change its spec.exempt)
        exempt = (await self.client.get(f"{PL}/exempt")).body
        exempt["spec"]["exempt"]["nominalConcurrencyShares"] = 3
        self.assertEqual((await self.client.put(f"{PL}/exempt", exempt)).code, 200)
        catch_all = (await self.client.get(f"{PL}/catch-all")).body
        catch_all["spec"]["limited"]["nominalConcurrencyShares"] = 50
        r = await self.client.put(f"{PL}/catch-all", catch_all)
        self.assertEqual(r.code, 422)
        self.assertIn("spec of 'catch-all' must equal the fixed value", r.body["message"])

    @run
    async def test_bootstrap_objects_are_kept_as_upstream_keeps_them(self):
        ensurer = self.server.api.controllers.apf_bootstrap
        await self.wait_for(lambda: defer.succeed(ensurer.ensured))
        fs = (await self.client.get(f"{FS}/global-default")).body
        fs["spec"]["matchingPrecedence"] = 9000
        self.assertEqual((await self.client.put(f"{FS}/global-default", fs)).code, 200)
        workload = (await self.client.get(f"{FS}/service-accounts")).body
        workload["spec"]["matchingPrecedence"] = 8000
        workload["metadata"]["annotations"][bootstrap.AUTO_UPDATE_ANNOTATION] = "false"
        self.assertEqual((await self.client.put(f"{FS}/service-accounts", workload)).code, 200)
        self.assertEqual((await self.client.delete(f"{FS}/exempt")).code, 200)
        mine = level("leftover", 1)
        mine["metadata"]["annotations"] = {bootstrap.AUTO_UPDATE_ANNOTATION: "true"}
        self.assertEqual((await self.client.post(PL, mine)).code, 201)
        await ensurer.ensure()
        self.assertEqual((await self.client.get(f"{FS}/global-default")).body["spec"]["matchingPrecedence"], 9900)
        self.assertEqual((await self.client.get(f"{FS}/service-accounts")).body["spec"]["matchingPrecedence"], 8000)
        self.assertEqual((await self.client.get(f"{FS}/exempt")).code, 200)
        self.assertEqual((await self.client.get(f"{PL}/leftover")).code, 404)
        # without the annotation: kept at the bootstrap spec only while never changed (generation 1)
        self.assertEqual(
            (await self.client.get(f"{FS}/global-default")).body["metadata"]["annotations"],
            {bootstrap.AUTO_UPDATE_ANNOTATION: "true"})


class DisabledTests(ServerTestCase):
    settings = {"enable_priority_and_fairness": False}

    @run
    async def test_max_in_flight_instead(self):
        r = await self.client.get(CM)
        self.assertEqual(r.code, 200)
        self.assertIsNone(r.header("X-Kubernetes-PF-FlowSchema-UID"))
        self.assertEqual((await self.client.get(f"{DEBUG}/dump_priority_levels")).code, 404)
        # the configuration objects are still served and kept
        await self.wait_for(lambda: self.client.get(f"{FS}/exempt").addCallback(lambda r: r.code == 200))
