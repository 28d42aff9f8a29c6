"""Admission CEL: declared variables, upstream's error wording, optional field syntax, the
IP/CIDR and authorizer libraries, lazy policy variables, cost limits, and type checking."""
from __future__ import annotations

from twisted.internet import defer
from twisted.trial import unittest

from kapiserver.admission.cel import authz
from kapiserver.admission.cel.evaluation import BudgetExceeded, Evaluator, Inputs
from kapiserver.admission.cel.match_conditions import MatchConditions
from kapiserver.admission.policy.typecheck import TypeChecker
from kapiserver.admission.resources import ResourceMapper
from kapiserver.registry.groups import FixedTypes
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.auth.authorizer import Decision
from kapiserver.machinery.user import UserInfo
from kapiserver.cel.compiler import Declarations, compile_expression, rewrite_optional_syntax
from kapiserver.machinery.openapi_definitions import load_definitions
from kapiserver.testing.cases import run

POLICY = Declarations(has_params=True, has_authorizer=True)


async def evaluate(source: str, decls: Declarations = POLICY, **inputs):
    compiled = compile_expression(source, decls)
    assert not compiled.error, compiled.error
    return await Evaluator(Inputs(**inputs)).evaluate(compiled)


class CompileTests(unittest.TestCase):
    def test_undeclared_references(self):
        self.assertEqual(compile_expression("params.x", Declarations()).error,
                         "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')"
                         "\n | params.x\n | ^")
        self.assertIn("undeclared reference to 'authorizer'", compile_expression("authorizer.path('/x')",
                                                                                 Declarations()).error)
        self.assertIn("undeclared reference to 'nosuch'", compile_expression("object.a.nosuch()", POLICY).error)
        self.assertEqual(compile_expression("object.spec.x > request.name.size()", POLICY).error, "")

    def test_variables_must_be_declared_before_use(self):
        decls = Declarations(True, True, ("a",), True)
        self.assertEqual(compile_expression("variables.a + 1", decls).error, "")
        self.assertEqual(compile_expression("variables.b", decls).error,
                         "compilation failed: ERROR: <input>:1:10: undefined field 'b'\n | variables.b\n | .........^")

    def test_optional_syntax_is_rewritten_outside_strings(self):
        self.assertEqual(rewrite_optional_syntax("a.?b.?c.orValue('.?x')"),
                         "a.optSelect(\"b\").optSelect(\"c\").orValue('.?x')")
        self.assertEqual(rewrite_optional_syntax("m[?'k'].hasValue() && l[0]"),
                         "m.optIndex('k').hasValue() && l[0]")


