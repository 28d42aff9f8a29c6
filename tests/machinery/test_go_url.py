"""Go's net/url Parse and String, and path.Join/Clean, as the proxy's link rewriting relies on them.

Every expected value here is what Go 1.24's net/url and path packages answer for the input (a
link the proxy leaves alone is still printed back through ``URL.String``, so these bytes are
what a browser gets)."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.machinery import go_url


def string(raw: bytes) -> bytes:
    return go_url.URL.parse(raw).string()


class ParseAndStringTests(unittest.TestCase):
    def test_a_url_is_printed_back_in_gos_normal_form(self):
        cases = {
            # the scheme lower-cased; a raw path that is no valid encoding (a space) is
            # dropped for the decoded path escaped again, so %2F becomes a slash
            b"HTTP://User:p%40ss@Example.COM:80/a%2Fb/c d?q=1#frag ment":
                b"http://User:p%40ss@Example.COM:80/a/b/c%20d?q=1#frag%20ment",
            # a valid raw path and fragment are kept as they were sent; the query always is
            b"http://h/%2f?a b#%41": b"http://h/%2f?a b#%41",
            b"a:b/c": b"a:b/c",  # opaque
            b"*": b"*",
            b"http:/x": b"http:/x",  # an empty authority is not invented
            b"/x?": b"/x?",  # a lone ? is kept
            b"./a:b": b"./a:b",
            b"http://[fe80::1%25en0]:8080/x": b"http://[fe80::1%25en0]:8080/x",
            b"http://u@h@g/": b"http://u%40h@g/",  # the last @ ends the user
            b"http://\xc3\xa9/": b"http://%C3%A9/",  # non-ASCII host bytes escaped
        }
        for raw, printed in cases.items():
            self.assertEqual(string(raw), printed, raw)

    def test_what_url_parse_refuses_and_its_words(self):
        cases = {
            b"1a:b": 'parse "1a:b": first path segment in URL cannot contain colon',
            b":foo": 'parse ":foo": missing protocol scheme',
            b"http://h:port/": 'parse "http://h:port/": invalid port ":port" after host',
            b"%zz": 'parse "%zz": invalid URL escape "%zz"',
            b"http://a b/": 'parse "http://a b/": invalid character " " in host name',
            b"http://[1.2.3.4]/": 'parse "http://[1.2.3.4]/": invalid IP-literal',
            b"http://x/\x7f": 'parse "http://x/\\x7f": net/url: invalid control character in URL',
            b"http://%41/": 'parse "http://%41/": invalid URL escape "%41"',
            b"http://[fe80::1]:x/": 'parse "http://[fe80::1]:x/": invalid port ":x" after host',
            b"http://[::1": "parse \"http://[::1\": missing ']' in host",
        }
        for raw, message in cases.items():
            with self.assertRaises(go_url.URLError, msg=raw) as caught:
                go_url.URL.parse(raw)
            self.assertEqual(str(caught.exception), message)

    def test_a_relative_path_whose_first_segment_has_a_colon_is_printed_with_dot_slash(self):
        self.assertEqual(go_url.URL(path=b"a:b/c").string(), b"./a:b/c")
        self.assertEqual(go_url.URL(path=b"a/b:c").string(), b"a/b:c")

    def test_a_request_line_url_has_no_host_unless_it_is_absolute(self):
        self.assertEqual(go_url.URL.parse(b"//evil/x", via_request=True).host, b"")
        self.assertEqual(go_url.URL.parse(b"//evil/x").host, b"evil")
        absolute = go_url.URL.parse(b"https://kube:6443/api?x", via_request=True)
        self.assertEqual((absolute.scheme, absolute.host, absolute.path), (b"https", b"kube:6443", b"/api"))


class PathTests(unittest.TestCase):
    def test_join(self):
        cases = {(b"/a", b"../b"): b"/b", (b"", b""): b"", (b"a", b""): b"a", (b"/p/proxy", b"/"): b"/p/proxy",
                 (b"/p", b"/x/y/"): b"/p/x/y", (b"", b"/x"): b"/x"}
        for elems, joined in cases.items():
            self.assertEqual(go_url.join(*elems), joined, elems)

    def test_clean(self):
        cases = {b"": b".", b"//a//b/": b"/a/b", b"../../x": b"../../x", b"/../x": b"/x", b"a/..": b".",
                 b"/": b"/", b"a/b/../../..": b"..", b"./x/.": b"x", b"/already/clean": b"/already/clean"}
        for path, cleaned in cases.items():
            self.assertEqual(go_url.clean(path), cleaned, path)
