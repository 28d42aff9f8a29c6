"""Which flow schema and priority level upstream's bootstrap configuration gives a request."""
from __future__ import annotations

import copy

from twisted.internet import task
from twisted.trial import unittest

from kapiserver.flowcontrol import bootstrap
from kapiserver.flowcontrol.controller import APFController, flow_hash
from kapiserver.flowcontrol.retry_after import DroppedRequests
from kapiserver.flowcontrol.work_estimate import estimate
from kapiserver.request.info import parse_request_info

AUTHENTICATED = "system:authenticated"


def configured(limit: int = 600) -> APFController:
    controller = APFController(limit, task.Clock())
    levels = copy.deepcopy(bootstrap.MANDATORY_PRIORITY_LEVELS + bootstrap.SUGGESTED_PRIORITY_LEVELS)
    schemas = copy.deepcopy(bootstrap.MANDATORY_FLOW_SCHEMAS + bootstrap.SUGGESTED_FLOW_SCHEMAS)
    controller.digest(levels, schemas)
    return controller


def classify(controller: APFController, user: str, groups: tuple, method: str, path: str) -> tuple[str, str, str]:
    info = parse_request_info(method, path, {})
    found = controller.classify(user, groups, info)
    return found.flow_schema_name, found.level.name, found.distinguisher


class ClassificationTests(unittest.TestCase):
    def test_bootstrap_schemas_classify_as_upstream(self):
        c = configured()
        cases = [
            (("admin", ("system:masters", AUTHENTICATED), "GET", "/api/v1/pods"), ("exempt", "exempt", "")),
            (("alice", (AUTHENTICATED,), "GET", "/readyz"), ("probes", "exempt", "")),
            (("system:anonymous", ("system:unauthenticated",), "GET", "/livez/ping"), ("probes", "exempt", "")),
            (("alice", (AUTHENTICATED,), "GET", "/api/v1/namespaces/a/pods"),
             ("global-default", "global-default", "alice")),
            (("alice", (AUTHENTICATED,), "POST", "/readyz"), ("global-default", "global-default", "alice")),
            (("system:node:n1", ("system:nodes", AUTHENTICATED), "PUT", "/api/v1/nodes/n1/status"),
             ("system-node-high", "node-high", "system:node:n1")),
            (("system:node:n1", ("system:nodes", AUTHENTICATED), "GET", "/api/v1/namespaces/a/pods"),
             ("system-nodes", "system", "system:node:n1")),
            (("system:kube-controller-manager", (AUTHENTICATED,), "GET", "/apis/apps/v1/namespaces/a/deployments"),
             ("kube-controller-manager", "workload-high", "a")),
            (("system:kube-scheduler", (AUTHENTICATED,), "PUT",
              "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"),
             ("system-leader-election", "leader-election", "system:kube-scheduler")),
            (("system:serviceaccount:kube-system:foo", ("system:serviceaccounts", AUTHENTICATED), "GET",
              "/api/v1/namespaces/b/configmaps"), ("kube-system-service-accounts", "workload-high", "b")),
            (("system:serviceaccount:kube-system:endpoint-controller", ("system:serviceaccounts", AUTHENTICATED),
              "PUT", "/api/v1/namespaces/b/endpoints/x"),
             ("endpoint-controller", "workload-high", "system:serviceaccount:kube-system:endpoint-controller")),
            (("system:serviceaccount:team:bot", ("system:serviceaccounts", AUTHENTICATED), "GET",
              "/api/v1/namespaces/team/pods"), ("service-accounts", "workload-low", "system:serviceaccount:team:bot")),
            # a user in no group at all: catch-all anyway, as upstream falls back to it
            (("nobody", (), "GET", "/api/v1/pods"), ("catch-all", "catch-all", "")),
        ]
        for request, expected in cases:
            self.assertEqual(classify(c, *request), expected, request)

    def test_requests_alike_follow_a_new_configuration(self):
        # the schema chosen is remembered for requests alike, until the next digest
        c = configured()
        request = ("alice", (AUTHENTICATED,), "GET", "/api/v1/namespaces/a/configmaps/x")
        self.assertEqual(classify(c, *request)[0], "global-default")
        self.assertEqual(classify(c, "alice", (AUTHENTICATED,), "GET", "/api/v1/namespaces/b/configmaps/y")[0],
                         "global-default")
        mine = copy.deepcopy(bootstrap.SUGGESTED_FLOW_SCHEMAS[-1])
        mine["metadata"] = {"name": "alice-configmaps"}
        mine["spec"] = {"matchingPrecedence": 50, "priorityLevelConfiguration": {"name": "workload-low"},
                        "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                                   "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                                                      "namespaces": ["a"]}]}]}
        c.digest(copy.deepcopy(bootstrap.MANDATORY_PRIORITY_LEVELS + bootstrap.SUGGESTED_PRIORITY_LEVELS),
                 copy.deepcopy(bootstrap.MANDATORY_FLOW_SCHEMAS + bootstrap.SUGGESTED_FLOW_SCHEMAS) + [mine])
        self.assertEqual(classify(c, *request)[:2], ("alice-configmaps", "workload-low"))
        # what the rule does not name is not alike
        self.assertEqual(classify(c, "alice", (AUTHENTICATED,), "GET", "/api/v1/namespaces/b/configmaps/y")[0],
                         "global-default")
        self.assertEqual(classify(c, "bob", (AUTHENTICATED,), "GET", "/api/v1/namespaces/a/configmaps/x")[0],
                         "global-default")
        self.assertEqual(classify(c, "alice", (AUTHENTICATED,), "GET", "/api/v1/namespaces/a/configmaps/z")[0],
                         "alice-configmaps")

    def test_levels_share_the_server_concurrency(self):
        c = configured(600)
        limits = {name: state.concurrency_limit for name, state in c.levels.items()}
        # ceil(600 * shares / 245), as upstream's nominal concurrency limits
        self.assertEqual(limits, {"exempt": 0, "catch-all": 13, "system": 74, "node-high": 98, "leader-election": 25,
                                  "workload-high": 98, "workload-low": 245, "global-default": 49})
        self.assertEqual(c.levels["global-default"].max_seats, 8)
        self.assertEqual(c.levels["workload-low"].max_seats, 37)  # min(ceil(245 * 0.15), 245 // 6)

    def test_only_mandatory_objects_before_the_configuration_is_read(self):
        c = APFController(600, task.Clock())
        self.assertEqual([fs["metadata"]["name"] for fs in c.flow_schemas], ["exempt", "catch-all"])
        self.assertEqual(classify(c, "alice", (AUTHENTICATED,), "GET", "/api/v1/pods")[:2], ("catch-all", "catch-all"))
        self.assertEqual(c.levels["catch-all"].concurrency_limit, 600)

    def test_a_schema_of_a_missing_level_is_dangling_and_skipped(self):
        c = configured()
        schemas = copy.deepcopy(bootstrap.MANDATORY_FLOW_SCHEMAS + bootstrap.SUGGESTED_FLOW_SCHEMAS)
        mine = copy.deepcopy(bootstrap.SUGGESTED_FLOW_SCHEMAS[-1])
        mine["metadata"] = {"name": "mine"}
        mine["spec"]["matchingPrecedence"] = 50
        mine["spec"]["priorityLevelConfiguration"]["name"] = "nowhere"
        levels = copy.deepcopy(bootstrap.MANDATORY_PRIORITY_LEVELS + bootstrap.SUGGESTED_PRIORITY_LEVELS)
        updates = c.digest(levels, schemas + [mine])
        by_name = dict(updates)
        self.assertEqual(by_name["mine"]["status"], "True")
        self.assertEqual(by_name["mine"]["reason"], "NotFound")
        self.assertEqual(by_name["mine"]["message"], 'This FlowSchema references the PriorityLevelConfiguration '
                                                     'object named "nowhere" but there is no such object')
        self.assertEqual(by_name["global-default"]["status"], "False")
        self.assertNotIn("mine", [fs["metadata"]["name"] for fs in c.flow_schemas])

    def test_flow_hash_is_upstreams(self):
        # sha256("global-default\x00alice")[:8], little endian
        import hashlib
        import struct
        expected = struct.unpack("<Q", hashlib.sha256(b"global-default\x00alice").digest()[:8])[0]
        self.assertEqual(flow_hash("global-default", "alice"), expected)


