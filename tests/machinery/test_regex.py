"""RE2 semantics and linear cost for client-supplied patterns; CEL rules bounded before the engine."""
from __future__ import annotations

import time

from twisted.trial import unittest

from kapiserver.apiextensions.cel import rules
from kapiserver.apiextensions.schema.structural import validate_structural
from kapiserver.machinery import regex


class RegexTests(unittest.TestCase):
    def test_backtracking_pattern_is_linear(self):
        started = time.monotonic()
        self.assertFalse(regex.search("^(a+)+$", "a" * 100_000 + "b"))
        self.assertLess(time.monotonic() - started, 1.0)

    def test_what_re2_refuses(self):
        for pattern in ("([", r"(a)\1", "(?=a)", "a{1001}"):
            self.assertIsNotNone(regex.problem(pattern), pattern)
        self.assertIsNone(regex.problem("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))

    def test_crd_pattern_refused_with_its_field(self):
        causes = validate_structural({"type": "object", "properties": {"s": {"type": "string", "pattern": "(["}}},
                                     "spec.versions[0].schema.openAPIV3Schema")
        self.assertEqual([c.field for c in causes],
                         ["spec.versions[0].schema.openAPIV3Schema.properties[s].pattern"])
        self.assertIn("must be a valid regular expression, but isn't: missing ]", causes[0].message)


class CELGuardTests(unittest.TestCase):
    def test_long_operator_chains_never_reach_the_engine(self):
        program, problem = rules._compile_expression("+".join(["1"] * 30_000))
        self.assertIsNone(program)
        self.assertIn("operators, more than the limit", problem)

    def test_regex_literals_are_re2(self):
        _, problem = rules._compile_expression("self.matches('(a)\\\\1')")
        self.assertIn("invalid regex", problem)
        program, problem = rules._compile_expression("self.matches('^a+$') && 'x:y' == 'x:y'")
        self.assertIsNone(problem)