class EvaluationTests(unittest.TestCase):
    @run
    async def test_values_and_upstreams_error_wording(self):
        obj = {"spec": {"replicas": 3, "hosts": ["10.0.0.5"]}, "metadata": {"labels": {}}}
        self.assertEqual((await evaluate("object.spec.replicas > 2", object=obj)).value, True)
        self.assertEqual((await evaluate("object.?spec.?missing.orValue(7)", object=obj)).value, 7)
        self.assertEqual((await evaluate("object.spec.missing > 1", object=obj)).error,
                         "expression 'object.spec.missing > 1' resulted in error: no such key: missing")
        self.assertEqual((await evaluate("oldObject == null", object=obj)).value, True)

    @run
    async def test_ip_and_cidr_libraries(self):
        obj = {"spec": {"ip": "10.1.2.3"}}
        self.assertTrue((await evaluate("cidr('10.0.0.0/8').containsIP(object.spec.ip)", object=obj)).value)
        self.assertEqual((await evaluate("ip(object.spec.ip).family()", object=obj)).value, 4)
        self.assertTrue((await evaluate("isIP('::1') && !isCIDR('10.0.0.1') && ip('127.0.0.1').isLoopback()")).value)
        self.assertEqual((await evaluate("string(cidr('10.1.2.3/16').masked())")).value, "10.1.0.0/16")
        self.assertIn("parse error", (await evaluate("ip('not-an-ip')")).error)

    @run
    async def test_variables_are_evaluated_lazily_once(self):
        variables = [("big", compile_expression("object.spec.replicas * 10", Declarations(composition=True))),
                     ("broken", compile_expression("object.spec.nothing", Declarations(composition=True)))]
        evaluator = Evaluator(Inputs(object={"spec": {"replicas": 2}}), composition=variables)
        decls = Declarations(False, False, ("big", "broken"), True)
        self.assertEqual((await evaluator.evaluate(compile_expression("variables.big + 1", decls))).value, 21)
        failed = await evaluator.evaluate(compile_expression("variables.broken == 1", decls))
        self.assertEqual(failed.error, "expression 'variables.broken == 1' resulted in error: composited variable "
                                       "\"broken\" fails to evaluate: no such key: nothing")

    @run
    async def test_cost_limit_and_budget(self):
        big = {"items": list(range(2000))}
        nested = compile_expression("object.items.all(x, object.items.exists(y, y == x))", POLICY)
        result = await Evaluator(Inputs(object=big)).evaluate(nested)
        self.assertEqual(result.error, "expression 'object.items.all(x, object.items.exists(y, y == x))' resulted in "
                                       "error: operation cancelled: actual cost limit exceeded")
        small = compile_expression("object.items.all(x, x >= 0)", POLICY)
        evaluator = Evaluator(Inputs(object=big), budget=9000)  # one run of it is estimated at 6003
        await evaluator.evaluate(small)
        with self.assertRaises(BudgetExceeded):
            await evaluator.evaluate(small)

    @run
    async def test_authorizer_checks_are_asked_on_the_reactor(self):
        asked = []

        class Authorizer:
            def authorize(self, user, attrs):
                asked.append((user.name, attrs.verb, attrs.api_group, attrs.resource, attrs.namespace, attrs.path))
                return defer.succeed(Decision(attrs.verb == "get", "only reads"))
        session = authz.AuthzSession(Authorizer(), UserInfo("alice"))
        inputs = Inputs(authz=session, authorizer=authz.authorizer_value("apps", "deployments", "", "ns", "d"))
        source = ("authorizer.group('').resource('secrets').namespace('ns').check('get').allowed() && "
                  "!authorizer.requestResource.check('delete').allowed() && "
                  "authorizer.serviceAccount('ns', 'sa').path('/healthz').check('post').reason() == 'only reads'")
        self.assertTrue((await evaluate(source, **inputs.__dict__)).value)
        self.assertEqual(asked, [("alice", "get", "", "secrets", "ns", ""),
                                 ("alice", "delete", "apps", "deployments", "ns", ""),
                                 ("system:serviceaccount:ns:sa", "post", "", "", "", "/healthz")])

    @run
    async def test_match_conditions_follow_the_failure_policy(self):
        conditions = [{"name": "a", "expression": "object.x == 1"}, {"name": "b", "expression": "object.y == 1"}]
        failing = MatchConditions(conditions, Declarations(has_authorizer=True), "Fail")
        self.assertEqual((await failing.match(Inputs(object={"x": 2}))).failed_condition, "a")
        errored = await failing.match(Inputs(object={"x": 1}))
        self.assertEqual((errored.matches, errored.error),
                         (False, "expression 'object.y == 1' resulted in error: no such key: y"))
        ignoring = MatchConditions(conditions, Declarations(has_authorizer=True), "Ignore")
        self.assertEqual(await ignoring.match(Inputs(object={"x": 1})), type(errored)(False))


class TypeCheckTests(unittest.TestCase):
    def setUp(self):
        types = builtin_resource_types()
        self.checker = TypeChecker(ResourceMapper(FixedTypes(types)), load_definitions().resolve_ref)

    def policy(self, *expressions: str, param_kind=None) -> dict:
        spec = {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                                                        "resources": ["deployments", "replicasets"]}]},
                "validations": [{"expression": e} for e in expressions]}
        if param_kind:
            spec["paramKind"] = param_kind
        return {"spec": spec}

    def test_undefined_fields_are_reported_per_kind(self):
        warnings = self.checker.check(self.policy("object.spec.replicas > 1 && object.spec.templat.metadata != null",
                                                  "object.metadata.labels['x'] == 'y'",
                                                  "object.spec.template.spec.containers.all(c, c.image != '')"))
        self.assertEqual(len(warnings), 1)
        self.assertEqual(warnings[0]["fieldRef"], "spec.validations[0].expression")
        line = " | object.spec.replicas > 1 && object.spec.templat.metadata != null\n | " + "." * 39 + "^\n"
        self.assertEqual(warnings[0]["warning"],
                         "apps/v1, Kind=Deployment: ERROR: <input>:1:40: undefined field 'templat'\n" + line +
                         "\napps/v1, Kind=ReplicaSet: ERROR: <input>:1:40: undefined field 'templat'\n" + line)

    def test_params_are_checked_against_their_kind(self):
        warnings = self.checker.check(self.policy("object.spec.replicas <= int(params.dta.max)",
                                                  param_kind={"apiVersion": "v1", "kind": "ConfigMap"}))
        self.assertIn("undefined field 'dta'", warnings[0]["warning"])
        self.assertEqual(self.checker.check(self.policy("int(params.data.max) > 0",
                                                        param_kind={"apiVersion": "v1", "kind": "ConfigMap"})), [])
