"""The proxy transport's rewriting without a network: links, pages, codings, the forwarded URI.

Every expected page here is what upstream's ``rewriteHTML`` (x/net/html's tokenizer,
``Token.String``) and ``rewriteURL`` write for the same input and the same request: tags
printed back lower-cased with double-quoted, escaped values; URL attributes of the
``atomsToAttrs`` table under the proxy's prefix; text, comments, end tags and the raw text of
``script``, ``style``, ``title``... byte for byte."""
from __future__ import annotations

import gzip
import zlib

from twisted.trial import unittest

from kapiserver.endpoints.streaming import proxy_rewrite
from kapiserver.endpoints.streaming.proxy_rewrite import LinkRewriter, rewrite_body, rewrite_html, rewrite_url
from kapiserver.machinery import go_html

P = b"/api/v1/namespaces/ns/pods/http:web:1080/proxy"
# a client asking 127.0.0.1:6443 for a page of the pod at 10.0.0.5:1080
LINKS = LinkRewriter(scheme=b"", host=b"", prefix=P, source_host=b"10.0.0.5:1080", request_host=b"127.0.0.1:6443")


def page(html: bytes) -> bytes:
    return rewrite_html(html, LINKS.rewrite)


class RewriteURLTests(unittest.TestCase):
    def rewrite(self, link: str, scheme: str = "", host: str = "") -> str:
        return rewrite_url(link, "http://10.0.0.5:1080/x", "127.0.0.1:6443", scheme, host, P.decode())

    def test_a_path_on_the_backend_gets_the_prefix(self):
        prefix = P.decode()
        cases = {
            "/rewriteme": prefix + "/rewriteme",  # the conformance spec's link
            "/dir/": prefix + "/dir/",  # path.Join drops the slash; it is put back
            "/": prefix + "/",
            "/a/../b/./c//d": prefix + "/b/c/d",  # joined paths are cleaned
            "/a b": prefix + "/a%20b",
            "/%7Euser/": prefix + "/~user/",  # the raw path no longer matches: escaped anew
            "http://10.0.0.5:1080/a?b=1#c": prefix + "/a?b=1#c",  # the backend's own host: dropped
            "//10.0.0.5:1080/x": prefix + "/x",
            # the host the client asked is kept when the request URL named none
            "http://127.0.0.1:6443/a": "http://127.0.0.1:6443" + prefix + "/a",
        }
        for link, rewritten in cases.items():
            self.assertEqual(self.rewrite(link), rewritten, link)

    def test_other_hosts_relative_links_and_prefixed_paths_are_only_printed_back(self):
        cases = {
            "rel/x": "rel/x", "https://example.com/a": "https://example.com/a", "mailto:x@y": "mailto:x@y",
            "#top": "#top", "?q": "?q", "//10.0.0.5:1080": "//10.0.0.5:1080",
            "HTTP://10.0.0.5:1080": "http://10.0.0.5:1080",  # no path: relative, but Go's String lower-cases
            P.decode() + "/already": P.decode() + "/already",
        }
        for link, printed in cases.items():
            self.assertEqual(self.rewrite(link), printed, link)

    def test_a_request_url_with_scheme_and_host_puts_them_on_every_rewritten_link(self):
        prefix = P.decode()
        for link, rewritten in {"/x": "https://kube:6443" + prefix + "/x",
                                "http://127.0.0.1:6443/a": "https://kube:6443" + prefix + "/a",
                                "http://10.0.0.5:1080/b/": "https://kube:6443" + prefix + "/b/"}.items():
            self.assertEqual(self.rewrite(link, "https", "kube:6443"), rewritten, link)

    def test_a_link_url_parse_refuses_is_an_error(self):
        with self.assertRaises(ValueError) as caught:
            self.rewrite("http://[::1")
        self.assertEqual(str(caught.exception), "parse \"http://[::1\": missing ']' in host")

    def test_the_prefix_and_the_forwarded_uri(self):
        base = b"/api/v1/namespaces/ns/services/web:80/proxy"
        self.assertEqual(proxy_rewrite.path_prepend(base + b"/", b"/"), base)
        self.assertEqual(proxy_rewrite.path_prepend(base + b"/a/b", b"/a/b"), base)
        self.assertEqual(proxy_rewrite.path_prepend(base + b"/a/", b"/a/"), base)
        self.assertEqual(proxy_rewrite.path_prepend(base, b""), base)
        self.assertEqual(proxy_rewrite.forwarded_uri(base, b"/", b"/"), base + b"/")
        self.assertEqual(proxy_rewrite.forwarded_uri(base, b"/a b/c", b"/a%20b/c"), base + b"/a%20b/c")
        self.assertEqual(proxy_rewrite.forwarded_uri(base, b"/x/", b"/x/"), base + b"/x/")


