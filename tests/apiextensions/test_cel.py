"""CEL validation rules: compilation checks, evaluation messages, library functions, cost bound."""
from __future__ import annotations

from typing import Any

from twisted.trial import unittest

from kapiserver.apiextensions.cel.rules import compile_rules, evaluate
from kapiserver.apiextensions.schema.defaulting import apply_defaults
from kapiserver.machinery import errors
from tests.apiextensions.crd_fixtures import issuer_schema, load, messages


def with_rules(prop_schema: dict, *rules: dict) -> dict:
    node = dict(prop_schema)
    node["x-kubernetes-validations"] = list(rules)
    return {"type": "object", "properties": {"spec": node}}


def check(schema: dict, new: dict, old: dict | None = None) -> list[str]:
    compiled = compile_rules(schema)
    assert compiled.errors == [], compiled.errors
    return messages(evaluate(compiled, new, old))


class EvaluateTests(unittest.TestCase):
    def setUp(self) -> None:
        self.schema = issuer_schema()
        self.rules = compile_rules(self.schema)

    def issuer(self, name: str) -> dict:
        obj = load(name)
        apply_defaults(obj, self.schema)
        return obj

    def test_fixture_rules_compile_and_valid_objects_pass(self) -> None:
        self.assertEqual(self.rules.errors, [])
        self.assertEqual(evaluate(self.rules, self.issuer("issuer-ca.yaml")), [])
        self.assertEqual(evaluate(self.rules, self.issuer("issuer-acme.yaml")), [])

    def test_reason_and_field_path(self) -> None:
        obj = self.issuer("issuer-ca.yaml")
        del obj["spec"]["ca"]
        causes = evaluate(self.rules, obj)
        self.assertEqual(messages(causes), ["spec.ca: Required value: ca is required when type is CA"])
        self.assertEqual(causes[0].type, errors.REQUIRED)

    def test_message_expression(self) -> None:
        obj = self.issuer("issuer-acme.yaml")
        obj["spec"]["keySize"] = 1024
        self.assertEqual(messages(evaluate(self.rules, obj)),
                         ["spec: Invalid value: ECDSA keys must be 256, 384 or 521 bits, not 1024"])

    def test_scalar_rule_shows_value_and_library_functions(self) -> None:
        obj = self.issuer("issuer-acme.yaml")
        obj["spec"]["acme"]["server"] = "http://acme.example.com"
        obj["spec"]["dnsNames"] = ["Bad_Name"]
        self.assertEqual(messages(evaluate(self.rules, obj)), [
            'spec.dnsNames[0]: Invalid value: "Bad_Name": must be a DNS name',
            'spec.acme.server: Invalid value: "http://acme.example.com": the ACME server must use https'])

    def test_transition_rule_only_on_update(self) -> None:
        old = self.issuer("issuer-ca.yaml")
        new = self.issuer("issuer-ca.yaml")
        new["spec"]["type"] = "SelfSigned"
        self.assertEqual(evaluate(self.rules, new), [])
        self.assertEqual(messages(evaluate(self.rules, new, old)), ["spec: Invalid value: type is immutable"])

    def test_default_message_and_runtime_error(self) -> None:
        schema = with_rules({"type": "object", "properties": {"a": {"type": "integer"}}}, {"rule": "self.a > 1"})
        self.assertEqual(check(schema, {"spec": {"a": 1}}), ["spec: Invalid value: failed rule: self.a > 1"])
        self.assertEqual(check(schema, {"spec": {}}), [
            'spec: Invalid value: "object": no such key: a evaluating rule: self.a > 1'])

    def test_optional_old_self(self) -> None:
        schema = with_rules({"type": "object", "properties": {"a": {"type": "integer"}}},
                            {"rule": "!oldSelf.hasValue() || self.a >= oldSelf.value().a",
                             "optionalOldSelf": True, "message": "a may not decrease"})
        self.assertEqual(check(schema, {"spec": {"a": 1}}), [])
        self.assertEqual(check(schema, {"spec": {"a": 1}}, {"spec": {"a": 2}}),
                         ["spec: Invalid value: a may not decrease"])

    def test_list_map_items_correlate_old_values(self) -> None:
        schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {"ports": {
            "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string"}, "port": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "immutable"}]}}}}}}
        old = {"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}}
        new = {"spec": {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 5}, {"name": "c", "port": 9}]}}
        self.assertEqual(check(schema, new, old), ["spec.ports[1]: Invalid value: immutable"])

    def test_string_list_regex_and_quantity_functions(self) -> None:
        rules = [
            "self.name.lowerAscii() == 'web' && self.name.upperAscii() == 'WEB'",
            "self.csv.split(',').join('-') == 'a-b-c'",
            "self.name.indexOf('e') == 1 && self.name.substring(0, 2) == 'We'",
            "self.nums.isSorted() && self.nums.sum() == 6 && self.nums.max() == 3 && self.nums.indexOf(2) == 1",
            "self.name.find('[A-Z]') == 'W' && self.csv.findAll('[a-z]').size() == 3",
            "quantity(self.mem).isGreaterThan(quantity('1Gi')) && isQuantity(self.mem)",
            "url(self.endpoint).getHostname() == 'example.com' && url(self.endpoint).getPort() == '8443'",
            "'%s=%d'.format([self.name, 3]) == 'Web=3'",
            "self.nums.all(n, n > 0) && self.nums.exists_one(n, n == 2) && self.nums.map(n, n * 2)[2] == 6",
        ]
        schema = with_rules({"type": "object", "properties": {
            "name": {"type": "string"}, "csv": {"type": "string"}, "mem": {"type": "string"},
            "endpoint": {"type": "string"}, "nums": {"type": "array", "items": {"type": "integer"}}}},
            *({"rule": r} for r in rules))
        obj = {"spec": {"name": "Web", "csv": "a,b,c", "mem": "2Gi", "endpoint": "https://example.com:8443/x",
                        "nums": [1, 2, 3]}}
        self.assertEqual(check(schema, obj), [])
        obj["spec"]["mem"] = "512Mi"
        self.assertEqual(len(check(schema, obj)), 1)


