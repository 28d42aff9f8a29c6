"""The built-in kinds' descriptions, defaulting and validation (pure strategy calls)."""
from __future__ import annotations

import base64
import copy
import inspect
from typing import Any, Callable

from twisted.trial import unittest

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.apis.events import events as events_v1
from kapiserver.machinery import errors
from kapiserver.machinery.openapi_definitions import load_definitions

CONFIG_KEY_MESSAGE = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                      "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
IMMUTABLE = "Forbidden: field is immutable when `immutable` is set"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def types() -> dict:
    return {(r.group, r.plural): r for r in builtin_resource_types()}


def rendered(causes: list) -> list[str]:
    """Causes as upstream's Invalid message lists them: ``field: message``."""
    return [f"{c.field}: {c.message}" if c.field else c.message for c in causes]


class Base(unittest.TestCase):
    group, plural = "", ""

    def setUp(self) -> None:
        self.rtype = types()[(self.group, self.plural)]
        self.strategy = self.rtype.strategy

    def create(self, obj: dict) -> tuple[dict, list[str]]:
        """What the Store does on create: prepare, default, validate."""
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("name", "x")
        if self.rtype.namespaced:
            obj["metadata"].setdefault("namespace", "default")
        self.strategy.prepare_for_create(self.rtype, obj)
        self.strategy.default(self.rtype, obj)
        return obj, rendered(self.strategy.validate(self.rtype, obj))

    def update(self, new: dict, old: dict) -> tuple[dict, list[str]]:
        new = copy.deepcopy(new)
        self.strategy.prepare_for_update(self.rtype, new, old)
        self.strategy.default(self.rtype, new)
        return new, rendered(self.strategy.validate_update(self.rtype, new, old))


class DescriptionsTests(unittest.TestCase):
    def test_discovery_facts_match_upstream(self) -> None:
        t = types()
        for served in [("", "configmaps"), ("", "events"), ("", "namespaces"), ("", "secrets"),
                       ("", "serviceaccounts"), ("coordination.k8s.io", "leases"), ("events.k8s.io", "events")]:
            self.assertIn(served, t)
        self.assertEqual(t[("", "configmaps")].short_names, ("cm",))
        self.assertEqual(t[("", "namespaces")].short_names, ("ns",))
        self.assertEqual(t[("", "serviceaccounts")].short_names, ("sa",))
        self.assertEqual(t[("", "events")].short_names, ("ev",))
        self.assertEqual(t[("", "secrets")].short_names, ())
        self.assertNotIn("deletecollection", t[("", "namespaces")].verbs)
        self.assertIn("deletecollection", t[("", "configmaps")].verbs)
        self.assertFalse(t[("", "namespaces")].namespaced)
        self.assertEqual(t[("", "namespaces")].subresources, ("status", "finalize"))
        for key in [("", "configmaps"), ("", "secrets"), ("", "events"), ("coordination.k8s.io", "leases")]:
            self.assertEqual(t[key].subresources, ())
        self.assertEqual(t[("", "configmaps")].schema_name, "io.k8s.api.core.v1.ConfigMap")
        self.assertEqual(t[("events.k8s.io", "events")].schema_name, "io.k8s.api.events.v1.Event")

    def test_every_builtin_is_unique_and_described_by_upstream_definitions(self) -> None:
        # OpenAPI, strict field validation and strategic merge patch all read the definition
        rtypes = builtin_resource_types()
        self.assertEqual(len({(r.group, r.version, r.plural) for r in rtypes}), len(rtypes))
        defs = load_definitions()
        for r in rtypes:
            self.assertIn(r.schema_name, defs, f"{r.group}/{r.plural}")
            self.assertEqual(defs.get(r.schema_name)["x-kubernetes-group-version-kind"][0]["kind"], r.kind)

    def test_both_event_apis_share_storage_and_expire(self) -> None:
        t = types()
        core, new = t[("", "events")], t[("events.k8s.io", "events")]
        self.assertEqual(core.storage_key("ns", "e"), new.storage_key("ns", "e"))
        self.assertEqual((core.ttl_seconds, new.ttl_seconds), (3600, 3600))
        self.assertTrue(core.strategy.allow_create_on_update)
        self.assertTrue(new.strategy.allow_create_on_update)


