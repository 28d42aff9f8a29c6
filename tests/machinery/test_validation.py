"""Name, label and ObjectMeta validation with upstream's messages."""
from twisted.trial import unittest

from kapiserver.machinery import validation as v
from kapiserver.machinery.validation import DNS1123_LABEL, DNS1123_SUBDOMAIN, PATH_SEGMENT

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                 "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                 "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


class NameTests(unittest.TestCase):
    def test_subdomain(self):
        self.assertEqual(v.is_dns1123_subdomain("a.b-c"), [])
        self.assertEqual(v.is_dns1123_subdomain("A"), [SUBDOMAIN_MSG])
        self.assertEqual(v.is_dns1123_subdomain("a" * 254), ["must be no more than 253 characters"])

    def test_label(self):
        self.assertEqual(v.is_dns1123_label("my-name"), [])
        self.assertEqual(v.is_dns1123_label("a.b"), ["must not contain dots"])
        self.assertEqual(v.is_dns1123_label("-a"), [LABEL_MSG])
        self.assertEqual(v.is_dns1123_label("a" * 64), ["must be no more than 63 characters"])

    def test_qualified_name(self):
        self.assertEqual(v.is_qualified_name("example.com/My_Name.1"), [])
        self.assertEqual(v.is_qualified_name("a b"), [QUALIFIED_MSG])
        self.assertEqual(v.is_qualified_name("/a"), ["prefix part must be non-empty"])
        self.assertEqual(v.is_qualified_name("Example.com/a"), ["prefix part " + SUBDOMAIN_MSG])
        self.assertEqual(v.is_qualified_name("a/"), ["name part must be non-empty", QUALIFIED_MSG])
        self.assertEqual(v.is_qualified_name("x" * 64), ["name part must be no more than 63 characters"])
        self.assertTrue(v.is_qualified_name("a/b/c")[0].startswith("a qualified name must consist of"))
        self.assertTrue(v.is_qualified_name("a/b/c")[0].endswith(
            "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"))

    def test_label_value(self):
        self.assertEqual(v.is_valid_label_value(""), [])
        self.assertEqual(v.is_valid_label_value("My_value.1"), [])
        self.assertEqual(v.is_valid_label_value("-x"), [
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
            "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"])

    def test_path_segment(self):
        self.assertEqual(v.is_path_segment_name("Any:Thing"), [])
        self.assertEqual(v.is_path_segment_name(".."), ["may not be '..'"])
        self.assertEqual(v.is_path_segment_name("a/b%c"), ["may not contain '/'", "may not contain '%'"])


def fields(causes):
    return [(c.field, c.type) for c in causes]