class WorkEstimateTests(unittest.TestCase):
    def seats(self, method: str, path: str, query: str = "", stored: int = 2000, top: int = 8) -> int:
        args = {k.encode(): [v.encode()] for k, v in (p.split("=", 1) for p in query.split("&") if p)}
        info = parse_request_info(method, path, args)
        return estimate(info, args, lambda group, resource: stored, top).initial_seats

    def test_lists_take_a_seat_per_hundred_objects_up_to_the_level_maximum(self):
        self.assertEqual(self.seats("GET", "/api/v1/pods", stored=250, top=8), 3)
        self.assertEqual(self.seats("GET", "/api/v1/pods", stored=5000, top=8), 8)
        self.assertEqual(self.seats("GET", "/api/v1/pods", stored=5000, top=0), 10)
        self.assertEqual(self.seats("GET", "/api/v1/pods", stored=0), 1)
        # from storage (a continue token): twice the page
        self.assertEqual(self.seats("GET", "/api/v1/pods", "limit=100&continue=x", stored=5000), 2)
        self.assertEqual(self.seats("GET", "/api/v1/pods/p"), 1)
        self.assertEqual(self.seats("POST", "/api/v1/namespaces/a/pods"), 1)
        # watches: only a watch-list's initial events count
        self.assertEqual(self.seats("GET", "/api/v1/pods", "watch=true"), 1)
        self.assertEqual(self.seats("GET", "/api/v1/pods", "watch=true&sendInitialEvents=true"), 8)


class RetryAfterTests(unittest.TestCase):
    def test_retry_after_grows_with_drops_and_decays(self):
        clock = task.Clock()
        dropped = DroppedRequests(clock.seconds)
        self.assertEqual(dropped.retry_after("l"), 1)
        for _ in range(5):
            for _ in range(20):
                dropped.record("l")
            clock.advance(1)
        dropped.record("l")
        self.assertGreaterEqual(dropped.retry_after("l"), 4)
        grown = dropped.retry_after("l")
        for _ in range(3):  # rare drops: it comes down by one each time
            clock.advance(40)
            dropped.record("l")
        self.assertEqual(dropped.retry_after("l"), grown - 3)
