"""A raw HTTP/1.1 client that sends one request and reads nothing until told: what a test of a
streamed answer (``ListStream``: big lists, a 422 of many causes) uses to see the server wait for
its reader.  The waits only guard against hangs; the tests assert on what was written."""
from __future__ import annotations

import socket
import time
from typing import Optional

from twisted.internet import reactor, task
from twisted.trial import unittest

from kapiserver.endpoints import list_stream
from kapiserver.endpoints.list_stream import ListStream


def _turn(seconds: float) -> object:
    return task.deferLater(reactor, seconds, lambda: None)


class SlowReader:
    """Connects to ``server_url`` with a small receive buffer and sends ``request`` whole."""

    def __init__(self, test: unittest.TestCase, server_url: str, request: bytes) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self.sock.connect(("127.0.0.1", int(server_url.rsplit(":", 1)[1])))
        test.addCleanup(self.sock.close)
        self.sock.sendall(request)

    async def writing_streams(self, body_type: Optional[type] = None, polls: int = 600) -> list[ListStream]:
        """The server's active streams (of ``body_type`` bodies) once the first has written."""
        streams: list[ListStream] = []
        for _ in range(polls):
            await _turn(0.05)
            streams = [s for s in list_stream.active_streams() if body_type is None or isinstance(s.body, body_type)]
            if streams and streams[0].bytes_written:
                break
        return streams

    @staticmethod
    async def let_it_write() -> None:
        """Reactor turns for the stream to write all its transport takes."""
        for _ in range(10):
            await _turn(0.05)

    async def read_all(self, stream: ListStream, total: int, hang_guard: float = 60.0) -> int:
        """Read until ``stream`` finished and more than ``total`` bytes came; how many came."""
        self.sock.setblocking(False)
        received = 0
        deadline = time.monotonic() + hang_guard
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(1 << 20)
            except BlockingIOError:
                await _turn(0.01)
                continue
            if not chunk:
                break
            received += len(chunk)
            if stream.finished and received > total:
                break
        return received