class RewriteHTMLTests(unittest.TestCase):
    def test_the_conformance_page(self):
        self.assertEqual(page(b'<a href="/rewriteme">test</a>'), b'<a href="' + P + b'/rewriteme">test</a>')

    def test_start_tags_are_printed_back_as_go_prints_them(self):
        cases = {
            # names and keys lower-cased, values double-quoted; the end tag as it came
            b"<A HREF='/x' Class=big>t</A>": b'<a href="' + P + b'/x" class="big">t</A>',
            b"<img src=\"/i.png\" alt='a \"b\" & c' title=x<y>":
                b'<img src="' + P + b'/i.png" alt="a &#34;b&#34; &amp; c" title="x&lt;y">',
            # self-closing tags keep their slash; an unquoted value takes one before '>'
            b"<link rel=stylesheet href=/s.css /><br/><a href=/x/>":
                b'<link rel="stylesheet" href="' + P + b'/s.css"/><br/><a href="' + P + b'/x/"/>',
            b"<input disabled src=/b.png>": b'<input disabled="" src="' + P + b'/b.png">',
            b"<a\thref\n=\n'/sp'\f>x</a >": b'<a href="' + P + b'/sp">x</a >',
            b"<a =/x href=/y><a href='/q' / >": b'<a =="" x="" href="' + P + b'/y"><a href="' + P + b'/q">',
            b"<a href=/1 href=/2>": b'<a href="' + P + b'/1" href="' + P + b'/2">',
            # other tags and attributes: printed back, not rewritten
            b'<div data-href="/x" HREF="/y">': b'<div data-href="/x" href="/y">',
        }
        for html, rewritten in cases.items():
            self.assertEqual(page(html), rewritten, html)

    def test_character_references_in_values(self):
        html = b'<a href="/a?x=1&amp;y=2" title="&amp=x &ampy &lt &#65;&#x42;&#128;&#0;&bogus;">'
        self.assertEqual(page(html), b'<a href="' + P + b'/a?x=1&amp;y=2" title="&amp;amp=x &amp;ampy &lt; AB'
                         + "\u20ac\ufffd".encode() + b'&amp;bogus;">')
        # CR LF and CR are newlines in a value; a newline or tab makes the link unparsable
        self.assertEqual(page(b'<a href="/x\r\ny" title="a\rb">'), b'<a href="/x\ny" title="a\nb">')
        self.assertEqual(page(b'<a href="http://[::1/x"><a href="/a&#9;b">'),
                         b'<a href="http://[::1/x"><a href="/a\tb">')

    def test_raw_text_elements_pass_through(self):
        cases = {
            b"<script>var a = '<a href=\"/x\">';</script><script src=\"/app.js\"></script>":
                b"<script>var a = '<a href=\"/x\">';</script><script src=\"" + P + b"/app.js\"></script>",
            b"<title>a <a href=\"/x\"></title><textarea><a href=/x></textarea ><a href=/y>":
                b"<title>a <a href=\"/x\"></title><textarea><a href=/x></textarea ><a href=\"" + P + b"/y\">",
            b"<style>a[href=\"/x\"]{}</style><STYLE></Style/><a href=/z>":
                b"<style>a[href=\"/x\"]{}</style><style></Style/><a href=\"" + P + b"/z\">",
            # inside <!-- <script> ... --> a </script> does not end the script
            b"<script><!--<script>\"</script>\"--></script><a href=/y>":
                b"<script><!--<script>\"</script>\"--></script><a href=\"" + P + b"/y\">",
            b"<noscript><a href=/n></noscript><xmp><a href=/m></xmp><iframe><a href=/i></iframe>"
            b"<noembed><a href=/e></noembed><noframes><a href=/f></noframes>":
                b"<noscript><a href=/n></noscript><xmp><a href=/m></xmp><iframe><a href=/i></iframe>"
                b"<noembed><a href=/e></noembed><noframes><a href=/f></noframes>",
            b"<plaintext><a href=/x></plaintext><a href=/y>": b"<plaintext><a href=/x></plaintext><a href=/y>",
        }
        for html, rewritten in cases.items():
            self.assertEqual(page(html), rewritten, html)

    def test_comments_doctypes_and_odd_bytes_pass_through(self):
        cases = {
            b'<!DOCTYPE html><!-- <a href="/x"> --><?xml version="1.0"?></><a href=/y>':
                b'<!DOCTYPE html><!-- <a href="/x"> --><?xml version="1.0"?></><a href="' + P + b'/y">',
            b"<!-->--><!---->x<!-- a --!><a href=/c>": b'<!-->--><!---->x<!-- a --!><a href="' + P + b'/c">',
            b"<!-- open <a href=/x>": b"<!-- open <a href=/x>",
            b'\xff<a href="/\xff">\xfe</a>': b'\xff<a href="' + P + b'/%FF">\xfe</a>',
        }
        for html, rewritten in cases.items():
            self.assertEqual(page(html), rewritten, html)

    def test_a_tag_cut_off_at_the_end_is_dropped_as_upstream_drops_it(self):
        self.assertEqual(page(b'<p>ok</p><a href="/x"'), b"<p>ok</p>")

    def test_every_url_attribute_of_the_table(self):
        html = (b"<form action=/submit><button formaction=/b><object data=/d classid=/c>"
                b"<video poster=/p src=/v><iframe src=/f></iframe><base href=/>")
        self.assertEqual(page(html), (
            b'<form action="' + P + b'/submit"><button formaction="' + P + b'/b"><object data="' + P
            + b'/d" classid="' + P + b'/c"><video poster="' + P + b'/p" src="' + P + b'/v"><iframe src="' + P
            + b'/f"></iframe><base href="' + P + b'/"/>'))
        html = b'<a href="//example.com/x"><a href="http://10.0.0.5:1080/y"><a href="http://127.0.0.1:6443/z">'
        self.assertEqual(page(html), b'<a href="//example.com/x"><a href="' + P + b'/y"><a href="http://127.0.0.1:6443'
                         + P + b'/z">')

    def test_the_tokens_raw_bytes_partition_the_page(self):
        html = b"<!DOCTYPE html><p class=x>a &amp; b</p><!-- c --><script>if (a<b) {}</script><br/>"
        found = list(go_html.tokens(html))
        self.assertEqual(b"".join(html[t.start:t.end] for t in found), html)
        self.assertEqual([t.type.value for t in found], ["Doctype", "StartTag", "Text", "EndTag", "Comment",
                                                          "StartTag", "Text", "EndTag", "SelfClosingTag"])


