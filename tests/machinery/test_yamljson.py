"""YAML → JSON as sigs.k8s.io/yaml (go-yaml v2) does it, with bounded depth and aliases."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery import codec, limits
from kapiserver.machinery.yamljson import YAMLError, yaml_to_json


class ScalarTests(unittest.TestCase):
    def test_yaml_1_1_resolution(self):
        doc = yaml_to_json(b"a: yes\nb: n\nc: 0x10\nd: 010\ne: 08\nf: 1.0\ng: 2001-12-14\nh: ~\ni: 1e3\n"
                           b"j: '0x10'\nk: !!str yes\nl: -0b11\nm: 1_000\np: .5\n")
        self.assertEqual(doc, {"a": True, "b": False, "c": 16, "d": 8, "e": 8, "f": 1, "g": "2001-12-14",
                               "h": None, "i": 1000, "j": "0x10", "k": "yes", "l": -3, "m": 1000, "p": 0.5})

    def test_numbers_past_64_bits_stay_floats(self):
        doc = yaml_to_json(b"a: 18446744073709551615\nb: 18446744073709551616\nc: -10000000000000000000\n")
        self.assertEqual(doc["a"], 18446744073709551615)
        self.assertIsInstance(doc["b"], float)
        self.assertIsInstance(doc["c"], float)

    def test_keys_become_strings(self):
        # "y" is YAML 1.1's true too: the later key wins
        self.assertEqual(yaml_to_json(b"1: a\ntrue: b\n1.5: c\ny: d\nn: e\n"),
                         {"1": "a", "true": "d", "1.5": "c", "false": "e"})

    def test_binary_is_decoded(self):
        self.assertEqual(yaml_to_json(b"a: !!binary aGVsbG8=\n"), {"a": "hello"})

    def test_refused(self):
        for body, message in ((b"a: .nan", "json: unsupported value: NaN"), (b"a: -.inf", "unsupported value"),
                              (b"a: [1", "did not find expected"), (b"a: *x", "unknown anchor"),
                              (b"? [1]\n: 2", "invalid map key"), (b"? ~\n: 1", "unsupported map key"),
                              (b"a: !!int abc", "cannot decode !!str `abc` as a !!int")):
            with self.assertRaises(YAMLError) as caught:
                yaml_to_json(body)
            self.assertIn(message, str(caught.exception), body)


class StructureTests(unittest.TestCase):
    def test_merge_keys_and_duplicates(self):
        duplicates: list[str] = []
        doc = yaml_to_json(b"base: &b {x: 1, z: 2}\nm:\n  <<: *b\n  z: 3\nm: 4\n", duplicates)
        self.assertEqual(doc, {"base": {"x": 1, "z": 2}, "m": 4})
        self.assertEqual(duplicates, ['line 5: key "m" already set in map'])
        self.assertEqual(yaml_to_json(b"a: &a {k: v}\nb:\n  <<: *a\n  z: 1\n")["b"], {"k": "v", "z": 1})

    def test_depth_is_bounded_without_recursion(self):
        for body in (b"[" * 1_000_000, b"".join(b" " * i + b"a:\n" for i in range(5000)),
                     b"a: " + b"{b: " * 200 + b"1" + b"}" * 200):
            with self.assertRaises(limits.TooDeep):
                yaml_to_json(body)
        ok = b"[" * limits.MAX_DEPTH + b"]" * limits.MAX_DEPTH
        self.assertIsInstance(yaml_to_json(ok), list)

    def test_alias_depth_counts(self):
        inner = b"[" * 60 + b"]" * 60
        with self.assertRaises(limits.TooDeep):
            yaml_to_json(b"a: &a " + inner + b"\nb: " + b"[" * 50 + b"*a" + b"]" * 50 + b"\n")

    def test_alias_expansion_budget(self):
        lines = [b'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        for prev, cur in zip(b"abcdefgh", b"bcdefghi"):
            p, c = bytes([prev]), bytes([cur])
            lines.append(c + b": &" + c + b" [" + b",".join([b"*" + p] * 9) + b"]")
        with self.assertRaises(YAMLError) as caught:
            yaml_to_json(b"\n".join(lines))
        self.assertIn("excessive aliasing", str(caught.exception))
        # shared, not copied: modest aliasing composes fine
        doc = yaml_to_json(b"a: &a [1, 2]\nb: [*a, *a, *a]\n")
        self.assertEqual(doc["b"], [[1, 2]] * 3)


class StringStyleTests(unittest.TestCase):
    """codec.encode_yaml styles strings as kube-apiserver's YAML answers do (go-yaml v2)."""

    # kube-apiserver v1.32's answer to Accept: application/yaml for a ConfigMap with this data (two ConfigMaps: a0-c6, d0-e7)
    KUBE = """data:
  a0: "0"
  a1: "true"
  a2: 'x: y'
  a3: |
    a
    b
  a4: |-
    line1
    line2
  a5: ""
  a6: |2-
     lead
    x
  a7: "trail \\nx"
  a8: "y"
  a9: "n"
  b0: "1:20"
  b1: "2026-11-27T20:40:13Z"
  b2: "tab\\there"
  b3: |+
    a

    b

  b4: "~"
  b5: "null"
  b6: "on"
  b7: ünï
  b8: '#x'
  b9: '- x'
  c0: "\\ta\\nb"
  c1: |
    a
  c2: "x\\r\\ny"
  c3: "1e3"
  c4: "0x10"
  c5: "Yes"
  c6: "a  \\n"
  d0: "0o17"
  d1: +inf
  d2: ".5"
  d3: "1_000"
  d4: '1e3 '
  d5: "0b11"
  d6: "-.5e3"
  d7: "1."
  d8: 1٣
  d9: "+.inf"
  e0: "-0b11"
  e1: 1e
  e2: "0x_1F"
  e3: +nan
  e4: .e3
  e5: "12:30:00"
  e6: "08"
  e7: "1__0"
"""
    DATA = {"a0": "0", "a1": "true", "a2": "x: y", "a3": "a\nb\n", "a4": "line1\nline2", "a5": "", "a6": " lead\nx",
            "a7": "trail \nx", "a8": "y", "a9": "n", "b0": "1:20", "b1": "2026-11-27T20:40:13Z", "b2": "tab\there",
            "b3": "a\n\nb\n\n", "b4": "~", "b5": "null", "b6": "on", "b7": "ünï", "b8": "#x", "b9": "- x",
            "c0": "\ta\nb", "c1": "a\n", "c2": "x\r\ny", "c3": "1e3", "c4": "0x10", "c5": "Yes", "c6": "a  \n",
            "d0": "0o17", "d1": "+inf", "d2": ".5", "d3": "1_000", "d4": "1e3 ", "d5": "0b11", "d6": "-.5e3",
            "d7": "1.", "d8": "1٣", "d9": "+.inf", "e0": "-0b11", "e1": "1e", "e2": "0x_1F", "e3": "+nan",
            "e4": ".e3", "e5": "12:30:00", "e6": "08", "e7": "1__0"}

    def test_the_bytes_kube_apiserver_writes(self):
        self.assertEqual(codec.encode_yaml({"data": self.DATA}).decode(), self.KUBE)

    def test_every_string_reads_back_as_itself(self):
        self.assertEqual(yaml_to_json(codec.encode_yaml({"data": self.DATA})), {"data": self.DATA})
