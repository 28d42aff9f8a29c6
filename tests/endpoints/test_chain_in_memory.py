"""The whole server in memory (StubTreq, no port): the delegation chain, the filters' order,
request deadlines and flow control as fake-clock steps, as a user sees them."""
from __future__ import annotations

import json
import os
from typing import Any, Callable

from twisted.internet import defer

from kapiserver.flowcontrol import bootstrap
from kapiserver.testing.cases import HANG_GUARD, InMemoryServerTestCase, run, sleep
from kapiserver.testing.client import Reply

CM = "/api/v1/namespaces/default/configmaps"
FC = "/apis/flowcontrol.apiserver.k8s.io/v1"
TOO_MANY = b"Too many requests, please try again later.\n"


async def until(case: InMemoryServerTestCase, check: Callable[[], bool]) -> None:
    """Let the real reactor turn (storage threads, informers) until ``check`` holds."""
    await case.wait_for(lambda: defer.succeed(check()), HANG_GUARD)


def status(reply: Reply) -> tuple[int, str, str]:
    return reply.code, reply.body["reason"], reply.body["message"]


class DelegationChainTests(InMemoryServerTestCase):
    """aggregator → kube API → CRDs → 404: each link answers its own paths."""

    @run
    async def test_a_builtin_path_is_served_by_the_kube_api(self) -> None:
        created = await self.client.post(CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
        self.assertEqual(created.code, 201, created.body)
        got = await self.client.get(CM + "/a")
        self.assertEqual((got.code, got.body["kind"], got.body["metadata"]["uid"]),
                         (200, "ConfigMap", created.body["metadata"]["uid"]))

    @run
    async def test_a_crd_path_is_served_by_the_crd_resource(self) -> None:
        widgets = "/apis/stable.example.com/v1/namespaces/default/widgets"
        before = await self.client.get(widgets)
        self.assertEqual(before.code, 404)
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.stable.example.com"},
               "spec": {"group": "stable.example.com", "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "x-kubernetes-preserve-unknown-fields": True}}}]}}
        created = await self.client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        self.assertEqual(created.code, 201, created.body)
        await self.wait_for(lambda: self.client.get(widgets).addCallback(lambda r: r.code == 200))
        widget = await self.client.post(widgets, {"apiVersion": "stable.example.com/v1", "kind": "Widget",
                                                  "metadata": {"name": "w"}, "size": 3})
        self.assertEqual((widget.code, widget.body["kind"], widget.body["size"]), (201, "Widget", 3))
        listed = await self.client.get(widgets)
        self.assertEqual((listed.body["kind"], [i["metadata"]["name"] for i in listed.body["items"]]),
                         ("WidgetList", ["w"]))

    @run
    async def test_an_unknown_group_is_upstreams_404_status(self) -> None:
        reply = await self.client.get("/apis/nothing.example.com/v1/widgets")
        self.assertEqual(reply.code, 404)
        self.assertEqual(reply.body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": "the server could not find the requested resource",
                                      "reason": "NotFound", "details": {}, "code": 404})

    @run
    async def test_an_apiservice_path_is_delegated_to_the_aggregator_proxy(self) -> None:
        apiservice = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                      "metadata": {"name": "v1beta1.metrics.example.com"},
                      "spec": {"group": "metrics.example.com", "version": "v1beta1", "groupPriorityMinimum": 100,
                               "versionPriority": 100, "insecureSkipTLSVerify": True,
                               "service": {"namespace": "default", "name": "metrics"}}}
        created = await self.client.post("/apis/apiregistration.k8s.io/v1/apiservices", apiservice)
        self.assertEqual(created.code, 201, created.body)
        path = "/apis/metrics.example.com/v1beta1/namespaces/default/pods"
        # once routed, the proxy answers (not the kube API's 404): its Service does not exist, so
        # upstream's plain-text 503 of an unavailable APIService
        reply = await self.wait_for(lambda: self.client.get(path).addCallback(lambda r: r.code == 503 and r))
        self.assertEqual((reply.raw, reply.header("content-type")),
                         (b"service unavailable\n", "text/plain; charset=utf-8"))


TOKENS = ('admin-token,admin,1,"system:masters"\n'
          'alice-token,alice,2,"developers"\n')
POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"


