"""Label selectors as clients send them in ``?labelSelector=``."""
from twisted.trial import unittest

from kapiserver.machinery.errors import StatusError
from kapiserver.machinery.labels import parse_label_selector, selector_from_label_selector_dict


class ParseAndMatchTests(unittest.TestCase):
    def matches(self, text, labels):
        return parse_label_selector(text).matches(labels)

    def test_empty_selects_everything(self):
        sel = parse_label_selector("")
        self.assertTrue(sel.empty)
        self.assertTrue(sel.matches({}))
        self.assertTrue(parse_label_selector("  ").empty)

    def test_equality(self):
        self.assertTrue(self.matches("app=web", {"app": "web"}))
        self.assertTrue(self.matches("app==web", {"app": "web"}))
        self.assertFalse(self.matches("app=web", {"app": "db"}))
        self.assertFalse(self.matches("app=web", {}))
        self.assertTrue(self.matches("app!=web", {}))
        self.assertTrue(self.matches("app!=web", {"app": "db"}))
        self.assertFalse(self.matches("app!=web", {"app": "web"}))

    def test_a_nul_byte_ends_the_text_as_in_go(self):
        """Go's lexer reads NUL as the end of the text: where a token starts, nothing after it counts; a NUL
        ending a word is consumed with it (kube-apiserver v1.32.13 lists everything for ``?labelSelector=%00``)."""
        self.assertTrue(parse_label_selector("\x00").empty)
        self.assertTrue(parse_label_selector("  \x00app=web").empty)
        self.assertEqual(str(parse_label_selector("app=\x00web")), "app=")
        self.assertEqual(str(parse_label_selector("app=web\x00,tier")), "app=web,tier")

    def test_empty_value(self):
        self.assertTrue(self.matches("app=", {"app": ""}))
        self.assertFalse(self.matches("app=", {}))

    def test_set_based(self):
        self.assertTrue(self.matches("env in (prod, qa)", {"env": "qa"}))
        self.assertFalse(self.matches("env in (prod,qa)", {"env": "dev"}))
        self.assertTrue(self.matches("env notin (prod,qa)", {"env": "dev"}))
        self.assertTrue(self.matches("env notin (prod,qa)", {}))
        self.assertFalse(self.matches("env notin (prod,qa)", {"env": "prod"}))
        # "in" and "notin" are plain words where a value is expected
        self.assertTrue(self.matches("x in (in,notin)", {"x": "notin"}))

    def test_exists(self):
        self.assertTrue(self.matches("app", {"app": ""}))
        self.assertFalse(self.matches("app", {}))
        self.assertTrue(self.matches("!app", {}))
        self.assertFalse(self.matches("!app", {"app": "x"}))

    def test_conjunction_and_whitespace(self):
        sel = parse_label_selector(" app = web ,tier in (fe),!canary, example.com/team")
        self.assertFalse(sel.empty)
        self.assertTrue(sel.matches({"app": "web", "tier": "fe", "example.com/team": "a"}))
        self.assertFalse(sel.matches({"app": "web", "tier": "fe", "example.com/team": "a", "canary": "1"}))
        self.assertFalse(sel.matches({"app": "web", "tier": "fe"}))

    def test_gt_lt(self):
        self.assertTrue(self.matches("n>3", {"n": "4"}))
        self.assertFalse(self.matches("n>3", {"n": "3"}))
        self.assertTrue(self.matches("n<3", {"n": "2"}))
        self.assertFalse(self.matches("n<3", {"n": "x"}))

    def test_string_form_is_sorted_and_canonical(self):
        self.assertEqual(str(parse_label_selector("b in (y,x),a=1,!c")), "a=1,b in (x,y),!c")

    def error(self, text):
        with self.assertRaises(StatusError) as caught:
            parse_label_selector(text)
        self.assertEqual(caught.exception.code, 400)
        self.assertEqual(caught.exception.reason, "BadRequest")
        return caught.exception.message

    def test_invalid_value(self):
        self.assertEqual(
            self.error("app=a b"), "found 'b', expected: ',' or 'end of string'")
        msg = self.error("app=-bad")
        self.assertTrue(msg.startswith('unable to parse requirement: values[0][app]: Invalid value: "-bad": '
                                       "a valid label must be an empty string or consist of alphanumeric"), msg)

    def test_invalid_key(self):
        msg = self.error("-app=x")
        self.assertTrue(msg.startswith('unable to parse requirement: <nil>: Invalid value: "-app": name part '
                                       "must consist of alphanumeric characters"), msg)

    def test_syntax_errors(self):
        self.assertEqual(self.error("app=x,"), "found '', expected: identifier after ','")
        self.assertEqual(self.error("=x"), "found '=', expected: !, identifier, or 'end of string'")
        self.assertEqual(self.error("app in x"), "unable to parse requirement: found 'x' expected: '('")
        self.assertEqual(self.error("app in (a"), "unable to parse requirement: found '', expected: ',' or ')'")
        self.assertEqual(self.error("app x"), "unable to parse requirement: found 'x', expected: "
                                              "in, notin, =, ==, !=, gt, lt")
        self.assertEqual(self.error("app>x"), 'unable to parse requirement: values[0]: Invalid value: "x": '
                                              "for 'Gt', 'Lt' operators, the value must be an integer")


class LabelSelectorObjectTests(unittest.TestCase):
    def test_match_labels_and_expressions(self):
        sel = selector_from_label_selector_dict({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]})
        self.assertTrue(sel.matches({"app": "web", "tier": "be"}))
        self.assertFalse(sel.matches({"app": "web", "tier": "be", "canary": "y"}))
        self.assertEqual(str(sel), "app=web,!canary,tier in (be,fe)")

    def test_empty_and_none(self):
        self.assertTrue(selector_from_label_selector_dict({}).matches({"a": "b"}))
        self.assertTrue(selector_from_label_selector_dict({}).empty)
        self.assertFalse(selector_from_label_selector_dict(None).matches({}))
        self.assertFalse(selector_from_label_selector_dict(None).empty)

    def test_bad_operator(self):
        with self.assertRaises(StatusError) as caught:
            selector_from_label_selector_dict({"matchExpressions": [{"key": "a", "operator": "Exist"}]})
        self.assertEqual(caught.exception.message, '"Exist" is not a valid label selector operator')

    def test_in_needs_values(self):
        with self.assertRaises(StatusError) as caught:
            selector_from_label_selector_dict({"matchExpressions": [{"key": "a", "operator": "In"}]})
        self.assertIn("values set can't be empty", caught.exception.message)
