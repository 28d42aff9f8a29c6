"""Auditing through the real handler chain (an in-process server, driven in memory, writing a real audit log)."""
from __future__ import annotations

import json
import os
import time
import uuid

import orjson
from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.audit.event import AuditEvent
from kapiserver.audit.policy import RequestAuditConfig
from kapiserver.testing.apiserver import start_in_memory_server
from kapiserver.testing.cases import run, sleep

POLICY = """
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ['/healthz*', '/readyz*', '/livez*']
- level: None
  users: [system:apiserver]
- level: Metadata
  resources: [{group: "", resources: [secrets]}]
- level: Request
  resources: [{group: "", resources: [configmaps/status, serviceaccounts]}]
- level: RequestResponse
  resources: [{group: "", resources: [configmaps]}]
  omitStages: [ResponseStarted]
- level: Metadata
  omitStages: []
"""


class AuditedServerTestCase(unittest.TestCase):
    policy = POLICY
    settings: dict = {}

    async def _start(self) -> None:
        directory = os.path.abspath(self.mktemp())
        os.makedirs(directory)
        policy_path = os.path.join(directory, "policy.yaml")
        with open(policy_path, "w") as f:
            f.write(self.policy)
        self.log_path = os.path.join(directory, "audit", "audit.log")
        self.server = await start_in_memory_server(audit_policy_file=policy_path, audit_log_path=self.log_path,
                                                   **self.settings)
        self.addCleanup(lambda: defer.Deferred.fromCoroutine(self.server.stop()))
        self.client = self.server.client

    def setUp(self):
        return defer.Deferred.fromCoroutine(self._start())

    def events(self) -> list[dict]:
        try:
            with open(self.log_path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    async def events_of(self, audit_id: str, count: int, timeout: float = 5.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.events() if e["auditID"] == audit_id]
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                self.fail(f"expected {count} events for {audit_id}, got {found}")
            await sleep(0.02)


class AuditLogTests(AuditedServerTestCase):
    @run
    async def test_request_response_level_records_both_objects(self):
        reply = await self.client.request("POST", "/api/v1/namespaces/default/configmaps",
                                          {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "settings"}, "data": {"color": "blue"}})
        self.assertEqual(reply.code, 201)
        audit_id = reply.header("Audit-Id")
        [event] = await self.events_of(audit_id, 1)
        self.assertEqual(event["apiVersion"], "audit.k8s.io/v1")
        self.assertEqual(event["kind"], "Event")
        self.assertEqual(event["level"], "RequestResponse")
        self.assertEqual(event["stage"], "ResponseComplete")
        self.assertEqual(event["verb"], "create")
        self.assertEqual(event["requestURI"], "/api/v1/namespaces/default/configmaps")
        self.assertEqual(event["user"]["username"], "system:anonymous")
        self.assertEqual(event["sourceIPs"], ["127.0.0.1"])
        self.assertEqual(event["objectRef"], {"resource": "configmaps", "namespace": "default",
                                              "name": "settings", "apiVersion": "v1"})
        self.assertEqual(event["responseStatus"], {"metadata": {}, "code": 201})
        self.assertEqual(event["requestObject"]["data"], {"color": "blue"})
        self.assertEqual(event["responseObject"]["data"], {"color": "blue"})
        self.assertEqual(event["responseObject"]["metadata"]["uid"], reply.body["metadata"]["uid"])
        self.assertEqual(event["annotations"]["authorization.k8s.io/decision"], "allow")
        self.assertLessEqual(event["requestReceivedTimestamp"], event["stageTimestamp"])
        self.assertRegex(event["stageTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

    @run
    async def test_a_get_at_request_response_level_records_the_object(self):
        created = await self.client.request("POST", "/api/v1/namespaces/default/configmaps",
                                            {"metadata": {"name": "read-me"}, "data": {"color": "red"}})
        self.assertEqual(created.code, 201)
        for accept in ("application/json", "application/vnd.kubernetes.protobuf"):
            reply = await self.client.request("GET", "/api/v1/namespaces/default/configmaps/read-me",
                                              headers={"Accept": accept})
            self.assertEqual(reply.code, 200)
            [event] = await self.events_of(reply.header("Audit-Id"), 1)
            self.assertEqual((event["verb"], event["level"]), ("get", "RequestResponse"))
            self.assertEqual(event["responseObject"]["data"], {"color": "red"})
            self.assertEqual(event["responseObject"]["metadata"]["uid"], created.body["metadata"]["uid"])

    @run
    async def test_metadata_level_leaves_the_objects_out(self):
        reply = await self.client.request("POST", "/api/v1/namespaces/default/secrets",
                                          {"metadata": {"name": "db"}, "stringData": {"password": "hunter2"}})
        self.assertEqual(reply.code, 201)
        [event] = await self.events_of(reply.header("Audit-Id"), 1)
        self.assertEqual(event["level"], "Metadata")
        self.assertNotIn("requestObject", event)
        self.assertNotIn("responseObject", event)
        self.assertEqual(event["objectRef"]["name"], "db")
        with open(self.log_path) as f:
            text = f.read()
        self.assertNotIn("hunter2", text)
        self.assertNotIn("aHVudGVyMg", text)  # nor its base64

    @run
    async def test_request_level_records_the_request_only_and_subresources_match(self):
        reply = await self.client.request("POST", "/api/v1/namespaces/default/serviceaccounts",
                                          {"metadata": {"name": "robot"}})
        [event] = await self.events_of(reply.header("Audit-Id"), 1)
        self.assertEqual(event["level"], "Request")
        self.assertEqual(event["requestObject"]["metadata"]["name"], "robot")
        self.assertNotIn("responseObject", event)

    @run
    async def test_errors_are_recorded_with_their_status(self):
        reply = await self.client.request("GET", "/api/v1/namespaces/default/configmaps/missing")
        self.assertEqual(reply.code, 404)
        [event] = await self.events_of(reply.header("Audit-Id"), 1)
        self.assertEqual(event["responseStatus"]["code"], 404)
        self.assertEqual(event["responseStatus"]["reason"], "NotFound")
        self.assertEqual(event["responseStatus"]["status"], "Failure")
        self.assertEqual(event["responseObject"]["kind"], "Status")

    @run
    async def test_patch_bodies_are_the_request_object(self):
        await self.client.request("POST", "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "p"}})
        reply = await self.client.request("PATCH", "/api/v1/namespaces/default/configmaps/p",
                                          {"data": {"k": "v"}}, content_type="application/merge-patch+json")
        [event] = await self.events_of(reply.header("Audit-Id"), 1)
        self.assertEqual(event["verb"], "patch")
        self.assertEqual(event["requestObject"], {"data": {"k": "v"}})

    @run
    async def test_client_audit_id_is_kept_and_echoed(self):
        mine = f"trace-{uuid.uuid4()}"
        reply = await self.client.request("GET", "/api/v1/namespaces", headers={"Audit-ID": mine})
        self.assertEqual(reply.header("Audit-Id"), mine)
        [event] = await self.events_of(mine, 1)
        self.assertEqual(event["verb"], "list")
        self.assertEqual(event["level"], "Metadata")
        self.assertEqual(event["objectRef"], {"resource": "namespaces", "apiVersion": "v1"})

    @run
    async def test_policy_none_writes_nothing_but_the_header_is_there(self):
        reply = await self.client.request("GET", "/healthz")
        self.assertTrue(reply.header("Audit-Id"))
        await sleep(0.2)
        self.assertEqual([e for e in self.events() if e["auditID"] == reply.header("Audit-Id")], [])

    @run
    async def test_impersonation_is_recorded(self):
        reply = await self.client.request("GET", "/api/v1/namespaces/default/configmaps",
                                          headers={"Impersonate-User": "jane", "Impersonate-Group": "dev"})
        self.assertEqual(reply.code, 200)
        [event] = await self.events_of(reply.header("Audit-Id"), 1)
        self.assertEqual(event["user"]["username"], "system:anonymous")
        self.assertEqual(event["impersonatedUser"]["username"], "jane")
        self.assertIn("dev", event["impersonatedUser"]["groups"])

    @run
    async def test_watches_record_response_started_then_complete(self):
        d = self.client.get("/api/v1/namespaces/default/secrets?watch=true&timeoutSeconds=1")
        reply = await d
        # (the policy leaves RequestReceived out everywhere: a rule's own omitStages only add to it)
        found = await self.events_of(reply.header("Audit-Id"), 2)
        self.assertEqual([e["stage"] for e in found], ["ResponseStarted", "ResponseComplete"])
        self.assertEqual(found[0]["responseStatus"]["code"], 200)
        self.assertEqual(found[0]["verb"], "watch")
        self.assertGreaterEqual(found[1]["stageTimestamp"], found[0]["stageTimestamp"])


class AllStagesTests(AuditedServerTestCase):
    policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n"

    @run
    async def test_request_received_comes_first_without_the_response(self):
        reply = await self.client.request("POST", "/api/v1/namespaces/default/configmaps",
                                          {"metadata": {"name": "staged"}})
        first, last = await self.events_of(reply.header("Audit-Id"), 2)
        self.assertEqual((first["stage"], last["stage"]), ("RequestReceived", "ResponseComplete"))
        self.assertNotIn("responseStatus", first)
        self.assertNotIn("requestObject", first)  # not decoded yet when the request arrives
        self.assertEqual(first["stageTimestamp"], first["requestReceivedTimestamp"])
        self.assertEqual(last["requestObject"]["metadata"]["name"], "staged")


class FailedAuthenticationTests(AuditedServerTestCase):
    settings = {"anonymous": False}

    @run
    async def test_a_rejected_request_is_recorded_without_a_user(self):
        reply = await self.client.request("GET", "/api/v1/namespaces", headers={"Authorization": "Bearer nope"})
        self.assertEqual(reply.code, 401)
        [event] = await self.events_of(reply.header("Audit-Id"), 1)
        self.assertEqual(event["stage"], "ResponseStarted")
        self.assertEqual(event["user"], {})
        self.assertEqual(event["responseStatus"]["code"], 401)
        self.assertEqual(event["responseStatus"]["reason"], "Unauthorized")


class CredentialRedactionTests(unittest.TestCase):
    """Tokens never enter an audit record, whatever the level (TokenRequest is served on another branch;
    the record is built here from the objects the handlers would log)."""

    def test_token_request_and_review_tokens_are_blanked(self):
        sent: list[dict] = []

        class Sink:
            def process_events(self, events):
                sent.extend(events)
                return True
        event = AuditEvent("id", RequestAuditConfig("RequestResponse"), Sink(), None, lambda: None)
        event.log_request_object({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"audiences": ["api"]}}, "", "v1", "serviceaccounts", "token")
        event.log_response_object({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "status": {"token": "eyJhbGciOi.secret.part", "expirationTimestamp": "x"}})
        review = AuditEvent("id2", RequestAuditConfig("RequestResponse"), Sink(), None, lambda: None)
        review.log_request_object({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                   "spec": {"token": "eyJhbGciOi.secret.part"}}, "authentication.k8s.io", "v1",
                                  "tokenreviews", "")
        event.process_stage("ResponseComplete")
        review.process_stage("ResponseComplete")
        records = [json.loads(orjson.dumps(e)) for e in sent]
        self.assertNotIn("secret.part", json.dumps(records))
        self.assertEqual(records[0]["responseObject"]["status"]["expirationTimestamp"], "x")
        self.assertEqual(records[0]["objectRef"]["subresource"], "token")


class RefusedByAuthorizationTests(AuditedServerTestCase):
    policy = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
    settings = {"authorization_modes": ["RBAC"]}  # system:anonymous may do nothing here

    @run
    async def test_a_forbidden_request_completes_with_its_403(self):
        reply = await self.client.request("GET", "/api/v1/namespaces/default/secrets")
        self.assertEqual((reply.code, reply.body["reason"]), (403, "Forbidden"))
        received, completed = await self.events_of(reply.header("Audit-Id"), 2)
        self.assertEqual((received["stage"], completed["stage"]), ("RequestReceived", "ResponseComplete"))
        self.assertEqual(completed["responseStatus"]["code"], 403)
        self.assertEqual(completed["responseStatus"]["reason"], "Forbidden")
        self.assertEqual(completed["annotations"]["authorization.k8s.io/decision"], "forbid")
        self.assertEqual(completed["user"]["username"], "system:anonymous")
        self.assertNotIn("Panic", [e["stage"] for e in self.events()])
