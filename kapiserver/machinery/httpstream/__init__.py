"""The protocols of upgraded connections: WebSocket, SPDY/3.1 and the ``channel.k8s.io`` framing.

Sans-IO codecs (bytes in, events and bytes out) for what kube-apiserver speaks
after ``101 Switching Protocols`` on exec, attach and port-forward:

* ``websocket``: RFC 6455, server side, with the handshakes of the two Go
  libraries upstream serves them with (``golang.org/x/net/websocket`` under
  ``k8s.io/apimachinery/pkg/util/httpstream/wsstream`` for the stream
  translator, ``gorilla/websocket`` for the port-forward tunnel).
* ``channel``: the ``channel.k8s.io`` family (``k8s.io/apimachinery/pkg/util/remotecommand``,
  ``wsstream``): channel bytes, the v4 error channel's Status, the v5 close message.
* ``spdy``: SPDY/3.1 as ``github.com/moby/spdystream`` speaks it (its ``spdy``
  framer and its ``Connection``), for the kubelet side.
* ``heads``: the HTTP/1.1 answers written by hand on a hijacked connection.

The Twisted relays that use them are in ``kapiserver.endpoints.streaming``.
"""
