"""The limits every client connection lives under, from the ``connections`` configuration section."""
from __future__ import annotations

from typing import Any, NamedTuple

# Go's net/http reads a request head up to MaxHeaderBytes plus a 4096-byte slack (its bufio
# buffer) before answering 431; kube-apiserver sets MaxHeaderBytes to 1 MiB.
HEADER_READ_SLACK = 4096
# HTTP/2 counts a header list with 32 bytes per field; Go pads MaxHeaderBytes for ten fields
# when it advertises SETTINGS_MAX_HEADER_LIST_SIZE.
H2_FIELD_OVERHEAD = 32
H2_TYPICAL_FIELDS = 10


class ConnectionPolicy(NamedTuple):
    tls_handshake_timeout: float = 10.0
    request_header_timeout: float = 10.0
    idle_timeout: float = 90.0
    max_header_bytes: int = 1 << 20
    # a request with more header fields is answered 431 (each field costs memory here, far
    # more than its bytes; Twisted's own limit, no real client comes near it)
    max_header_fields: int = 500
    max_body_bytes: int = 3 * 1024 * 1024
    # an authenticated client's body over the limit is read and dropped up to this size, so a
    # client that reads the 413 only once it has sent everything gets it; beyond, it is cut
    discard_body_bytes: int = 64 * 1024 * 1024
    max_connections: int = 10000
    max_connections_per_address: int = 1000
    http2_max_streams: int = 100
    http2_ping_interval: float = 30.0
    http2_ping_timeout: float = 15.0
    # the share of HTTP/2 requests after which their connection drains (GOAWAY), so clients spread
    # again over the workers: upstream's --goaway-chance
    goaway_chance: float = 0.0
    # a closing connection whose peer does not take the last bytes is aborted after this long
    close_timeout: float = 5.0
    # after answering a request whose body was not read: half-close, then abort this much later
    # (Go's rstAvoidanceDelay), so the client reads the answer before a reset can discard it
    linger_seconds: float = 0.5
    # on shutdown, a connection that has not sent its first request yet (its client may have
    # sent it already) gets this long for it, as Go's Shutdown treats connections new for 5 s
    new_connection_grace: float = 5.0

    @property
    def header_read_limit(self) -> int:
        """Bytes of request line and headers (with their line ends) read before 431."""
        return self.max_header_bytes + HEADER_READ_SLACK

    @property
    def http2_header_list_size(self) -> int:
        """SETTINGS_MAX_HEADER_LIST_SIZE as Go's HTTP/2 server advertises it."""
        return self.max_header_bytes + H2_FIELD_OVERHEAD * H2_TYPICAL_FIELDS

    @classmethod
    def from_config(cls, config: Any) -> "ConnectionPolicy":
        c = config.connections
        return cls(tls_handshake_timeout=float(c.tls_handshake_timeout_seconds),
                   request_header_timeout=float(c.request_header_timeout_seconds),
                   idle_timeout=float(c.idle_timeout_seconds),
                   max_header_bytes=c.max_header_bytes,
                   max_body_bytes=config.limits.max_request_body_bytes,
                   max_connections=c.max_connections,
                   max_connections_per_address=c.max_connections_per_address,
                   http2_max_streams=c.http2_max_streams_per_connection,
                   http2_ping_interval=float(c.http2_ping_interval_seconds),
                   http2_ping_timeout=float(c.http2_ping_timeout_seconds),
                   goaway_chance=float(c.goaway_chance))
