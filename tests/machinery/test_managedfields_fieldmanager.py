"""The field manager chain on built-in kinds, without a server.

Expected managedFields are written from upstream's documented behaviour
(the server-side apply page of the Kubernetes documentation and the
structured-merge-diff format), not from this implementation's output.
"""
from __future__ import annotations

import copy
import itertools

from twisted.trial import unittest

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery import errors
from kapiserver.machinery.managedfields import entries as managed_entries, scale
from kapiserver.machinery.managedfields.fieldmanager import (FieldManager, manager_from_user_agent,
                                                             validate_field_manager)
from kapiserver.registry import fieldmanagers

T0, T1, T2 = "2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", "2024-01-01T00:00:02Z"


def rtype(api_version: str, kind: str):
    return next(r for r in builtin_resource_types() if r.api_version == api_version and r.kind == kind)


def clock():
    times = (f"2024-01-01T00:{m:02d}:{s:02d}Z" for m, s in itertools.product(range(60), range(60)))
    return lambda: next(times)


def configmap_manager(now=None) -> FieldManager:
    fm = fieldmanagers.field_manager(rtype("v1", "ConfigMap"))
    fm.now = now or clock()
    return fm


def cm(data=None, labels=None, **md) -> dict:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default", **md}}
    if labels is not None:
        obj["metadata"]["labels"] = labels
    if data is not None:
        obj["data"] = data
    return obj


def stored(obj: dict, entries) -> dict:
    """``obj`` as the Store keeps it after a write: with a uid and its managedFields."""
    out = copy.deepcopy(obj)
    out["metadata"]["uid"] = "u-1"
    if entries:
        out["metadata"]["managedFields"] = entries
    return out


def owners(entries) -> dict:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in entries or ()}


