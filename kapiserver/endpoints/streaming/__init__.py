"""Streams between a client and a kubelet or a backend: logs, exec, attach, port-forward, proxy.

Upstream's pieces, in ``k8s.io/apimachinery/pkg/util/proxy`` and
``k8s.io/apiserver/pkg/util/proxy``: the upgrade-aware proxy (SPDY and
WebSocket connections passed through to the kubelet byte for byte), the stream
translator (a ``v5.channel.k8s.io`` WebSocket client served through SPDY
towards the kubelet) and the tunnelling handler (port-forward's SPDY carried
in WebSocket messages).  ``interfaces`` declares the seams between them.

* ``splice``: the byte relay after an upgrade passed through (``serve_upgrade``);
* ``tunnel``: port-forward's SPDY in WebSocket messages (``serve_tunnel``);
* ``translator``: exec/attach ``v5.channel.k8s.io`` WebSocket clients served
  through SPDY (``serve_translated``, ``StreamOptions``);
* ``wsconn``, ``flow``, ``answers``: the server side of a WebSocket, the
  backpressure plumbing, and the HTTP answers to upgrades that do not happen.

The protocols themselves (WebSocket, SPDY/3.1, channel.k8s.io) are sans-IO
codecs in ``kapiserver.machinery.httpstream``.
"""
