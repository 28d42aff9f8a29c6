"""Field selectors per kind: which labels each served version accepts, the 400 for the others,
and the values objects have for them, against upstream's table.

The table is upstream v1.32's: the field label conversion functions registered per kind and
version (``pkg/apis/*/v*/conversion.go``; kinds without one get
``DefaultMetaV1FieldSelectorConversion``) and the kinds' field sets (``GetAttrs`` /
``ToSelectableFields`` in ``pkg/registry/*/*/strategy.go``).  Matching goes through the
Store's matcher, the predicate lists, watches and deletecollection use.
"""
from __future__ import annotations

from typing import Callable

from twisted.internet import defer, reactor
from twisted.trial import unittest

from kapiserver.apiextensions import custom_resource
from kapiserver.apiextensions.customresourcedefinitions import resource_type as crd_resource_type
from kapiserver.apis.apiregistration.apiservices import resource_type as apiservice_resource_type
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery import errors, labels
from kapiserver.machinery.fields import escape_value, parse_field_selector
from kapiserver.registry.options import ListOptions
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store
from kapiserver.storage.sqlite import SQLiteStorage

NAME_NS = ("metadata.name", "metadata.namespace")
INVOLVED = tuple(f"involvedObject.{f}" for f in ("kind", "namespace", "name", "uid", "apiVersion",
                                                 "resourceVersion", "fieldPath"))


def not_supported(label: str) -> str:
    return f"field label not supported: {label}"


def default_message(label: str) -> str:
    return f'"{label}" is not a known field selector: only "metadata.name", "metadata.namespace"'


# (group, version, plural) -> (the labels accepted, the message refusing any other)
UPSTREAM: dict[tuple[str, str, str], tuple[frozenset[str], Callable[[str], str]]] = {
    ("", "v1", "pods"): (frozenset({*NAME_NS, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                    "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
                                    "status.podIPs", "status.nominatedNodeName", "spec.host"}), not_supported),
    ("", "v1", "nodes"): (frozenset({"metadata.name", "spec.unschedulable"}), not_supported),
    ("", "v1", "replicationcontrollers"): (frozenset({*NAME_NS, "status.replicas"}), not_supported),
    ("", "v1", "events"): (frozenset({*NAME_NS, *INVOLVED, "reason", "reportingComponent", "source", "type"}),
                           not_supported),
    ("", "v1", "namespaces"): (frozenset({"metadata.name", "status.phase"}), not_supported),
    ("", "v1", "secrets"): (frozenset({*NAME_NS, "type"}), not_supported),
    ("", "v1", "services"): (frozenset({*NAME_NS, "spec.clusterIP", "spec.type"}), not_supported),
    ("events.k8s.io", "v1", "events"): (
        frozenset({*NAME_NS, "reason", "type", "reportingController",
                   *(f"regarding.{f.split('.', 1)[1]}" for f in INVOLVED)}), not_supported),
    ("batch", "v1", "jobs"): (frozenset({*NAME_NS, "status.successful"}),
                              lambda label: f'field label "{label}" not supported for Job'),
    ("certificates.k8s.io", "v1", "certificatesigningrequests"): (
        frozenset({"metadata.name", "spec.signerName"}), not_supported),
}


def served_types() -> list[ResourceType]:
    """Every built-in kind this server serves (the aggregator's and apiextensions' too)."""
    return [*builtin_resource_types(), apiservice_resource_type(), crd_resource_type()]