class UpdateTests(unittest.TestCase):
    def test_create_records_the_creator(self):
        entries = configmap_manager().update(None, cm({"a": "1"}, {"app": "x"}), None, "kubectl-create")
        self.assertEqual(entries, [{
            "manager": "kubectl-create", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}])

    def test_creates_do_not_depend_on_earlier_creates(self):
        # one field manager serves every create of its kind (the empty live side is made once)
        fm = configmap_manager(now=lambda: T0)
        first = fm.update(None, cm({"a": "1"}), None, "one")
        fm.update(None, cm({"b": "2"}, {"app": "x"}, annotations={"n": "v"}), None, "two")
        fm.update(None, cm(), None, "three")
        self.assertEqual(fm.update(None, cm({"a": "1"}), None, "one"), first)
        self.assertEqual(owners(first), {("one", "Update"): {"f:data": {".": {}, "f:a": {}}}})

    def test_updates_of_one_manager_merge_and_take_ownership(self):
        fm = configmap_manager()
        live = stored(cm({"a": "1"}), fm.update(None, cm({"a": "1"}), None, "creator"))
        new = cm({"a": "2", "b": "1"})
        entries = fm.update(live, new, None, "editor")
        live = stored(new, entries)
        entries = fm.update(live, cm({"a": "2", "b": "1", "c": "1"}), None, "editor")
        # the creator lost .data.a to the editor (it keeps .data itself, a member without children: {});
        # the editor has one entry, stamped with its last write
        self.assertEqual(owners(entries), {("creator", "Update"): {"f:data": {}},
                                           ("editor", "Update"): {"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}}})
        self.assertEqual([e["time"] for e in entries], ["2024-01-01T00:00:00Z", "2024-01-01T00:00:02Z"])

    def test_an_unchanged_object_changes_nothing(self):
        fm = configmap_manager()
        entries = fm.update(None, cm({"a": "1"}), None, "creator")
        live = stored(cm({"a": "1"}), entries)
        self.assertEqual(fm.update(live, cm({"a": "1"}), None, "other"), entries)

    def test_untracked_objects_stay_untracked_until_applied(self):
        fm = configmap_manager()
        live = stored(cm({"a": "1"}), None)
        self.assertIsNone(fm.update(live, cm({"a": "2"}), None, "editor"))

    def test_clients_may_clear_or_replace_managed_fields(self):
        fm = configmap_manager()
        live = stored(cm({"a": "1"}), fm.update(None, cm({"a": "1"}), None, "creator"))
        self.assertIsNone(fm.update(live, cm({"a": "1"}), [{}], "x"))
        self.assertIsNone(fm.update(live, cm({"a": "1"}), [], "x"))
        mine = [{"manager": "mine", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:data": {"f:a": {}}}}]
        self.assertEqual(fm.update(live, cm({"a": "1"}), mine, "x"), mine)
        # what cannot be decoded is ignored: the live entries stay
        broken = [{"manager": "m", "operation": "Patch", "apiVersion": "v1", "fieldsType": "FieldsV1"}]
        self.assertEqual(fm.update(live, cm({"a": "1"}), broken, "x"), live["metadata"]["managedFields"])

    def test_subresources_never_take_managed_fields_from_the_request(self):
        fm = fieldmanagers.field_manager(rtype("apps/v1", "Deployment"), "status")
        fm.now = clock()
        live = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "uid": "u", "managedFields": [
            {"manager": "a", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}, "spec": {"replicas": 1}}
        new = copy.deepcopy(live)
        new["status"] = {"replicas": 1}
        entries = fm.update(live, new, [{}], "ctl")
        # status is a struct of the Go type, always there: filling it does not add .status itself
        self.assertEqual(owners(entries)[("ctl", "Update")], {"f:status": {"f:replicas": {}}})
        self.assertEqual([e.get("subresource") for e in entries], [None, "status"])

    def test_update_managers_are_capped(self):
        fm = configmap_manager()
        live = stored(cm({"x": "0"}), fm.update(None, cm({"x": "0"}), None, "creator"))
        for i in range(20):
            new = copy.deepcopy(live)
            new["data"][f"k{i}"] = "v"
            live = stored(new, fm.update(live, new, live["metadata"]["managedFields"], f"updater{i}"))
        entries = live["metadata"]["managedFields"]
        self.assertEqual(len(entries), 10)
        # the oldest entries were folded into one, stamped with the newest time it took in
        self.assertEqual(entries[0]["manager"], "ancient-changes")
        self.assertEqual(set(entries[0]["fieldsV1"]["f:data"]), {".", "f:x"} | {f"f:k{i}" for i in range(11)})
        self.assertEqual([e["manager"] for e in entries[1:]], [f"updater{i}" for i in range(11, 20)])


class DecodeTests(unittest.TestCase):
    """Stored entries come back on every update of an object: their decoding is remembered."""

    ENTRIES = [{"manager": "m", "operation": "Update", "apiVersion": "v1", "time": "2024-01-01T01:00:00+01:00",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]

    def test_a_decode_is_the_callers_to_change(self):
        first = managed_entries.decode(copy.deepcopy(self.ENTRIES))
        first.fields.clear()
        first.times.clear()
        again = managed_entries.decode(copy.deepcopy(self.ENTRIES))
        key = managed_entries.manager_key("m", "Update", "v1")
        self.assertEqual(list(again.fields), [key])
        self.assertEqual(again.times, {key: "2024-01-01T00:00:00Z"})  # as upstream writes it back
        self.assertEqual(managed_entries.encode(again)[0]["fieldsV1"], {"f:data": {"f:a": {}}})

    def test_invalid_entries_are_refused_every_time(self):
        broken = [{**self.ENTRIES[0], "operation": "Patch"}]
        for _ in range(2):
            with self.assertRaises(managed_entries.ManagedFieldsError):
                managed_entries.decode(broken)

    def test_entries_that_are_not_json_are_decoded_as_they_are(self):
        # (orjson cannot encode an integer past 64 bits: the entries are decoded without being kept)
        odd = [{**self.ENTRIES[0], "extra": 2 ** 70}]
        self.assertEqual(list(managed_entries.decode(odd).fields), [managed_entries.manager_key("m", "Update", "v1")])


class ApplyTests(unittest.TestCase):
    def test_apply_owns_what_it_applied(self):
        fm = configmap_manager()
        obj, entries = fm.apply({}, cm({"key": "value"}, {"test-label": "test"}), "kubectl", False)
        # the documentation's example: no "." for maps an applier only sets keys of
        self.assertEqual(entries, [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1",
                                    "time": "2024-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                                    "fieldsV1": {"f:data": {"f:key": {}},
                                                 "f:metadata": {"f:labels": {"f:test-label": {}}}}}])
        self.assertEqual(obj["data"], {"key": "value"})

    def test_conflict_force_and_ownership_transfer(self):
        fm = configmap_manager()
        obj, entries = fm.apply({}, cm({"a": "1"}), "first", False)
        live = stored(obj, entries)
        new = cm({"a": "2"})
        live = stored(new, fm.update(live, new, None, "editor"))
        with self.assertRaises(errors.StatusError) as e:
            fm.apply(live, cm({"a": "3"}), "first", False)
        self.assertEqual((e.exception.code, e.exception.reason), (409, "Conflict"))
        self.assertEqual(e.exception.message,
                         'Apply failed with 1 conflict: conflict with "editor" using v1: .data.a')
        self.assertEqual(e.exception.details, {"causes": [{"reason": "FieldManagerConflict", "field": ".data.a",
                                                           "message": 'conflict with "editor" using v1'}]})
        obj, entries = fm.apply(live, cm({"a": "3"}), "first", True)
        self.assertEqual(obj["data"], {"a": "3"})
        self.assertEqual([e["manager"] for e in entries], ["first"])

    def test_applying_the_live_value_shares_ownership(self):
        fm = configmap_manager()
        obj, entries = fm.apply({}, cm({"a": "1"}), "first", False)
        obj, entries = fm.apply(stored(obj, entries), cm({"a": "1"}), "second", False)
        self.assertEqual(owners(entries), {("first", "Apply"): {"f:data": {"f:a": {}}},
                                           ("second", "Apply"): {"f:data": {"f:a": {}}}})
        # a no-op apply does not stamp the new applier's entry (as upstream)
        self.assertNotIn("time", [e for e in entries if e["manager"] == "second"][0])

    def test_fields_no_longer_applied_are_removed_unless_shared(self):
        fm = configmap_manager()
        obj, entries = fm.apply({}, cm({"a": "1", "b": "1", "c": "1"}), "first", False)
        obj, entries = fm.apply(stored(obj, entries), cm({"b": "1"}), "second", False)
        obj, entries = fm.apply(stored(obj, entries), cm({"c": "1"}), "first", False)
        # a: only first had it, gone; b: second still applies it, stays; c: still applied
        self.assertEqual(obj["data"], {"b": "1", "c": "1"})

    def test_updated_fields_are_not_removed_by_an_applier(self):
        fm = configmap_manager()
        obj, entries = fm.apply({}, cm({"a": "1"}), "first", False)
        live = stored(obj, entries)
        new = cm({"a": "1", "b": "2"})
        live = stored(new, fm.update(live, new, None, "editor"))
        obj, _ = fm.apply(live, cm({"c": "3"}), "first", False)
        self.assertEqual(obj["data"], {"b": "2", "c": "3"})

    def test_before_first_apply_owns_an_untracked_object(self):
        fm = configmap_manager()
        live = stored(cm({"a": "1", "b": "1"}), None)
        with self.assertRaises(errors.StatusError) as e:
            fm.apply(live, cm({"a": "2"}), "applier", False)
        self.assertIn('conflict with "before-first-apply" using v1: .data.a', e.exception.message)
        obj, entries = fm.apply(live, cm({"a": "2"}), "applier", True)
        self.assertEqual(owners(entries), {("applier", "Apply"): {"f:data": {"f:a": {}}},
                                           ("before-first-apply", "Update"): {"f:data": {".": {}, "f:b": {}}}})

    def test_configuration_errors(self):
        fm = configmap_manager()
        cases = [
            ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c"}},
             400, "invalid object type: /v1, Kind=Secret"),
            ({"kind": "ConfigMap", "metadata": {"name": "c"}}, 400, "invalid object type: /, Kind=ConfigMap"),
            ({**cm(), "metadata": {"name": "c", "managedFields": []}}, 400, "metadata.managedFields must be nil"),
            ({**cm(), "dat": {}}, 400, "failed to create typed patch object (default/c; /v1, Kind=ConfigMap): "
                                       ".dat: field not declared in schema"),
        ]
        for config, code, message in cases:
            with self.assertRaises(errors.StatusError) as e:
                fm.apply({}, config, "m", False)
            self.assertEqual((e.exception.code, e.exception.message), (code, message))

    def test_kubectl_takes_over_fields_its_last_applied_configuration_set(self):
        """Switching from client-side to server-side apply: conflicts with fields whose live
        value is the last-applied one are settled for the ``kubectl`` manager."""
        fm = fieldmanagers.field_manager(rtype("apps/v1", "Deployment"))
        fm.now = clock()
        last = ('{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","labels":{"app":"a"}},'
                '"spec":{"replicas":3,"selector":{"matchLabels":{"app":"a"}},"template":{"metadata":{"labels":'
                '{"app":"a"}},"spec":{"containers":[{"name":"c","image":"i"}]}}}}')
        created = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
            "name": "d", "namespace": "default", "labels": {"app": "a"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last}},
            "spec": {"replicas": 100, "selector": {"matchLabels": {"app": "a"}}, "template": {
                "metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}
        live = stored(created, fm.update(None, created, None, "kubectl-client-side-apply"))
        config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"app": "b"}},
                  "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "i2"}]}}}}
        # replicas differs from what was last applied: a real conflict
        with self.assertRaises(errors.StatusError) as e:
            fm.apply(live, config, "kubectl", False)
        self.assertEqual(e.exception.message, 'Apply failed with 1 conflict: conflict with '
                         '"kubectl-client-side-apply" using apps/v1: .spec.replicas')
        del config["spec"]["replicas"]
        obj, entries = fm.apply(live, config, "kubectl", False)
        self.assertEqual((obj["spec"]["replicas"], obj["metadata"]["labels"]), (100, {"app": "b"}))
        self.assertEqual(obj["spec"]["template"]["spec"]["containers"][0]["image"], "i2")
        # the annotation now holds the applied configuration, as kubectl writes it
        self.assertEqual(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
                         '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"b"},"name":"d"},'
                         '"spec":{"template":{"spec":{"containers":[{"image":"i2","name":"c"}]}}}}\n')
        # another manager gets no such help
        with self.assertRaises(errors.StatusError):
            fm.apply(live, config, "someone-else", False)


class ScaleTests(unittest.TestCase):
    def test_replicas_owners_round_trip_through_the_scale(self):
        path = scale.replicas_path(".spec.replicas")
        parent = [{"manager": "test", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:spec": {"f:replicas": {}, "f:selector": {}}}}]
        self.assertEqual(scale.to_subresource(parent, path), [
            {"manager": "test", "operation": "Apply", "apiVersion": "autoscaling/v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}}])
        scale_entries = [{"manager": "scale", "operation": "Update", "apiVersion": "autoscaling/v1",
                          "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                          "subresource": "scale"}]
        self.assertEqual(scale.to_parent(parent, scale_entries, path, "apps/v1"), [
            {"manager": "test", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:selector": {}}}},
            {"manager": "scale", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}])


class ManagerNameTests(unittest.TestCase):
    def test_from_user_agent(self):
        self.assertEqual(manager_from_user_agent("kubectl/v1.32.4 (linux/amd64) kubernetes/abc"), "kubectl")
        self.assertEqual(manager_from_user_agent("OpenAPI-Generator/31.0.0/python"), "OpenAPI-Generator")
        self.assertEqual(manager_from_user_agent("a\x00b\tc"), "abc")
        self.assertEqual(manager_from_user_agent("é" * 100), "é" * 64)
        self.assertEqual(manager_from_user_agent(""), "")

    def test_validation(self):
        self.assertEqual(validate_field_manager("ok name"), [])
        self.assertEqual([c.to_dict() for c in validate_field_manager("x" * 129)],
                         [{"reason": "FieldValueTooLong", "field": "fieldManager",
                           "message": "Too long: may not be more than 128 bytes"}])
        # the value is printed with Go's %q, which writes \a for U+0007
        self.assertEqual([c.to_dict() for c in validate_field_manager("a\x07b")],
                         [{"reason": "FieldValueInvalid", "field": "fieldManager",
                           "message": 'Invalid value: "a\\ab": invalid character U+0007 (at position 1)'}])

    def test_a_validation_is_the_callers_to_change(self):
        # (the scope puts a "required" cause first in the list it is given; names are checked once)
        first = validate_field_manager("x" * 129)
        first.insert(0, "added by the caller")
        self.assertEqual(len(validate_field_manager("x" * 129)), 1)
