"""Field selectors as clients send them in ``?fieldSelector=``."""
from twisted.trial import unittest

from kapiserver.machinery.errors import StatusError
from kapiserver.machinery.fields import parse_field_selector


def getter(values):
    return values.get


class FieldSelectorTests(unittest.TestCase):
    def test_empty(self):
        sel = parse_field_selector("")
        self.assertTrue(sel.empty)
        self.assertTrue(sel.matches(getter({})))
        self.assertEqual(sel.fields(), set())

    def test_operators_and_conjunction(self):
        sel = parse_field_selector("metadata.name=foo,status.phase!=Failed,spec.nodeName==n1")
        self.assertEqual(sel.fields(), {"metadata.name", "status.phase", "spec.nodeName"})
        self.assertTrue(sel.matches(getter({"metadata.name": "foo", "status.phase": "Running", "spec.nodeName": "n1"})))
        self.assertFalse(sel.matches(getter({"metadata.name": "foo", "status.phase": "Failed", "spec.nodeName": "n1"})))
        self.assertFalse(sel.matches(getter({"metadata.name": "bar", "spec.nodeName": "n1"})))
        self.assertEqual([(r.field, r.operator, r.value) for r in sel.requirements],
                         [("metadata.name", "=", "foo"), ("spec.nodeName", "==", "n1"),
                          ("status.phase", "!=", "Failed")])

    def test_missing_field_compares_as_empty(self):
        self.assertTrue(parse_field_selector("spec.nodeName=").matches(getter({})))
        self.assertTrue(parse_field_selector("spec.nodeName!=n1").matches(getter({})))

    def test_escaping(self):
        sel = parse_field_selector(r"metadata.name=a\,b\=c\\d,x=y")
        self.assertEqual(sel.requirements[0].value, "a,b=c\\d")
        self.assertEqual(str(sel), r"metadata.name=a\,b\=c\\d,x=y")
        # the first operator splits; the value may start with '='
        self.assertEqual(parse_field_selector(r"a==\=b").requirements[0].value, "=b")

    def error(self, text):
        with self.assertRaises(StatusError) as caught:
            parse_field_selector(text)
        self.assertEqual(caught.exception.code, 400)
        return caught.exception.message

    def test_a_term_of_nothing_is_everything(self):
        """Upstream's hasTerm/notHasTerm Transform: no field and no value select everything (``fieldSelector==``
        lists everything on kube-apiserver v1.32.13; ``=x`` is still an unknown field "")."""
        self.assertEqual(parse_field_selector("=").requirements, [])
        self.assertEqual(parse_field_selector("!=").requirements, [])
        self.assertEqual([(r.field, r.value) for r in parse_field_selector("=,a=b").requirements], [("a", "b")])
        self.assertEqual([(r.field, r.value) for r in parse_field_selector("=x").requirements], [("", "x")])

    def test_errors(self):
        self.assertEqual(self.error("metadata.name"),
                         "invalid selector: 'metadata.name'; can't understand 'metadata.name'")
        self.assertEqual(self.error("a=b=c"), "invalid field selector: unescaped character in value: 61")
        self.assertEqual(self.error(r"a=b\x"), r"invalid field selector: invalid escape sequence: \x")
        self.assertEqual(self.error("a=b\\"), "invalid field selector: invalid escape sequence: \\")

    def test_exact_match_helper(self):
        sel = parse_field_selector("metadata.name=foo")
        self.assertEqual(sel.requires_exact_match("metadata.name"), "foo")
        self.assertIsNone(parse_field_selector("metadata.name!=foo").requires_exact_match("metadata.name"))
