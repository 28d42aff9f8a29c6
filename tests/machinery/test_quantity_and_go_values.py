"""Quantities as apimachinery parses and prints them, and Go's renderings of
values in field errors (%q, %v, %#v), with vectors from apimachinery's own tests
and Go's documented behaviour."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery import errors, gorepr, validation
from kapiserver.machinery.quantity import QuantityError, parse_quantity


class QuantityTests(unittest.TestCase):
    def test_canonical_forms(self) -> None:
        # apimachinery's TestQuantityParseEmit and TestQuantityString alternates
        for given, canonical in [("1Ki", "1Ki"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"),
                                 (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
                                 ("1024Mi", "1Gi"), ("307200Ki", "300Mi"), ("5000m", "5"), ("0.5", "500m"),
                                 ("1000u", "1m"), ("1.08", "1080m"), ("1080000000n", "1080m"), ("0.001T", "1G"),
                                 (".001e12", "1e9"), ("0.001e0", "1e-3"), ("1000e-12", "1e-9"), ("00", "0"),
                                 ("-1024Mi", "-1Gi"), ("1.5Gi", "1536Mi"), ("0", "0"), ("0Ki", "0")]:
            self.assertEqual(parse_quantity(given).canonical(), canonical, given)

    def test_refused_forms(self) -> None:
        # apimachinery's TestQuantityParse invalid list
        for text in ["1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", " 1", "1 ", ""]:
            with self.assertRaises(QuantityError, msg=text):
                parse_quantity(text)

    def test_huge_values_are_bounded(self) -> None:
        # a BinarySI value is capped at the largest int64; a decimal one keeps its exponent
        self.assertEqual(parse_quantity("100Ei").canonical(), "9223372036854775807")
        self.assertEqual(parse_quantity("1e1000").canonical(), "10e999")  # exponents are multiples of 3
        self.assertTrue(parse_quantity("1e1000") > parse_quantity("8Ei"))

    def test_go_struct_of_a_quantity(self) -> None:
        from kapiserver.apis.core.resources import go_quantity
        # the fast path keeps canonical text and an int64Amount; other forms have neither
        self.assertEqual(str(go_quantity(parse_quantity("500m"))),
                         'resource.Quantity{i:resource.int64Amount{value:500, scale:-3}, '
                         'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"500m", Format:"DecimalSI"}')
        self.assertEqual(str(go_quantity(parse_quantity("1000"))),
                         'resource.Quantity{i:resource.int64Amount{value:1000, scale:0}, '
                         'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"", Format:"DecimalSI"}')
        self.assertEqual(str(go_quantity(parse_quantity("12Mi"))),
                         'resource.Quantity{i:resource.int64Amount{value:12582912, scale:0}, '
                         'd:resource.infDecAmount{Dec:(*inf.Dec)(nil)}, s:"12Mi", Format:"BinarySI"}')
        # a binary mantissa divisible by 8 is not kept as given (it may print differently)
        self.assertIn('s:""', str(go_quantity(parse_quantity("64Mi"))))
        self.assertIn("Dec:(*inf.Dec)(0xc000000000)", str(go_quantity(parse_quantity("1.5Gi"))))


class GoRenderingTests(unittest.TestCase):
    def test_quote_is_strconv_quote(self) -> None:
        self.assertEqual(gorepr.quote('a"b\\c'), '"a\\"b\\\\c"')
        self.assertEqual(gorepr.quote("tab\there\n"), '"tab\\there\\n"')
        self.assertEqual(gorepr.quote("é✓"), '"é✓"')  # printable runes stay as they are
        self.assertEqual(gorepr.quote("\x00\x7f"), '"\\x00\\x7f"')

    def test_field_error_values(self) -> None:
        # field.Error.ErrorBody: simple types with %v, strings with %q, nil (and nil pointers) as "null"
        self.assertEqual(errors.field_invalid("f", 3, "m").message, "Invalid value: 3: m")
        self.assertEqual(errors.field_invalid("f", True, "m").message, "Invalid value: true: m")
        self.assertEqual(errors.field_invalid("f", "x", "m").message, 'Invalid value: "x": m')
        self.assertEqual(errors.field_invalid("f", None, "m").message, 'Invalid value: "null": m')
        self.assertEqual(errors.field_invalid("f", errors.OMIT, "m").message, "Invalid value: m")
        self.assertEqual(errors.field_invalid("f", gorepr.string_slice(["a", "b"]), "m").message,
                         'Invalid value: []string{"a", "b"}: m')
        self.assertEqual(errors.field_invalid("f", gorepr.string_slice(None), "m").message,
                         "Invalid value: []string(nil): m")
        self.assertEqual(errors.field_invalid("f", gorepr.string_map({"b": "2", "a": "1"}), "m").message,
                         'Invalid value: map[string]string{"a":"1", "b":"2"}: m')

    def test_label_selector(self) -> None:
        self.assertEqual(str(gorepr.label_selector({"matchLabels": {"app": "web"}})),
                         'v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, '
                         'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}')


class AddressTests(unittest.TestCase):
    def test_sloppy_ip_parsing(self) -> None:
        # netutils.ParseIPSloppy accepts leading zeros in IPv4 (as decimal), and whatever net.ParseIP accepts
        for text in ["10.0.0.1", "010.000.000.001", "::1", "::ffff:1.2.3.4", "2001:db8::1"]:
            self.assertIsNotNone(validation.parse_ip_sloppy(text), text)
        for text in ["1.2.3", "256.0.0.1", "10.0.0.1/8", " 10.0.0.1", "2001:db8::g", "", "1.2.3.4.5"]:
            self.assertIsNone(validation.parse_ip_sloppy(text), text)

    def test_cidrs(self) -> None:
        self.assertEqual(validation.is_valid_cidr("f", "10.0.0.1/8"), [])  # host bits are allowed
        self.assertEqual(validation.is_valid_cidr("f", "2001:db8::/64"), [])
        [cause] = validation.is_valid_cidr("f", "10.0.0.0/33")
        self.assertEqual(cause.message, 'Invalid value: "10.0.0.0/33": must be a valid CIDR value, (e.g. '
                                        '10.9.8.0/24 or 2001:db8::/64)')
        [cause] = validation.is_valid_cidr("f", "10.0.0.0")
        self.assertEqual(cause.field, "f")
