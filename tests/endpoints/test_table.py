"""Table output (``as=Table``) and PartialObjectMetadata, as kubectl receives them."""
from __future__ import annotations

import datetime

from twisted.trial import unittest

from kapiserver.apis import columns
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.apis.events.events import core_to_events_v1
from kapiserver.endpoints import partial_metadata, table
from kapiserver.registry.resource_type import ResourceType, Strategy

NOW = datetime.datetime(2024, 1, 10, 12, 0, 0, tzinfo=datetime.timezone.utc)


def ago(**delta) -> str:
    return (NOW - datetime.timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(name: str, age: dict, **extra) -> dict:
    return {"name": name, "namespace": "default", "uid": "u-" + name, "resourceVersion": "7",
            "creationTimestamp": ago(**age), **extra}


class HumanDurationTests(unittest.TestCase):
    def test_precision_shrinks_with_age(self) -> None:
        cases = [(-2, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (185, "3m5s"),
                 (599, "9m59s"), (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (7 * 3600 + 59 * 60, "7h59m"),
                 (8 * 3600, "8h"), (47 * 3600 + 59 * 60, "47h"), (48 * 3600, "2d"), (49 * 3600, "2d1h"),
                 (8 * 86400, "8d"), (729 * 86400, "729d"), (730 * 86400, "2y"), (731 * 86400, "2y1d"),
                 (8 * 365 * 86400, "8y"), (20 * 365 * 86400, "20y")]
        self.assertEqual([columns.human_duration(s) for s, _ in cases], [want for _, want in cases])

    def test_unset_time_is_unknown(self) -> None:
        self.assertEqual(columns.since(None), "<unknown>")
        self.assertEqual(columns.since("2024-01-10T11:55:00Z", NOW), "5m")


class KindTableTests(unittest.TestCase):
    def setUp(self) -> None:
        self.patch(columns, "_now", lambda: NOW)
        self.types = {(r.group, r.plural): r for r in builtin_resource_types()}

    def table(self, group: str, plural: str, objects: list, **kw) -> dict:
        return table.to_table(self.types[(group, plural)], objects, **kw)

    def header(self, t: dict) -> list:
        return [(c["name"], c["type"], c["format"], c["priority"]) for c in t["columnDefinitions"]]

    def cells(self, t: dict) -> list:
        return [r["cells"] for r in t["rows"]]

    def test_configmaps(self) -> None:
        t = self.table("", "configmaps", [{"metadata": meta("cm1", {"minutes": 5}), "data": {"a": "1"},
                                           "binaryData": {"b": "eA=="}},
                                          {"metadata": meta("cm2", {"days": 3, "hours": 2})}])
        self.assertEqual(self.header(t), [("Name", "string", "name", 0), ("Data", "string", "", 0),
                                          ("Age", "string", "", 0)])
        self.assertEqual(self.cells(t), [["cm1", 2, "5m"], ["cm2", 0, "3d2h"]])
        self.assertTrue(t["columnDefinitions"][0]["description"].startswith("Name must be unique"))
        self.assertEqual((t["kind"], t["apiVersion"]), ("Table", "meta.k8s.io/v1"))

    def test_namespaces(self) -> None:
        t = self.table("", "namespaces", [{"metadata": meta("ns1", {"seconds": 30}), "status": {"phase": "Active"}}])
        self.assertEqual([c[0] for c in self.header(t)], ["Name", "Status", "Age"])
        self.assertEqual(t["columnDefinitions"][1]["description"], "The status of the namespace")
        self.assertEqual(self.cells(t), [["ns1", "Active", "30s"]])

    def test_secrets(self) -> None:
        t = self.table("", "secrets", [{"metadata": meta("s", {"hours": 5}), "type": "Opaque",
                                        "data": {"a": "", "b": ""}}])
        self.assertEqual([c[0] for c in self.header(t)], ["Name", "Type", "Data", "Age"])
        self.assertEqual(self.cells(t), [["s", "Opaque", 2, "5h"]])

    def test_serviceaccounts(self) -> None:
        t = self.table("", "serviceaccounts", [{"metadata": meta("default", {"days": 40})}])
        self.assertEqual([c[0] for c in self.header(t)], ["Name", "Secrets", "Age"])
        self.assertEqual(self.cells(t), [["default", 0, "40d"]])

    def test_leases(self) -> None:
        t = self.table("coordination.k8s.io", "leases", [
            {"metadata": meta("l1", {"minutes": 2}), "spec": {"holderIdentity": "node-1"}},
            {"metadata": meta("l2", {"minutes": 2}), "spec": {}}])
        self.assertEqual([c[0] for c in self.header(t)], ["Name", "Holder", "Age"])
        self.assertEqual(self.cells(t), [["l1", "node-1", "2m"], ["l2", "", "2m"]])

    def core_event(self) -> dict:
        return {"metadata": meta("p.1", {"hours": 1}),
                "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default",
                                   "fieldPath": "spec.containers{app}"},
                "reason": "Pulled", "message": " done \n", "type": "Normal",
                "source": {"component": "kubelet", "host": "node-1"},
                "firstTimestamp": ago(minutes=10), "lastTimestamp": ago(minutes=3), "count": 4}

    def test_core_events_all_columns_sent(self) -> None:
        t = self.table("", "events", [self.core_event()])
        self.assertEqual(self.header(t), [
            ("Last Seen", "string", "", 0), ("Type", "string", "", 0), ("Reason", "string", "", 0),
            ("Object", "string", "", 0), ("Subobject", "string", "", 1), ("Source", "string", "", 1),
            ("Message", "string", "", 0), ("First Seen", "string", "", 1), ("Count", "string", "", 1),
            ("Name", "string", "name", 1)])
        self.assertEqual(self.cells(t), [["3m", "Normal", "Pulled", "pod/web", "spec.containers{app}",
                                          "kubelet, node-1", "done", "10m", 4, "p.1"]])

    def test_new_style_event_cells(self) -> None:
        event = {"metadata": meta("e", {"hours": 1}), "involvedObject": {"kind": "Node"}, "type": "Warning",
                 "reason": "R", "eventTime": ago(minutes=7), "reportingComponent": "ctl",
                 "reportingInstance": "i-1"}
        t = self.table("", "events", [event])
        self.assertEqual(self.cells(t), [["7m", "Warning", "R", "node", "", "ctl, i-1", "", "7m", 1, "e"]])
        event["series"] = {"count": 5, "lastObservedTime": ago(seconds=20)}
        self.assertEqual(self.cells(self.table("", "events", [event]))[0][0::8], ["20s", 5])

    def test_events_k8s_io_prints_like_core(self) -> None:
        core = self.table("", "events", [self.core_event()])
        v1 = self.table("events.k8s.io", "events", [core_to_events_v1(self.core_event())])
        self.assertEqual(self.cells(v1), self.cells(core))
        self.assertEqual(v1["columnDefinitions"], core["columnDefinitions"])

    def test_default_table_for_kinds_without_columns(self) -> None:
        rtype = ResourceType(group="example.com", version="v1", kind="Thing", plural="things", singular="thing",
                             namespaced=True, strategy=Strategy())
        t = table.to_table(rtype, [{"metadata": meta("t", {"days": 1})}])
        self.assertEqual(self.header(t), [("Name", "string", "name", 0), ("Created At", "date", "", 0)])
        self.assertEqual(self.cells(t), [["t", "2024-01-09T12:00:00Z"]])

    def test_include_object(self) -> None:
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cm", {"seconds": 1}), "data": {"k": "v"}}
        rows = self.table("", "configmaps", [obj])["rows"]
        self.assertEqual(rows[0]["object"], {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                             "metadata": obj["metadata"]})
        self.assertIsNone(self.table("", "configmaps", [obj], include_object="None")["rows"][0]["object"])
        self.assertEqual(self.table("", "configmaps", [obj], include_object="Object")["rows"][0]["object"], obj)
        beta = self.table("", "configmaps", [obj], api_version="meta.k8s.io/v1beta1")
        self.assertEqual((beta["apiVersion"], beta["rows"][0]["object"]["apiVersion"]),
                         ("meta.k8s.io/v1beta1", "meta.k8s.io/v1beta1"))

    def test_list_metadata_is_kept(self) -> None:
        t = self.table("", "configmaps", [], list_meta={"resourceVersion": "42", "continue": "tok",
                                                        "remainingItemCount": 3})
        self.assertEqual(t["metadata"], {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3})
        self.assertEqual(t["rows"], [])
        single = self.table("", "configmaps", [{"metadata": meta("cm", {"seconds": 1})}])
        self.assertEqual(single["metadata"], {"resourceVersion": "7"})

    def test_watch_events_carry_headers_only_first(self) -> None:
        rtype = self.types[("", "configmaps")]
        obj = {"metadata": meta("cm", {"seconds": 1})}
        first = table.to_table_for_watch_event(rtype, obj, first=True)
        later = table.to_table_for_watch_event(rtype, obj, first=False)
        self.assertEqual(len(first["columnDefinitions"]), 3)
        self.assertIsNone(later["columnDefinitions"])
        self.assertEqual(later["rows"][0]["cells"], ["cm", 0, "1s"])

    def test_broken_object_prints_empty_cells(self) -> None:
        t = self.table("", "configmaps", [{"metadata": meta("cm", {"seconds": 1}), "data": 5}])
        self.assertEqual(self.cells(t), [["cm", None, "1s"]])


class PartialMetadataTests(unittest.TestCase):
    def test_single_and_list(self) -> None:
        obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"a": "b"}},
               "data": {"k": "djE="}}
        self.assertEqual(partial_metadata.to_partial_object_metadata(obj),
                         {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]})
        listed = partial_metadata.to_partial_object_metadata_list([obj], "meta.k8s.io/v1beta1",
                                                                  {"resourceVersion": "9"})
        self.assertEqual(listed, {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1beta1",
                                  "metadata": {"resourceVersion": "9"},
                                  "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1beta1",
                                             "metadata": obj["metadata"]}]})