class AcceptedLabelsTests(unittest.TestCase):
    def test_every_served_kind_accepts_what_upstream_accepts(self) -> None:
        seen = set()
        for rtype in served_types():
            key = (rtype.group, rtype.version, rtype.plural)
            seen.add(key)
            accepted, _ = UPSTREAM.get(key, (frozenset(NAME_NS), default_message))
            self.assertEqual(rtype.field_labels.accepted(), accepted, key)
        self.assertLessEqual(set(UPSTREAM), seen)  # no row of the table is left untested

    def test_every_other_label_is_refused_with_the_kinds_message(self) -> None:
        for rtype in served_types():
            key = (rtype.group, rtype.version, rtype.plural)
            _, message = UPSTREAM.get(key, (frozenset(NAME_NS), default_message))
            for label in ("spec.bogus", "metadata.uid", "status.podIP" if key[2] != "pods" else "spec.host.x"):
                with self.assertRaises(errors.StatusError, msg=key) as cm:
                    rtype.field_labels.convert(parse_field_selector(f"{label}=x"))
                self.assertEqual((cm.exception.code, cm.exception.reason, cm.exception.message),
                                 (400, "BadRequest", message(label)), key)

    def test_the_first_refused_label_in_sorted_order_is_named(self) -> None:
        pods = {r.plural: r for r in builtin_resource_types()}["pods"]
        with self.assertRaises(errors.StatusError) as cm:
            pods.field_labels.convert(parse_field_selector("z.b=1,spec.nodeName=n,a.x!=2"))
        self.assertEqual(cm.exception.message, "field label not supported: a.x")

    def test_every_label_a_kind_accepts_is_in_its_field_set(self) -> None:
        """A converted label names a value of the object (upstream leaves only a Pod's
        status.podIPs out of the set: it is always "")."""
        for rtype in served_types():
            for label in rtype.field_labels.accepted():
                converted = rtype.field_labels.convert(parse_field_selector(f"{label}=x")).requirements[0].field
                if (rtype.plural, converted) == ("pods", "status.podIPs"):
                    continue
                self.assertIn(converted, {*NAME_NS, *rtype.selectable_fields}, (rtype.plural, label))

    def test_custom_resources_accept_their_selectable_fields(self) -> None:
        def crd(scope: str) -> dict:
            return {"metadata": {"name": "widgets.example.com"},
                    "spec": {"group": "example.com", "scope": scope,
                             "names": {"plural": "widgets", "kind": "Widget"},
                             "versions": [{"name": "v1", "served": True, "storage": True,
                                           "selectableFields": [{"jsonPath": ".spec.color"}]}]}}
        namespaced, = custom_resource.resource_types(crd("Namespaced"))
        cluster, = custom_resource.resource_types(crd("Cluster"))
        self.assertEqual(namespaced.field_labels.accepted(), {*NAME_NS, "spec.color"})
        # upstream's crConverter: a cluster-scoped kind has no namespace to select on
        self.assertEqual(cluster.field_labels.accepted(), {"metadata.name", "spec.color"})
        with self.assertRaises(errors.StatusError) as cm:
            cluster.field_labels.convert(parse_field_selector("metadata.namespace=default"))
        self.assertEqual(cm.exception.message, "field label not supported: metadata.namespace")


def pod(spec: dict | None = None, status: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
            "spec": spec or {}, "status": status or {}}


