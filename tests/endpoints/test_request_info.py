"""Request info: the verb and the name of list and watch requests, against upstream's
RequestInfoFactory (v1.32 ``requestinfo.go`` and the cases of its ``requestinfo_test.go``).

A list or watch whose field selector requires ``metadata.name`` to equal a value is named
after it, so RBAC's ``resourceNames`` can allow it; a query that does not decode names nothing."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from twisted.trial import unittest

from kapiserver.endpoints.filters.authorization import attributes_for
from kapiserver.machinery.fields import FieldRequirement
from kapiserver.request.info import RequestInfo, parse_request_info


def info(method: str, url: str) -> RequestInfo:
    parts = urlsplit(url)
    # as twisted.web parses a query: blank values kept, bytes
    args = {k.encode(): [v.encode() for v in vs] for k, vs in parse_qs(parts.query, keep_blank_values=True).items()}
    return parse_request_info(method, parts.path, args)


R = "/apis/group/version/resource"
CM = "/api/v1/namespaces/ns/configmaps"

# (method, url, verb, name)
CASES = [
    # upstream's table
    ("GET", R, "list", ""),
    ("GET", R + "?fieldSelector=metadata.name=name1", "list", "name1"),
    ("GET", R + "?watch=true&fieldSelector=metadata.name=name1", "watch", "name1"),
    ("GET", R + "?fieldSelector=foo=bar&labelSelector=baz=qux", "list", ""),
    ("GET", R + "?fieldSelector=metadata.name=name1,foo", "list", ""),  # does not parse
    ("GET", R + "?fieldSelector=metadata.name=name1,foo&watch=true", "watch", ""),
    ("GET", R + "?fieldSelector=metadata.name=name1,foo&watch=false", "list", ""),
    ("DELETE", R + "?fieldSelector=metadata.name=x", "deletecollection", ""),
    ("GET", R + "?fieldSelector=metadata.name=foo&fieldSelector=metadata.name=bar", "list", "foo"),
    ("GET", R + "/name?fieldSelector=metadata.name=other", "get", "name"),
    ("GET", "/apis/group/version/watch/resource?fieldSelector=metadata.name=foo", "watch", ""),
    ("GET", "/apis/group/version/watch/resource/name?fieldSelector=metadata.name=foo", "watch", "name"),
    # what qualifies: = and ==, the first in sorted order of several, never !=
    ("GET", CM + "?fieldSelector=metadata.name%3D%3Dcm1", "list", "cm1"),
    ("GET", CM + "?fieldSelector=metadata.name!%3Dcm1", "list", ""),
    ("GET", CM + "?fieldSelector=metadata.namespace%3Dns,metadata.name%3Dcm1", "list", "cm1"),
    ("GET", CM + "?fieldSelector=metadata.name%3Dz,metadata.name%3Da", "list", "a"),
    ("GET", CM + "?fieldSelector=metadata.name!%3Dx,metadata.name%3Dy&watch=1", "watch", "y"),
    ("GET", CM + "?fieldSelector=metadata.name%3D", "list", ""),
    # a name that cannot be a path segment names nothing
    ("GET", CM + "?fieldSelector=metadata.name%3D..", "list", ""),
    ("GET", CM + "?fieldSelector=metadata.name%3Da%2Fb", "list", ""),
    ("GET", CM + "?fieldSelector=metadata.name%3Da%25b", "list", ""),
    # any other list option that does not decode: no name, and watch read alone
    ("GET", CM + "?fieldSelector=metadata.name%3Dcm1&labelSelector=a%20b", "list", ""),
    ("GET", CM + "?fieldSelector=metadata.name%3Dcm1&limit=ten", "list", ""),
    ("GET", CM + "?fieldSelector=metadata.name%3Dcm1&limit=", "list", ""),
    ("GET", CM + "?fieldSelector=metadata.name%3Dcm1&timeoutSeconds=99999999999999999999&watch=yes",
     "watch", ""),
    ("GET", CM + "?fieldSelector=metadata.name%3Dcm1&limit=500&resourceVersion=0", "list", "cm1"),
    # watch is Go's bool: anything but 0 and false (in any case) is a watch
    ("GET", CM + "?watch=FALSE&fieldSelector=metadata.name%3Dcm1", "list", "cm1"),
    ("GET", CM + "?watch=0", "list", ""),
    ("GET", CM + "?watch=", "watch", ""),
    ("GET", CM + "?watch=yes", "watch", ""),
]


class RequestInfoTests(unittest.TestCase):
    def test_verb_and_name_as_upstream(self) -> None:
        for method, url, verb, name in CASES:
            got = info(method, url)
            self.assertEqual((got.verb, got.name), (verb, name), (method, url))

    def test_a_named_list_keeps_its_namespace_and_resource(self) -> None:
        got = info("GET", CM + "?fieldSelector=metadata.name%3Dcm1")
        self.assertEqual((got.namespace, got.resource, got.subresource, got.scope), ("ns", "configmaps", "",
                                                                                    "resource"))
        attributes = attributes_for(got)
        self.assertEqual((attributes.verb, attributes.namespace, attributes.name), ("list", "ns", "cm1"))

    def test_a_namespace_list_named_by_selector_is_not_inside_that_namespace(self) -> None:
        # upstream: /api/v1/namespaces/foo is in namespace foo; a list of namespaces is not
        by_path = attributes_for(info("GET", "/api/v1/namespaces/foo"))
        by_selector = attributes_for(info("GET", "/api/v1/namespaces?fieldSelector=metadata.name%3Dfoo"))
        self.assertEqual((by_path.verb, by_path.namespace, by_path.name), ("get", "foo", "foo"))
        self.assertEqual((by_selector.verb, by_selector.namespace, by_selector.name), ("list", "", "foo"))

class AuthorizerSelectorTests(unittest.TestCase):
    """The raw field selector the authorizers see (the Node authorizer's AuthorizeNodeWithSelectors)."""

    def test_the_selector_authorizers_see(self) -> None:
        attributes = attributes_for(_info("GET", "/api/v1/pods", fieldSelector="spec.nodeName=n1"))
        self.assertEqual(attributes.field_selector, (FieldRequirement("spec.nodeName", "=", "n1"),))
        deletion = attributes_for(_info("DELETE", "/api/v1/namespaces/ns/pods", fieldSelector="spec.nodeName=n1"))
        self.assertEqual((deletion.verb, len(deletion.field_selector)), ("deletecollection", 1))
        # none for a deprecated watch path, a get, a selector that does not parse
        for path, method, selector in (("/api/v1/watch/pods", "GET", "spec.nodeName=n1"),
                                       ("/api/v1/namespaces/ns/pods/p", "GET", "spec.nodeName=n1"),
                                       ("/api/v1/pods", "GET", "spec.nodeName")):
            self.assertEqual(attributes_for(_info(method, path, fieldSelector=selector)).field_selector, (), path)


def _info(method: str, path: str, **query: str):
    return parse_request_info(method, path, {k.encode(): [v.encode()] for k, v in query.items()})
