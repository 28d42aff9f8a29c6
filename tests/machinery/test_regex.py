"""RE2 semantics and linear cost for client-supplied patterns; CEL rules bounded before the engine."""
from __future__ import annotations

import subprocess
import sys

from twisted.trial import unittest

from kapiserver.apiextensions.cel import rules
from kapiserver.apiextensions.schema.structural import validate_structural
from kapiserver.machinery import regex
from kapiserver.testing.cases import HANG_GUARD
from kapiserver.testing.process import REPO_ROOT


class RegexTests(unittest.TestCase):
    def test_backtracking_pattern_is_linear(self):
        # A backtracking engine takes 2^100000 steps here: it never answers, where a linear one
        # answers at once.  The search runs in a child process, so that such an engine fails the
        # test (when the guard against a hang gives up) instead of hanging the test run.
        search = "from kapiserver.machinery import regex; print(bool(regex.search('^(a+)+$', 'a' * 100_000 + 'b')))"
        try:
            done = subprocess.run([sys.executable, "-c", search], cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            self.fail("the search of ^(a+)+$ did not end: the engine backtracks")
        self.assertEqual((done.returncode, done.stdout, done.stderr), (0, "False\n", ""))

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