# (group, plural, object, label as a client writes it, the value upstream computes)
VALUES = [
    ("", "pods", pod({"nodeName": "knode"}), "spec.nodeName", "knode"),
    ("", "pods", pod({"nodeName": "knode"}), "spec.host", "knode"),
    ("", "pods", pod(), "spec.nodeName", ""),
    ("", "pods", pod({"restartPolicy": "Never"}), "spec.restartPolicy", "Never"),
    ("", "pods", pod({"schedulerName": "default-scheduler"}), "spec.schedulerName", "default-scheduler"),
    ("", "pods", pod({"serviceAccountName": "sa"}), "spec.serviceAccountName", "sa"),
    ("", "pods", pod({"serviceAccount": "old"}), "spec.serviceAccountName", "old"),
    ("", "pods", pod({"hostNetwork": True}), "spec.hostNetwork", "true"),
    ("", "pods", pod({"hostNetwork": False}), "spec.hostNetwork", "false"),
    ("", "pods", pod(), "spec.hostNetwork", "false"),
    ("", "pods", pod(status={"phase": "Running"}), "status.phase", "Running"),
    ("", "pods", pod(status={"podIPs": [{"ip": "10.1.0.5"}, {"ip": "fd00::5"}]}), "status.podIP", "10.1.0.5"),
    ("", "pods", pod(status={"podIP": "10.1.0.6", "podIPs": [{"ip": "10.1.0.7"}]}), "status.podIP", "10.1.0.6"),
    ("", "pods", pod(status={"podIPs": [{"ip": "10.1.0.5"}]}), "status.podIPs", ""),
    ("", "pods", pod(status={"nominatedNodeName": "n2"}), "status.nominatedNodeName", "n2"),
    ("", "pods", pod(), "metadata.namespace", "ns"),
    ("", "nodes", {"metadata": {"name": "n"}, "spec": {"unschedulable": True}}, "spec.unschedulable", "true"),
    ("", "nodes", {"metadata": {"name": "n"}, "spec": {}}, "spec.unschedulable", "false"),
    ("", "services", {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"clusterIP": "None"}},
     "spec.clusterIP", "None"),
    ("", "services", {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"type": "NodePort"}},
     "spec.type", "NodePort"),
    ("", "services", {"metadata": {"name": "s", "namespace": "ns"}, "spec": {}}, "spec.clusterIP", ""),
    ("", "secrets", {"metadata": {"name": "s", "namespace": "ns"}, "type": "kubernetes.io/tls"}, "type",
     "kubernetes.io/tls"),
    ("", "namespaces", {"metadata": {"name": "n"}, "status": {"phase": "Terminating"}}, "status.phase",
     "Terminating"),
    ("", "replicationcontrollers", {"metadata": {"name": "r", "namespace": "ns"}, "status": {"replicas": 3}},
     "status.replicas", "3"),
    ("", "replicationcontrollers", {"metadata": {"name": "r", "namespace": "ns"}, "status": {}},
     "status.replicas", "0"),
    ("batch", "jobs", {"metadata": {"name": "j", "namespace": "ns"}, "status": {"succeeded": 2}},
     "status.successful", "2"),
    ("batch", "jobs", {"metadata": {"name": "j", "namespace": "ns"}}, "status.successful", "0"),
    ("certificates.k8s.io", "certificatesigningrequests",
     {"metadata": {"name": "c"}, "spec": {"signerName": "kubernetes.io/kubelet-serving"}}, "spec.signerName",
     "kubernetes.io/kubelet-serving"),
    ("", "events", {"metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {"kind": "Pod", "name": "p"},
                    "reason": "Started", "type": "Normal", "source": {"component": "kubelet"}},
     "involvedObject.kind", "Pod"),
    ("", "events", {"metadata": {"name": "e", "namespace": "ns"}, "involvedObject": {"kind": "Pod"}},
     "involvedObject.uid", ""),
    ("", "events", {"metadata": {"name": "e", "namespace": "ns"}, "source": {"component": "kubelet"},
                    "reportingComponent": "ctl"}, "source", "kubelet"),
    # no source component: the reporting controller is the source
    ("", "events", {"metadata": {"name": "e", "namespace": "ns"}, "reportingComponent": "ctl"}, "source", "ctl"),
    ("", "events", {"metadata": {"name": "e", "namespace": "ns"}, "reportingComponent": "ctl"},
     "reportingComponent", "ctl"),
    ("events.k8s.io", "events", {"metadata": {"name": "e", "namespace": "ns"}, "regarding": {"name": "p"},
                                 "reportingController": "ctl", "reason": "R", "type": "Warning"},
     "regarding.name", "p"),
    ("events.k8s.io", "events", {"metadata": {"name": "e", "namespace": "ns"}, "reportingController": "ctl"},
     "reportingController", "ctl"),
    ("events.k8s.io", "events", {"metadata": {"name": "e", "namespace": "ns"}, "type": "Warning"}, "type", "Warning"),
    ("", "configmaps", {"metadata": {"name": "c", "namespace": "ns"}}, "metadata.name", "c"),
    ("rbac.authorization.k8s.io", "clusterroles", {"metadata": {"name": "r"}}, "metadata.namespace", ""),
]


class FieldValueTests(unittest.TestCase):
    def setUp(self) -> defer.Deferred:
        self.storage = SQLiteStorage(":memory:", reactor=reactor)
        self.addCleanup(self.storage.stop)
        self.stores = {(r.group, r.plural): Store(r, self.storage) for r in builtin_resource_types()}
        return self.storage.start()

    def matches(self, group: str, plural: str, selector: str, obj: dict) -> bool:
        matcher = self.stores[(group, plural)].matcher(ListOptions(labels.EVERYTHING, parse_field_selector(selector)))
        assert matcher is not None
        return matcher(obj)

    def test_values_are_computed_as_upstream_computes_them(self) -> None:
        for group, plural, obj, label, value in VALUES:
            case = (plural, label, value)
            self.assertTrue(self.matches(group, plural, f"{label}={escape_value(value)}", obj), case)
            self.assertTrue(self.matches(group, plural, f"{label}=={escape_value(value)}", obj), case)
            self.assertFalse(self.matches(group, plural, f"{label}!={escape_value(value)}", obj), case)
            self.assertFalse(self.matches(group, plural, f"{label}=other", obj), case)

    def test_the_kubelets_service_selector(self) -> None:
        headless = {"metadata": {"name": "h", "namespace": "ns"}, "spec": {"clusterIP": "None"}}
        normal = {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"clusterIP": "10.0.0.7"}}
        self.assertEqual([self.matches("", "services", "spec.clusterIP!=None", s) for s in (headless, normal)],
                         [False, True])

    def test_requirements_are_a_conjunction(self) -> None:
        bound = pod({"nodeName": "knode"}, {"phase": "Running"})
        self.assertTrue(self.matches("", "pods", "spec.nodeName=knode,status.phase!=Succeeded", bound))
        self.assertFalse(self.matches("", "pods", "spec.nodeName=knode,status.phase=Pending", bound))
