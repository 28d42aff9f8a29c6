"""Request info from the URL and query (upstream's RequestInfoFactory): the name a list or watch pins with
its ``metadata.name`` field selector, and the field selector the authorizers see."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.endpoints.filters.authorization import attributes_for
from kapiserver.endpoints.request_info import parse_request_info
from kapiserver.machinery.fields import FieldRequirement


def info(method: str, path: str, **query: str):
    return parse_request_info(method, path, {k.encode(): [v.encode()] for k, v in query.items()})


class SelectorTests(unittest.TestCase):
    def test_a_list_or_watch_of_one_name(self) -> None:
        watch = info("GET", "/api/v1/namespaces/ns/secrets", watch="true", fieldSelector="metadata.name=s1")
        self.assertEqual((watch.verb, watch.name, watch.field_selector), ("watch", "s1", "metadata.name=s1"))
        listed = info("GET", "/api/v1/nodes", fieldSelector="metadata.name==n1,spec.unschedulable=false")
        self.assertEqual((listed.verb, listed.name), ("list", "n1"))
        # a namespace by its path is in itself (RoleBindings there cover it); a list of namespaces is not
        self.assertEqual(attributes_for(info("GET", "/api/v1/namespaces/ns")).namespace, "ns")
        self.assertEqual(attributes_for(info("GET", "/api/v1/watch/namespaces/ns")).namespace, "ns")
        by_selector = attributes_for(info("GET", "/api/v1/namespaces", fieldSelector="metadata.name=ns"))
        self.assertEqual((by_selector.verb, by_selector.name, by_selector.namespace), ("list", "ns", ""))
        # not a name: another operator, a bad selector, a name that is no path segment
        for selector in ("metadata.name!=s1", "metadata.name", "metadata.name=a/b", "metadata.name=.."):
            self.assertEqual(info("GET", "/api/v1/namespaces/ns/secrets", fieldSelector=selector).name, "",
                             selector)

    def test_the_selector_authorizers_see(self) -> None:
        attributes = attributes_for(info("GET", "/api/v1/pods", fieldSelector="spec.nodeName=n1"))
        self.assertEqual(attributes.field_selector, (FieldRequirement("spec.nodeName", "=", "n1"),))
        deletion = attributes_for(info("DELETE", "/api/v1/namespaces/ns/pods", fieldSelector="spec.nodeName=n1"))
        self.assertEqual((deletion.verb, len(deletion.field_selector)), ("deletecollection", 1))
        # none for a deprecated watch path, a get, a selector that does not parse
        for path, method, selector in (("/api/v1/watch/pods", "GET", "spec.nodeName=n1"),
                                       ("/api/v1/namespaces/ns/pods/p", "GET", "spec.nodeName=n1"),
                                       ("/api/v1/pods", "GET", "spec.nodeName")):
            self.assertEqual(attributes_for(info(method, path, fieldSelector=selector)).field_selector, (), path)