class FilterOrderTests(InMemoryServerTestCase):
    """Authentication, then authorization, then admission; the audit log records what each refused."""

    def setUp(self) -> Any:
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        tokens = os.path.join(directory, "tokens.csv")
        policy = os.path.join(directory, "policy.yaml")
        with open(tokens, "w") as f:
            f.write(TOKENS)
        with open(policy, "w") as f:
            f.write(POLICY)
        self.log_path = os.path.join(directory, "audit.log")
        self.settings = {"anonymous": False, "authorization_modes": ["RBAC"], "token_auth_file": tokens,
                         "audit_policy_file": policy, "audit_log_path": self.log_path}
        return super().setUp()

    def create(self, token: str | None) -> defer.Deferred:
        # a ConfigMap in a namespace that does not exist: admission (NamespaceLifecycle) refuses it
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.client.post("/api/v1/namespaces/nowhere/configmaps",
                                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
                                headers=headers)

    async def audit_events(self, audit_id: str, stage: str) -> list[dict]:
        def found() -> list[dict]:
            try:
                with open(self.log_path) as f:
                    events = [json.loads(line) for line in f if line.strip()]
            except FileNotFoundError:
                return []
            return [e for e in events if e["auditID"] == audit_id and e["stage"] == stage]
        await until(self, lambda: bool(found()))
        return found()

    @run
    async def test_401_before_403_before_admission(self) -> None:
        anonymous = await self.create(None)
        self.assertEqual(status(anonymous), (401, "Unauthorized", "Unauthorized"))
        bad = await self.create("stolen-token")
        self.assertEqual(status(bad), (401, "Unauthorized", "Unauthorized"))
        alice = await self.create("alice-token")
        self.assertEqual(status(alice), (403, "Forbidden", 'configmaps is forbidden: User "alice" cannot create '
                                         'resource "configmaps" in API group "" in the namespace "nowhere"'))
        self.assertEqual(alice.body["details"], {"kind": "configmaps"})
        admin = await self.create("admin-token")
        self.assertEqual(status(admin), (404, "NotFound", 'namespaces "nowhere" not found'))

    @run
    async def test_the_audit_log_records_a_denial_as_response_complete_with_403(self) -> None:
        alice = await self.create("alice-token")
        self.assertEqual(alice.code, 403)
        [completed] = await self.audit_events(alice.header("Audit-Id"), "ResponseComplete")
        self.assertEqual((completed["responseStatus"]["code"], completed["responseStatus"]["reason"]),
                         (403, "Forbidden"))
        self.assertEqual(completed["user"]["username"], "alice")
        self.assertEqual(completed["annotations"]["authorization.k8s.io/decision"], "forbid")
        self.assertEqual((completed["verb"], completed["objectRef"]["resource"]), ("create", "configmaps"))


class RequestTimeoutTests(InMemoryServerTestCase):
    settings = {"request_timeout_seconds": 60}

    @run
    async def test_a_request_past_its_timeout_is_upstreams_504_when_the_clock_reaches_it(self) -> None:
        held = self.hold_lists()
        pending = self.client.get(CM + "?timeout=5s")
        await until(self, lambda: held.waiting == 1)
        self.clock.advance(4.9)
        await sleep(0.05)
        self.assertFalse(pending.called)  # not yet: the deadline is 5 s of the clock
        self.clock.advance(0.1)
        reply = await pending
        self.assertEqual(reply.code, 504)
        self.assertEqual((reply.body["kind"], reply.body["status"], reply.body["reason"], reply.body["code"]),
                         ("Status", "Failure", "Timeout", 504))
        held.release()  # the store answers late: nothing more is written, the server goes on
        again = await self.client.get(CM)
        self.assertEqual(again.code, 200)

    @run
    async def test_the_servers_timeout_applies_without_a_timeout_parameter(self) -> None:
        held = self.hold_lists()
        pending = self.client.get(CM)
        await until(self, lambda: held.waiting == 1)
        self.clock.advance(59)
        await sleep(0.05)
        self.assertFalse(pending.called)
        self.clock.advance(1)
        self.assertEqual((await pending).code, 504)


