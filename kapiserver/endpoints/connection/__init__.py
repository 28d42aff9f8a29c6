"""The connection side of the server: what happens to a client's bytes before the handler chain.

kube-apiserver gets this from Go's ``net/http`` and ``x/net/http2`` servers,
configured in ``secure_serving.go``; here it is Twisted's HTTP/1.1 and HTTP/2
protocols, subclassed:

* ``limits.py``: connections counted in total and per client address at
  accept (the excess is closed before TLS), TCP keep-alive, bounded closes;
* ``protocol.py``: one accepted connection: the TLS handshake time limit, then
  HTTP/1.1 or HTTP/2 as ALPN chose, and the set of open connections that a
  graceful shutdown drains;
* ``http1.py`` / ``http2.py``: request-head time limits and size limits (431),
  idle keep-alive timeouts, HTTP/2 stream limits and PINGs, and the body gate:
  a request is authenticated as soon as its headers are complete, and its body
  is read only when it was authenticated and fits the limit;
* ``policy.py``: the limits, from the ``connections`` section of the configuration;
* ``site.py``: the Site serving the handler chain over these connections;
  ``interfaces.py``: what a channel needs of the connection it runs on.
"""