class RewriteBodyTests(unittest.TestCase):
    HTML = b'<html><body><a href="/rewriteme">test</a></body></html>'
    REWRITTEN = b'<html><body><a href="' + P + b'/rewriteme">test</a></body></html>'

    def test_gzip_and_deflate_are_decoded_and_encoded_again(self):
        body = rewrite_body(gzip.compress(self.HTML), b"gzip", LINKS.rewrite)
        self.assertEqual(gzip.decompress(body), self.REWRITTEN)
        # two gzip members are one body, as Go's multistream reader reads them
        body = rewrite_body(gzip.compress(self.HTML[:20]) + gzip.compress(self.HTML[20:]), b"gzip", LINKS.rewrite)
        self.assertEqual(gzip.decompress(body), self.REWRITTEN)
        # Go's "deflate" is compress/flate: raw DEFLATE, no zlib header
        encoder = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        body = rewrite_body(encoder.compress(self.HTML) + encoder.flush(), b"deflate", LINKS.rewrite)
        self.assertEqual(zlib.decompress(body, -zlib.MAX_WBITS), self.REWRITTEN)
        self.assertEqual(rewrite_body(self.HTML, b"", LINKS.rewrite), self.REWRITTEN)

    def test_a_body_that_cannot_be_decoded_is_gos_error(self):
        compressed = gzip.compress(self.HTML)
        corrupt_crc = compressed[:-8] + bytes([compressed[-8] ^ 1]) + compressed[-7:]
        cases = [
            (b"", b"gzip", "errorf making gzip reader: EOF"),  # a HEAD's empty body, as upstream
            (b"\x1f\x8b", b"gzip", "errorf making gzip reader: unexpected EOF"),
            (b"<html>not gzip</html>", b"gzip", "errorf making gzip reader: gzip: invalid header"),
            (compressed[:-12], b"gzip", "unexpected EOF"),
            (corrupt_crc, b"gzip", "gzip: invalid checksum"),
            (compressed + b"trailing junk", b"gzip", "gzip: invalid header"),
            (zlib.compress(self.HTML), b"deflate", "flate: corrupt input"),  # zlib-wrapped is no raw DEFLATE
            (b"", b"deflate", "unexpected EOF"),
        ]
        for body, coding, message in cases:
            with self.assertRaises(proxy_rewrite.RewriteError, msg=(body, coding)) as caught:
                rewrite_body(body, coding, LINKS.rewrite)
            self.assertEqual(str(caught.exception), message, (body, coding))

    def test_which_answers_are_rewritten(self):
        for content_type, html in ((b"text/html", True), (b"text/html; charset=utf-8", True), (b" text/html ;x", True),
                                   (b"TEXT/HTML", False), (b"application/xhtml+xml", False), (None, False)):
            self.assertEqual(proxy_rewrite.content_type_is_html(content_type), html, content_type)
        self.assertEqual([proxy_rewrite.rewrites_coding(c) for c in (b"", b"gzip", b"deflate", b"br", b"GZIP")],
                         [True, True, True, False, False])