class ConfigMapTests(Base):
    plural = "configmaps"

    def test_valid_configmap(self) -> None:
        _, causes = self.create({"data": {"a.b": "1", "C_D-e": "2"}, "binaryData": {"bin": b64("x")}})
        self.assertEqual(causes, [])

    def test_bad_keys(self) -> None:
        _, causes = self.create({"data": {"a b": "1", "..x": "2"}})
        self.assertEqual(causes, [f'data[a b]: Invalid value: "a b": {CONFIG_KEY_MESSAGE}',
                                  "data[..x]: Invalid value: \"..x\": must not start with '..'"])
        _, causes = self.create({"binaryData": {".": b64("x")}})
        self.assertEqual(causes, ["binaryData[.]: Invalid value: \".\": must not be '.'"])

    def test_key_in_both_maps(self) -> None:
        _, causes = self.create({"data": {"k": "1"}, "binaryData": {"k": b64("x")}})
        self.assertEqual(causes, ['data[k]: Invalid value: "k": duplicate of key present in binaryData'])

    def test_size_limit(self) -> None:
        _, causes = self.create({"data": {"a": "x" * (1024 * 1024)}})
        self.assertEqual(causes, [])
        _, causes = self.create({"data": {"a": "x" * (1024 * 1024)}, "binaryData": {"b": b64("y")}})
        self.assertEqual(causes, ["[]: Too long: may not be more than 1048576 bytes"])

    def test_binary_data_must_be_base64(self) -> None:
        e = self.assertRaises(errors.StatusError, self.create, {"binaryData": {"b": "no!"}})
        self.assertEqual((e.code, e.reason), (400, "BadRequest"))
        self.assertEqual(e.message, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
                                    'illegal base64 data at input byte 2')

    def test_immutable(self) -> None:
        old, _ = self.create({"data": {"a": "1"}, "immutable": True})
        _, causes = self.update({**old, "data": {"a": "2"}}, old)
        self.assertEqual(causes, ["data: " + IMMUTABLE])
        _, causes = self.update({**old, "immutable": False}, old)
        self.assertEqual(causes, ["immutable: " + IMMUTABLE])
        _, causes = self.update({**old, "binaryData": {"b": b64("x")}}, old)
        self.assertEqual(causes, ["binaryData: " + IMMUTABLE])
        _, causes = self.update({**old, "metadata": {**old["metadata"], "labels": {"a": "b"}}}, old)
        self.assertEqual(causes, [])

    def test_mutable_configmap_can_become_immutable(self) -> None:
        old, _ = self.create({"data": {"a": "1"}})
        _, causes = self.update({**old, "data": {"a": "2"}, "immutable": True}, old)
        self.assertEqual(causes, [])


