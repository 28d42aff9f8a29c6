"""TLS for the serving port: Twisted's memory-BIO TLS, draining the BIO once per write.

Twisted's ``TLSMemoryBIOProtocol`` hands a write to OpenSSL in 16 KiB records
and, after each, reads the encrypted record out of the memory BIO and writes
it to the socket transport: per record a slice of the input, a buffer
allocation, a copy out and a transport write (which re-arms the writer and
asks the producer machinery).  A list answer is about a megabyte written in
64 KiB slices, so that is some 65 rounds per list.  ``ServingTLSTransport``
encrypts all of a write's records first (from a ``memoryview``: no slicing
copies) and then drains the BIO in large reads: the same bytes on the wire,
a few transport writes per slice instead of one per record.
"""
from __future__ import annotations

from OpenSSL.SSL import Error, WantReadError
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from twisted.python.failure import Failure

# A TLS record carries at most 16 KiB of application data.
RECORD_BYTES = 2 ** 14
# How much encrypted output one read of the BIO takes at most.
DRAIN_BYTES = 2 ** 18


class ServingTLSTransport(BufferingTLSTransport):
    """``BufferingTLSTransport`` whose writes are encrypted whole, then drained at once.

    (Small writes are still gathered until the next reactor turn by the base
    class, so a response's head and a small body become one record.)
    """

    def _write(self, data: bytes) -> None:
        if self._lostTLSConnection:
            return
        view = memoryview(data)
        sent = 0
        try:
            while sent < len(view):
                sent += self._tlsConnection.send(view[sent:sent + RECORD_BYTES])
        except WantReadError:
            # OpenSSL needs to read first (a handshake in progress): keep the rest for later
            self._drain()
            self._bufferedWrite(bytes(view[sent:]))
            return
        except Error:
            self._drain()
            self._tlsShutdownFinished(Failure())
            return
        self._drain()

    def _drain(self) -> None:
        """Write whatever the send BIO holds to the socket transport."""
        while True:
            try:
                encrypted = self._tlsConnection.bio_read(DRAIN_BYTES)
            except WantReadError:
                return
            transport = self.transport
            assert transport is not None  # (connected: it is writing)
            transport.write(encrypted)
            if len(encrypted) < DRAIN_BYTES:
                return


class ServingTLSFactory(TLSMemoryBIOFactory):
    """``TLSMemoryBIOFactory`` whose connections are :class:`ServingTLSTransport`."""

    protocol = ServingTLSTransport