class CompileTests(unittest.TestCase):
    PATH = "spec.versions[0].schema.openAPIV3Schema"

    def errors_for(self, prop: dict, *rules: dict) -> list[str]:
        return messages(compile_rules(with_rules(prop, *rules), self.PATH).errors)

    def test_syntax_error(self) -> None:
        got = self.errors_for({"type": "object"}, {"rule": "self.x >"})
        self.assertEqual(len(got), 1)
        self.assertTrue(got[0].startswith(
            f"{self.PATH}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \"self.x >\": "
            "compilation failed: ERROR: <input>:1:9: Syntax error:"), got[0])

    def test_undeclared_reference(self) -> None:
        got = self.errors_for({"type": "object"}, {"rule": "frobnicate(self) || other > 1"})
        self.assertEqual(len(got), 1)
        self.assertIn("compilation failed: ERROR: <input>:1:", got[0])
        self.assertIn("undeclared reference to", got[0])

    def test_comprehension_variables_are_declared(self) -> None:
        self.assertEqual(self.errors_for({"type": "object", "additionalProperties": {"type": "string"}},
                                         {"rule": "self.all(k, self[k].size() > 0)"}), [])

    def test_reason_field_path_and_message_checks(self) -> None:
        got = self.errors_for({"type": "object", "properties": {"a": {"type": "string"}}},
                              {"rule": "true", "reason": "Bogus"},
                              {"rule": "true", "fieldPath": ".nope"},
                              {"rule": "true", "messageExpression": "self +"},
                              {"rule": "true", "optionalOldSelf": True})
        base = f"{self.PATH}.properties[spec].x-kubernetes-validations"
        self.assertEqual(got[0], f'{base}[0].reason: Unsupported value: "Bogus": supported values: '
                                 '"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", '
                                 '"FieldValueRequired"')
        self.assertEqual(got[1], f'{base}[1].fieldPath: Invalid value: ".nope": fieldPath must be a valid path: '
                                 "does not refer to a valid field")
        self.assertTrue(got[2].startswith(f'{base}[2].messageExpression: Invalid value: "self +": '
                                          "messageExpression compilation failed: "), got[2])
        self.assertEqual(got[3], f"{base}[3].optionalOldSelf: Invalid value: true: "
                                 "may not be set if oldSelf is not used in rule")

    def test_old_self_in_uncorrelatable_items(self) -> None:
        got = self.errors_for({"type": "array", "items": {
            "type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}})
        self.assertEqual(got, [f'{self.PATH}.properties[spec].items.x-kubernetes-validations[0].rule: Invalid '
                               'value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of '
                               f"the schema within {self.PATH}.properties[spec]"])


class CountingProgram:
    """A compiled rule's CEL program that counts how often it runs."""

    def __init__(self, program: Any) -> None:
        self.program = program
        self.runs = 0

    def execute(self, context: Any) -> Any:
        self.runs += 1
        return self.program.execute(context)


class CostTests(unittest.TestCase):
    def test_nested_comprehension_over_unbounded_list_rejected_at_compile_time(self) -> None:
        schema = with_rules({"type": "array", "items": {"type": "integer"}},
                            {"rule": "self.all(x, self.all(y, x + y >= 0))"})
        got = messages(compile_rules(schema).errors)
        self.assertEqual(len(got), 1)
        self.assertIn("Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try "
                      "simplifying the rule, or adding maxItems, maxProperties, and maxLength", got[0])

    def test_bounded_list_accepted_and_oversized_value_stopped_before_it_runs(self) -> None:
        schema = with_rules({"type": "array", "maxItems": 3000, "items": {"type": "integer"}},
                            {"rule": "self.all(x, self.all(y, x + y >= 0))"})
        compiled = compile_rules(schema)
        self.assertEqual(compiled.errors, [])
        assert compiled.root is not None
        node = compiled.root.properties["spec"]
        program = CountingProgram(node.rules[0].program)
        node.rules[0] = node.rules[0]._replace(program=program)
        self.assertEqual(evaluate(compiled, {"spec": [1, 2, 3]}), [])
        self.assertEqual(program.runs, 1)
        got = messages(evaluate(compiled, {"spec": list(range(3000))}))
        # refused on its cost before the engine ran it: nine million steps never taken
        self.assertEqual(program.runs, 1)
        self.assertEqual(len(got), 1)
        self.assertIn("no further validation rules will be run due to call cost exceeds limit for rule: "
                      "self.all(x, self.all(y, x + y >= 0))", got[0])