class FlowControlTests(InMemoryServerTestCase):
    settings = {"request_timeout_seconds": 4}  # a request waits in its queue at most a second

    async def configure_tiny_level(self, queues: int, hand: int, length: int) -> None:
        """The user ``flooder`` classified to a level of three seats (1 share of the server's 600)."""
        pl = {"apiVersion": bootstrap.API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": {"name": "tiny"},
              "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1, "limitResponse": {
                  "type": "Queue", "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length}}}}}
        fs = {"apiVersion": bootstrap.API_VERSION, "kind": "FlowSchema", "metadata": {"name": "tiny"},
              "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 100,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "User", "user": {"name": "flooder"}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                                     "namespaces": ["*"], "clusterScope": True}]}]}}
        self.assertEqual((await self.client.post(FC + "/prioritylevelconfigurations", pl)).code, 201)
        self.assertEqual((await self.client.post(FC + "/flowschemas", fs)).code, 201)
        controller = self.server.api.flow_control
        assert controller is not None
        await until(self, lambda: "tiny" in controller.levels
                    and "tiny" in {s["metadata"]["name"] for s in controller.flow_schemas})

    def flood(self) -> defer.Deferred:
        return self.client.get(CM, headers={"Impersonate-User": "flooder"})

    @run
    async def test_a_request_that_waits_a_quarter_of_its_timeout_in_the_queue_gets_429(self) -> None:
        await self.configure_tiny_level(queues=4, hand=2, length=10)
        held = self.hold_lists()
        running = [self.flood() for _ in range(3)]  # the level's three seats
        await until(self, lambda: held.waiting == 3)
        queued = self.flood()
        await sleep(0.05)
        self.clock.advance(0.9)
        await sleep(0.05)
        self.assertFalse(queued.called)  # still waiting for a seat
        self.clock.advance(0.1)  # a quarter of the 4 s request timeout
        rejected = await queued
        self.assertEqual((rejected.code, rejected.raw), (429, TOO_MANY))
        self.assertEqual(rejected.header("retry-after"), "1")
        self.assertEqual(rejected.header("content-type"), "text/plain; charset=utf-8")
        # someone else is not held up by the flooder's level
        self.assertEqual((await self.client.get(CM + "/missing")).code, 404)
        dump = await self.client.get("/debug/api_priority_and_fairness/dump_priority_levels")
        levels = {row[0]: row for row in ([cell.strip() for cell in line.split(",")]
                                          for line in dump.raw.decode().splitlines())}
        self.assertEqual(levels["tiny"][8:], ["0", "1"])  # not timed out but cancelled, as upstream counts it
        held.release()
        self.assertEqual([r.code for r in await defer.gatherResults(running)], [200] * 3)

    @run
    async def test_a_freed_seat_lets_the_queued_request_through_before_its_wait_ends(self) -> None:
        await self.configure_tiny_level(queues=1, hand=1, length=5)
        held = self.hold_lists()
        running = [self.flood() for _ in range(3)]
        await until(self, lambda: held.waiting == 3)
        queued = self.flood()
        await sleep(0.05)
        self.clock.advance(0.5)
        held.release()
        self.assertEqual([r.code for r in await defer.gatherResults(running + [queued])], [200] * 4)


class MaxInFlightTests(InMemoryServerTestCase):
    settings = {"enable_priority_and_fairness": False, "max_requests_inflight": 1}

    async def second_request_while_one_is_held(self) -> tuple[Reply, defer.Deferred]:
        """The answer to a request sent while another holds the only seat; the held one, released."""
        held = self.hold_lists()
        running = self.client.get(CM)
        await until(self, lambda: held.waiting == 1)
        rejected = await self.client.get(CM + "/missing")
        held.release()
        return rejected, running

    @run
    async def test_a_request_over_the_limit_is_429_with_retry_after(self) -> None:
        rejected, running = await self.second_request_while_one_is_held()
        self.assertEqual((rejected.code, rejected.header("retry-after")), (429, "1"))
        self.assertEqual((await running).code, 200)
        self.assertEqual((await self.client.get(CM + "/missing")).code, 404)  # the seat is free again

    @run
    async def test_system_masters_is_exempt(self) -> None:
        held = self.hold_lists()
        running = self.client.get(CM)
        await until(self, lambda: held.waiting == 1)
        exempt = await self.client.get(CM + "/missing", headers={"Impersonate-User": "root",
                                                                  "Impersonate-Group": "system:masters"})
        self.assertEqual(exempt.code, 404)
        held.release()
        await running

    @run
    async def test_the_429_body_is_upstreams_plain_text(self) -> None:
        rejected, running = await self.second_request_while_one_is_held()
        await running
        # upstream's WithMaxInFlightLimit answers with tooManyRequests (http.Error), as APF does
        self.assertEqual((rejected.raw, rejected.header("content-type")),
                         (TOO_MANY, "text/plain; charset=utf-8"))