class ObjectMetaTests(unittest.TestCase):
    def test_valid(self):
        self.assertEqual(v.validate_object_meta({"name": "a", "namespace": "ns", "labels": {"app": "x"},
                                                 "annotations": {"Example.com/Note": "any text"}},
                                                True, DNS1123_SUBDOMAIN), [])

    def test_name_required(self):
        [cause] = v.validate_object_meta({}, False, DNS1123_SUBDOMAIN)
        self.assertEqual((cause.field, cause.type, cause.message),
                         ("metadata.name", "FieldValueRequired", "Required value: name or generateName is required"))

    def test_name_format_per_kind(self):
        [cause] = v.validate_object_meta({"name": "a.b"}, False, DNS1123_LABEL)
        self.assertEqual(cause.message, 'Invalid value: "a.b": must not contain dots')
        self.assertEqual(v.validate_object_meta({"name": "A:b"}, False, PATH_SEGMENT), [])
        self.assertEqual(fields(v.validate_object_meta({"name": "a/b"}, False, PATH_SEGMENT)),
                         [("metadata.name", "FieldValueInvalid")])

    def test_generate_name_may_end_with_dash(self):
        self.assertEqual(v.validate_object_meta({"generateName": "web-", "name": "web-x2f4k"}, False,
                                                DNS1123_SUBDOMAIN), [])
        self.assertEqual(fields(v.validate_object_meta({"generateName": "Web-", "name": "x"}, False,
                                                       DNS1123_SUBDOMAIN)),
                         [("metadata.generateName", "FieldValueInvalid")])

    def test_namespace_rules(self):
        self.assertEqual(fields(v.validate_object_meta({"name": "a"}, True, DNS1123_SUBDOMAIN)),
                         [("metadata.namespace", "FieldValueRequired")])
        [cause] = v.validate_object_meta({"name": "a", "namespace": "ns"}, False, DNS1123_SUBDOMAIN)
        self.assertEqual((cause.field, cause.message), ("metadata.namespace", "Forbidden: not allowed on this type"))

    def test_labels_and_annotations(self):
        causes = v.validate_object_meta({"name": "a", "labels": {"a b": "ok", "k": "bad value"},
                                         "annotations": {"a b": "x"}}, False, DNS1123_SUBDOMAIN)
        self.assertEqual(fields(causes), [("metadata.labels", "FieldValueInvalid")] * 2
                         + [("metadata.annotations", "FieldValueInvalid")])
        self.assertTrue(causes[0].message.startswith('Invalid value: "a b": name part must consist'))
        self.assertTrue(causes[1].message.startswith('Invalid value: "bad value": a valid label must'))

    def test_annotation_size(self):
        causes = v.validate_object_meta({"name": "a", "annotations": {"k": "x" * 262144}}, False,
                                        DNS1123_SUBDOMAIN)
        self.assertEqual([(c.field, c.type, c.message) for c in causes],
                         [("metadata.annotations", "FieldValueTooLong",
                           "Too long: may not be more than 262144 bytes")])
        self.assertEqual(v.validate_object_meta({"name": "a", "annotations": {"k": "x" * 262143}}, False,
                                                DNS1123_SUBDOMAIN), [])

    def test_finalizers_and_owner_references(self):
        causes = v.validate_object_meta({"name": "a", "finalizers": ["orphan", "foregroundDeletion", "a b"],
                                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]},
                                        False, DNS1123_SUBDOMAIN)
        self.assertEqual(fields(causes), [("metadata.ownerReferences.uid", "FieldValueInvalid"),
                                          ("metadata.finalizers", "FieldValueInvalid"),
                                          ("metadata.finalizers", "FieldValueInvalid")])
        self.assertIn("finalizer orphan and foregroundDeletion cannot be both set", causes[2].message)


class ObjectMetaUpdateTests(unittest.TestCase):
    old = {"name": "a", "namespace": "ns", "uid": "u1", "creationTimestamp": "2024-01-01T00:00:00Z",
           "generation": 2}

    def test_unchanged_is_valid(self):
        self.assertEqual(v.validate_object_meta_update(dict(self.old, labels={"x": "y"}), self.old), [])

    def test_immutable_fields(self):
        new = dict(self.old, uid="u2", namespace="other", creationTimestamp="2025-01-01T00:00:00Z")
        causes = v.validate_object_meta_update(new, self.old)
        self.assertEqual([(c.field, c.message) for c in causes], [
            ("metadata.namespace", 'Invalid value: "other": field is immutable'),
            ("metadata.uid", 'Invalid value: "u2": field is immutable'),
            ("metadata.creationTimestamp", 'Invalid value: "2025-01-01T00:00:00Z": field is immutable')])

    def test_generation_not_decremented(self):
        [cause] = v.validate_object_meta_update(dict(self.old, generation=1), self.old)
        self.assertEqual((cause.field, cause.message), ("metadata.generation",
                                                        "Invalid value: 1: must not be decremented"))

    def test_no_new_finalizers_while_deleting(self):
        old = dict(self.old, deletionTimestamp="2024-01-02T00:00:00Z", finalizers=["a/x"])
        [cause] = v.validate_object_meta_update(dict(old, finalizers=["a/x", "b/y"]), old)
        self.assertEqual(cause.message, 'Forbidden: no new finalizers can be added if the object is being '
                                        'deleted, found new finalizers []string{"b/y"}')