class SecretTests(Base):
    plural = "secrets"

    def test_type_defaults_to_opaque(self) -> None:
        obj, causes = self.create({"data": {"a": b64("1")}})
        self.assertEqual((obj["type"], causes), ("Opaque", []))

    def test_string_data_is_folded_into_data(self) -> None:
        obj, causes = self.create({"data": {"a": b64("old"), "b": b64("keep")}, "stringData": {"a": "new"}})
        self.assertEqual(causes, [])
        self.assertNotIn("stringData", obj)
        self.assertEqual(obj["data"], {"a": b64("new"), "b": b64("keep")})
        new, _ = self.update({**obj, "stringData": {"c": "3"}}, obj)
        self.assertEqual(new["data"]["c"], b64("3"))
        self.assertNotIn("stringData", new)

    def test_data_must_be_base64(self) -> None:
        e = self.assertRaises(errors.StatusError, self.create, {"data": {"a": "YW!j"}})
        self.assertEqual((e.code, e.message), (400, 'Secret in version "v1" cannot be handled as a Secret: '
                                                    'illegal base64 data at input byte 2'))
        e = self.assertRaises(errors.StatusError, self.create, {"data": {"a": "YWJjZA"}})
        self.assertIn("illegal base64 data at input byte 4", e.message)

    def test_bad_key(self) -> None:
        _, causes = self.create({"stringData": {"a/b": "x"}})
        self.assertEqual(causes, [f'data[a/b]: Invalid value: "a/b": {CONFIG_KEY_MESSAGE}'])

    def test_size_limit_counts_decoded_bytes(self) -> None:
        _, causes = self.create({"stringData": {"a": "x" * (1024 * 1024 + 1)}})
        self.assertEqual(causes, ["data: Too long: may not be more than 1048576 bytes"])

    def test_type_specific_required_keys(self) -> None:
        cases = {
            "kubernetes.io/tls": ["data[tls.crt]: Required value", "data[tls.key]: Required value"],
            "kubernetes.io/dockerconfigjson": ["data[.dockerconfigjson]: Required value"],
            "kubernetes.io/dockercfg": ["data[.dockercfg]: Required value"],
            "kubernetes.io/basic-auth": ["data[username]: Required value", "data[password]: Required value"],
            "kubernetes.io/ssh-auth": ["data[ssh-privatekey]: Required value"],
            "kubernetes.io/service-account-token": [
                "metadata.annotations[kubernetes.io/service-account.name]: Required value"],
            "example.com/custom": [],
        }
        for secret_type, expected in cases.items():
            _, causes = self.create({"type": secret_type})
            self.assertEqual(causes, expected, secret_type)

    def test_type_specific_valid_secrets(self) -> None:
        for body in ({"type": "kubernetes.io/tls", "stringData": {"tls.crt": "c", "tls.key": "k"}},
                     {"type": "kubernetes.io/basic-auth", "stringData": {"password": ""}},
                     {"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": '{"auths":{}}'}},
                     {"type": "kubernetes.io/service-account-token",
                      "metadata": {"annotations": {"kubernetes.io/service-account.name": "default"}}}):
            self.assertEqual(self.create(body)[1], [], body["type"])

    def test_docker_config_must_be_a_json_object(self) -> None:
        _, causes = self.create({"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{"}})
        self.assertEqual(causes, ['data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": '
                                  'unexpected end of JSON input'])
        _, causes = self.create({"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "[]"}})
        self.assertEqual(causes, ['data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": '
                                  'json: cannot unmarshal array into Go value of type map[string]interface {}'])

    def test_type_is_immutable(self) -> None:
        old, _ = self.create({})
        _, causes = self.update({**old, "type": "example.com/other"}, old)
        self.assertEqual(causes, ['type: Invalid value: "example.com/other": field is immutable'])

    def test_immutable(self) -> None:
        old, _ = self.create({"stringData": {"a": "1"}, "immutable": True})
        _, causes = self.update({**old, "stringData": {"a": "2"}}, old)
        self.assertEqual(causes, ["data: " + IMMUTABLE])
        _, causes = self.update({**old, "immutable": None}, old)
        self.assertEqual(causes, ["immutable: " + IMMUTABLE])


class NamespaceTests(Base):
    plural = "namespaces"

    def test_create_defaults(self) -> None:
        obj, causes = self.create({"metadata": {"name": "team-a"}, "status": {"phase": "Terminating"}})
        self.assertEqual(causes, [])
        self.assertEqual(obj["status"], {"phase": "Active"})
        self.assertEqual(obj["spec"], {"finalizers": ["kubernetes"]})
        self.assertEqual(obj["metadata"]["labels"], {"kubernetes.io/metadata.name": "team-a"})
        self.assertEqual(self.strategy.name_validation, "label")

    def test_generated_name_gets_its_label(self) -> None:
        obj = {"metadata": {"generateName": "gen-"}}
        self.strategy.prepare_for_create(self.rtype, obj)
        self.strategy.default(self.rtype, obj)
        obj["metadata"]["name"] = "gen-abcde"  # the Store names it after defaulting
        self.assertEqual(self.strategy.validate(self.rtype, obj), [])
        self.assertEqual(obj["metadata"]["labels"]["kubernetes.io/metadata.name"], "gen-abcde")

    def test_update_keeps_finalizers_and_status(self) -> None:
        old, _ = self.create({"metadata": {"name": "n"}})
        new, causes = self.update({"metadata": {"name": "n", "labels": {"x": "y"}},
                                   "spec": {"finalizers": []}, "status": {"phase": "Terminating"}}, old)
        self.assertEqual(causes, [])
        self.assertEqual((new["spec"], new["status"]), ({"finalizers": ["kubernetes"]}, {"phase": "Active"}))
        self.assertEqual(new["metadata"]["labels"], {"x": "y", "kubernetes.io/metadata.name": "n"})

    def test_bad_finalizers(self) -> None:
        _, causes = self.create({"spec": {"finalizers": ["foo", "example.com/ok", "a/b/c"]}})
        # upstream's ValidateNamespace reports these at spec.finalizers, without an index
        self.assertEqual(causes[0], 'spec.finalizers: Invalid value: "foo": name is neither a standard '
                                    'finalizer name nor is it fully qualified')
        self.assertEqual(len(causes), 2)
        self.assertTrue(causes[1].startswith('spec.finalizers: Invalid value: "a/b/c": a qualified name must '
                                             'consist of'))

    def test_delete_marks_terminating_while_finalizers_remain(self) -> None:
        obj, _ = self.create({})
        self.assertTrue(self.strategy.delete_pending(self.rtype, obj))
        self.assertEqual(obj["status"]["phase"], "Terminating")
        obj["spec"]["finalizers"] = []
        self.assertFalse(self.strategy.delete_pending(self.rtype, obj))


class ServiceAccountTests(Base):
    plural = "serviceaccounts"

    def test_secret_references_keep_only_names(self) -> None:
        obj, causes = self.create({"secrets": [{"name": "s", "namespace": "other", "uid": "u"}]})
        self.assertEqual((obj["secrets"], causes), ([{"name": "s"}], []))


def core_event(**fields) -> dict:
    event = {"metadata": {"name": "e", "namespace": "default"},
             "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Started"}
    event.update(fields)
    return event


class CoreEventTests(Base):
    plural = "events"

    def test_old_style_event_is_valid(self) -> None:
        self.assertEqual(self.create(core_event())[1], [])
        self.assertEqual(self.strategy.name_validation, "path-segment")

    def test_involved_object_namespace_must_match(self) -> None:
        _, causes = self.create(core_event(involvedObject={"kind": "Pod", "namespace": "other"}))
        self.assertEqual(causes, ['involvedObject.namespace: Invalid value: "other": does not match event.namespace'])
        # no involved namespace is fine in "default" only
        obj = core_event(involvedObject={"kind": "Node", "name": "n"})
        obj["metadata"]["namespace"] = "team"
        self.assertEqual(self.create(obj)[1],
                         ['involvedObject.namespace: Invalid value: "": does not match event.namespace'])

    def test_new_style_event_needs_reporting_fields(self) -> None:
        _, causes = self.create(core_event(eventTime="2024-01-01T00:00:00.000000Z", reason="", message="m" * 1025))
        self.assertEqual(causes[0], "reportingComponent: Required value")
        self.assertIn("reportingInstance: Required value", causes)
        self.assertIn("action: Required value", causes)
        self.assertIn("reason: Required value", causes)
        self.assertIn('message: Invalid value: "": can have at most 1024 characters', causes)

    def test_read_fills_fields_clients_require(self) -> None:
        obj = {"metadata": {"name": "e"}}
        self.strategy.finalize_on_read(self.rtype, obj)
        self.assertEqual(obj["involvedObject"], {})
        self.assertEqual((obj["reportingComponent"], obj["eventTime"]), ("", None))


def v1_event(**fields) -> dict:
    event = {"metadata": {"name": "e.1", "namespace": "default"}, "eventTime": "2024-01-01T00:00:00.000000Z",
             "reportingController": "example.com/ctl", "reportingInstance": "ctl-1", "action": "Start",
             "reason": "Started", "type": "Normal", "note": "hello",
             "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}}
    event.update(fields)
    return event


class EventsV1Tests(Base):
    group, plural = "events.k8s.io", "events"

    def test_valid_event(self) -> None:
        self.assertEqual(self.create(v1_event())[1], [])
        self.assertEqual(self.strategy.name_validation, "subdomain")

    def test_strict_create_rules(self) -> None:
        _, causes = self.create(v1_event(type="Info", deprecatedCount=3, deprecatedSource={"component": "x"},
                                         eventTime=None))
        self.assertEqual(causes, ["eventTime: Required value",
                                  'type: Invalid value: "": has invalid value: Info',
                                  'count: Invalid value: "": needs to be unset',
                                  'source: Invalid value: "": needs to be unset'])

    def test_reporting_controller_rules(self) -> None:
        _, causes = self.create(v1_event(reportingController=""))
        self.assertEqual(causes[:2], ["reportingController: Required value",
                                      'reportingController: Invalid value: "": name part must be non-empty'])
        _, causes = self.create(v1_event(reportingController="Bad Name"))
        self.assertEqual(causes, [
            'reportingController: Invalid value: "Bad Name": name part must consist of alphanumeric characters, '
            "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
            "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"])

    def test_series_rules(self) -> None:
        _, causes = self.create(v1_event(series={"count": 1}))
        self.assertEqual(causes, ['series.count: Invalid value: "": should be at least 2',
                                  "series.lastObservedTime: Required value"])

    def test_update_may_only_touch_series_and_metadata(self) -> None:
        old, _ = self.create(v1_event())
        _, causes = self.update({**old, "series": {"count": 2, "lastObservedTime": "2024-01-01T00:01:00.000000Z"},
                                 "metadata": {**old["metadata"], "labels": {"a": "b"}}}, old)
        self.assertEqual(causes, [])
        _, causes = self.update({**old, "note": "changed", "reportingController": "example.com/other"}, old)
        self.assertEqual(causes, ['message: Invalid value: "changed": field is immutable',
                                  'reportingController: Invalid value: "example.com/other": field is immutable'])

    def test_conversion_round_trip(self) -> None:
        event = v1_event(deprecatedCount=2, deprecatedSource={"component": "c"},
                         deprecatedFirstTimestamp="2024-01-01T00:00:00Z", related={"kind": "Node"})
        core = events_v1.events_v1_to_core(event)
        self.assertEqual(core["apiVersion"], "v1")
        self.assertEqual((core["message"], core["involvedObject"]["name"], core["reportingComponent"],
                          core["count"], core["source"], core["firstTimestamp"], core["reportingInstance"]),
                         ("hello", "p", "example.com/ctl", 2, {"component": "c"}, "2024-01-01T00:00:00Z", "ctl-1"))
        for gone in ("note", "regarding", "reportingController", "deprecatedCount"):
            self.assertNotIn(gone, core)
        back = events_v1.core_to_events_v1(core)
        self.assertEqual(back, {**event, "apiVersion": "events.k8s.io/v1", "kind": "Event"})
        self.assertIs(self.rtype.convert_to_storage, events_v1.events_v1_to_core)
        self.assertIs(self.rtype.convert_from_storage, events_v1.core_to_events_v1)


class LeaseTests(Base):
    group, plural = "coordination.k8s.io", "leases"

    def test_valid_lease_and_update_rules(self) -> None:
        self.assertEqual(self.create({"spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                                               "leaseTransitions": 0}})[1], [])
        self.assertTrue(self.strategy.allow_create_on_update)
        self.assertFalse(self.strategy.allow_unconditional_update)

    def test_spec_rules(self) -> None:
        _, causes = self.create({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}})
        self.assertEqual(causes, ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                                  "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"])
        # the CoordinatedLeaderElection gate is off in v1.32: its fields are dropped (kube-apiserver v1.32.13
        # creates the Lease without them), and an update keeps only those the old Lease had
        created, causes = self.create({"spec": {"strategy": "Newest", "preferredHolder": "x"}})
        self.assertEqual((created["spec"], causes), ({}, []))
        updated, _ = self.update({"metadata": {"name": "x"}, "spec": {"strategy": "Newest", "preferredHolder": "x"}},
                                 {"metadata": {"name": "x"}, "spec": {"strategy": "OldestEmulationVersion"}})
        self.assertEqual(updated["spec"], {"strategy": "Newest"})
        # the rules the gate would check; sic: upstream's ValidateCoordinatedLeaseStrategy appends "strategy"
        self.assertEqual(rendered(self.strategy.validate(self.rtype, {"spec": {"strategy": "Newest"}})), [
            'spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"'])


# ---------------------------------------------------------------- through the Store

try:  # the Store and its helpers are written in parallel; run once they import
    from twisted.internet import defer, reactor

    from kapiserver.registry.context import Context
    from kapiserver.registry.options import DeleteOptions
    from kapiserver.registry.store import LARGE_BODY_ON_THREAD_BYTES, Store
    from kapiserver.storage.sqlite import SQLiteStorage
    _STORE_SKIP = None
except ImportError as e:  # pragma: no cover
    _STORE_SKIP = f"the generic Store is not importable yet: {e}"


class ThroughStoreTests(unittest.TestCase):
    """The kinds' hooks as a client meets them through the generic Store (SQLite in memory)."""

    skip = _STORE_SKIP

    def setUp(self) -> defer.Deferred:
        self.storage = SQLiteStorage(":memory:", reactor=reactor)
        self.types = types()
        self.addCleanup(self.storage.stop)
        return self.storage.start()

    def store(self, group: str, plural: str) -> "Store":
        return Store(self.types[(group, plural)], self.storage)

    @defer.inlineCallbacks
    def test_secret_string_data_and_namespace_defaults(self):
        ns = yield defer.Deferred.fromCoroutine(self.store("", "namespaces").create("", {"metadata": {"name": "t"}}))
        self.assertEqual((ns["status"]["phase"], ns["spec"]["finalizers"]), ("Active", ["kubernetes"]))
        secrets = self.store("", "secrets")
        yield defer.Deferred.fromCoroutine(secrets.create("t", {"metadata": {"name": "s"},
                                                                 "stringData": {"user": "admin"}}))
        got = yield defer.Deferred.fromCoroutine(secrets.get("t", "s"))
        self.assertEqual((got["type"], got["data"]), ("Opaque", {"user": b64("admin")}))
        self.assertNotIn("stringData", got)

    @defer.inlineCallbacks
    def test_a_large_bodys_managed_fields_and_validation_run_off_the_reactor(self):
        """A write with a large body (100,000 labels, a few MB of data keys) is defaulted, records its
        managedFields, validates and is encoded for storage on a thread, so the reactor answers other requests meanwhile; the object, and
        the 422 of an invalid one, come out the same."""
        from twisted.python import threadable
        cms = self.store("", "configmaps")
        on_reactor: list[tuple[str, bool]] = []

        def recording(name: str, work: Callable[..., Any]) -> Callable[..., Any]:
            def recorded(*args: Any) -> Any:
                on_reactor.append((name, threadable.isInIOThread()))
                return work(*args)
            return recorded

        manager = cms.field_manager("")
        self.patch(manager, "update", recording("managedFields", manager.update))
        self.patch(cms.strategy, "validate", recording("validate", cms.strategy.validate))
        self.patch(cms.strategy, "default", recording("default", cms.strategy.default))
        self.patch(cms.strategy, "validate_update", recording("validate_update", cms.strategy.validate_update))
        self.patch(cms, "_encode", recording("encode", cms._encode))
        created, refused = [], []
        for name, body_size in (("small", 1000), ("large", LARGE_BODY_ON_THREAD_BYTES)):
            ctx = Context(field_manager="kubectl", body_size=body_size)
            obj = {"metadata": {"name": name, "labels": {f"k{i}": "v" for i in range(50)}},
                   "data": {f"d{i}": "" for i in range(50)}}
            created.append((yield defer.Deferred.fromCoroutine(cms.create("t", obj, ctx))))
            obj = {**created[-1], "data": {"bad key": ""}}
            try:
                yield defer.Deferred.fromCoroutine(cms.update("t", name, obj, ctx=ctx))
            except errors.StatusError as e:
                refused.append((e.code, e.message.replace(name, "NAME")))
        half = len(on_reactor) // 2  # the small body's writes, then the large one's
        self.assertEqual([r for _, r in on_reactor], [True] * half + [False] * half)
        self.assertEqual({n for n, _ in on_reactor[half:]},
                         {"default", "managedFields", "validate", "validate_update", "encode"})
        small, large = (c["metadata"]["managedFields"] for c in created)
        for entry in small + large:
            entry.pop("time")
        self.assertEqual(large, small)
        self.assertEqual(set(large[0]["fieldsV1"]["f:data"]), {"."} | {f"f:d{i}" for i in range(50)})
        self.assertEqual(refused, [(422, f'ConfigMap "NAME" is invalid: data[bad key]: Invalid value: "bad key": '
                                         f'{CONFIG_KEY_MESSAGE}')] * 2)

    @defer.inlineCallbacks
    def test_a_large_stored_objects_update_and_delete_decode_it_off_the_reactor(self):
        """An update or delete of a large stored object (a few hundred KB and more) decodes it on a thread,
        as a large body is, and answers the same object a small one's does."""
        from twisted.python import threadable

        from kapiserver.registry import store as store_module
        cms = self.store("", "configmaps")
        on_reactor: list[tuple[str, bool]] = []
        decode = store_module.decode

        def recorded(kv: Any) -> dict:
            on_reactor.append((kv.key.rsplit("/", 1)[-1], threadable.isInIOThread()))
            return decode(kv)
        values = {"small": "x", "large": "x" * LARGE_BODY_ON_THREAD_BYTES}
        for name, value in values.items():
            yield defer.Deferred.fromCoroutine(cms.create("t", {"metadata": {"name": name}, "data": {"v": value}}))
        self.patch(store_module, "decode", recorded)

        def labelled(current: dict | None) -> dict:
            assert current is not None
            return {**current, "metadata": {**current["metadata"], "labels": {"l": "1"}}}
        answers = {}
        for name in values:
            updated, _ = yield defer.Deferred.fromCoroutine(cms.guaranteed_update("t", name, labelled))
            deleted, now = yield defer.Deferred.fromCoroutine(cms.delete("t", name, DeleteOptions()))
            answers[name] = (updated["metadata"]["labels"], deleted["data"]["v"] == values[name], now)
        self.assertEqual(answers, {"small": ({"l": "1"}, True, True), "large": ({"l": "1"}, True, True)})
        self.assertEqual({(n, r) for n, r in on_reactor if n == "small"}, {("small", True)})
        self.assertEqual({(n, r) for n, r in on_reactor if n == "large"}, {("large", False)})

    @defer.inlineCallbacks
    def test_a_small_change_to_a_large_stored_object_is_worked_off_the_reactor(self):
        """A one-label update of a large stored object (a small body) does the large object's work, its patch,
        managedFields and validation, on the large-body thread, as a large body's: on the reactor it took 1-2 s
        for a Pod of 100,000 env vars.  A small object's stays on the reactor."""
        from twisted.python import threadable
        cms = self.store("", "configmaps")
        on_reactor: list[tuple[str, str, bool]] = []

        def recording(step: str, work: Callable[..., Any]) -> Callable[..., Any]:
            def recorded(*args: Any) -> Any:
                on_reactor.append((current_name[0], step, threadable.isInIOThread()))
                return work(*args)
            return recorded
        manager = cms.field_manager("")
        self.patch(manager, "update", recording("managedFields", manager.update))
        self.patch(cms.strategy, "validate_update", recording("validate_update", cms.strategy.validate_update))
        current_name = [""]
        for name, value in (("small", "x"), ("large", "x" * LARGE_BODY_ON_THREAD_BYTES)):
            yield defer.Deferred.fromCoroutine(cms.create("t", {"metadata": {"name": name}, "data": {"v": value}}))
        for name in ("small", "large"):
            current_name[0] = name

            def labelled(current: dict | None) -> dict:
                assert current is not None
                on_reactor.append((current_name[0], "mutate", threadable.isInIOThread()))
                return {**current, "metadata": {**current["metadata"], "labels": {"l": "1"}}}
            updated, _ = yield defer.Deferred.fromCoroutine(
                cms.guaranteed_update("t", name, labelled, ctx=Context(field_manager="kubectl", body_size=40)))
            self.assertEqual(updated["metadata"]["labels"], {"l": "1"})
        self.assertEqual({(step, here) for name, step, here in on_reactor if name == "small"},
                         {("mutate", True), ("managedFields", True), ("validate_update", True)})
        self.assertEqual({(step, here) for name, step, here in on_reactor if name == "large"},
                         {("mutate", False), ("managedFields", False), ("validate_update", False)})

    @defer.inlineCallbacks
    def test_a_large_pod_is_defaulted_as_a_small_one(self):
        """Defaulting a large body runs on a thread: a Pod of 20,000 env vars gets every default."""
        pods = self.store("", "pods")
        created = []
        for name, env_vars, body_size in (("small", 2, 1000), ("large", 20_000, LARGE_BODY_ON_THREAD_BYTES)):
            env = [{"name": "FROM_FIELD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
            env += [{"name": f"E{i}", "value": ""} for i in range(env_vars - 1)]
            obj = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                                                       "env": env}]}}
            pod = yield defer.Deferred.fromCoroutine(pods.create("t", obj, Context(body_size=body_size)))
            created.append(pod)
        small, large = (p["spec"]["containers"][0] for p in created)
        self.assertEqual(len(large["env"]), 20_000)
        self.assertEqual(large["env"][0], {"name": "FROM_FIELD", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.name"}}})
        self.assertEqual({k: v for k, v in large.items() if k != "env"}, {k: v for k, v in small.items() if k != "env"})
        self.assertEqual(large["imagePullPolicy"], "IfNotPresent")
        self.assertEqual(created[1]["spec"]["restartPolicy"], created[0]["spec"]["restartPolicy"])

    @defer.inlineCallbacks
    def test_invalid_configmap_is_422_with_upstream_message(self):
        cms = self.store("", "configmaps")
        try:
            yield defer.Deferred.fromCoroutine(cms.create("t", {"metadata": {"name": "c"}, "data": {"a b": "x"}}))
        except errors.StatusError as e:
            self.assertEqual((e.code, e.reason), (422, "Invalid"))
            self.assertEqual(e.message, f'ConfigMap "c" is invalid: data[a b]: Invalid value: "a b": '
                                        f'{CONFIG_KEY_MESSAGE}')
        else:
            self.fail("created an invalid ConfigMap")

    @defer.inlineCallbacks
    def test_events_written_in_one_api_read_in_the_other(self):
        if "convert_to_storage" not in inspect.getsource(Store):  # pragma: no cover
            raise unittest.SkipTest("the Store does not apply ResourceType.convert_to/from_storage yet")
        v1 = self.store("events.k8s.io", "events")
        yield defer.Deferred.fromCoroutine(v1.create("default", v1_event()))
        core = yield defer.Deferred.fromCoroutine(self.store("", "events").get("default", "e.1"))
        self.assertEqual((core["apiVersion"], core["message"], core["involvedObject"]["name"],
                          core["reportingComponent"]), ("v1", "hello", "p", "example.com/ctl"))
        back = yield defer.Deferred.fromCoroutine(v1.get("default", "e.1"))
        self.assertEqual((back["apiVersion"], back["note"], back["regarding"]["name"]),
                         ("events.k8s.io/v1", "hello", "p"))
