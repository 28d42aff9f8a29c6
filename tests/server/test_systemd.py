"""sd_notify: datagrams arrive on the socket systemd names, abstract names included."""
from __future__ import annotations

import os
import shutil
import tempfile
import socket

from twisted.internet import task
from twisted.trial import unittest

from kapiserver.server import systemd


class NotifyTests(unittest.TestCase):
    def listen(self, abstract: bool = False) -> tuple[socket.socket, str]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(sock.close)
        if abstract:
            name = f"kapiserver-test-{os.getpid()}-{id(sock)}"
            sock.bind("\0" + name)
            env_value = "@" + name
        else:
            directory = tempfile.mkdtemp(prefix="kap-sd-")  # AF_UNIX paths are short (108 bytes)
            self.addCleanup(shutil.rmtree, directory, True)
            env_value = os.path.join(directory, "notify")
            sock.bind(env_value)
        sock.settimeout(5)
        return sock, env_value

    def test_path_socket(self) -> None:
        sock, addr = self.listen()
        self.assertTrue(systemd.notify("READY=1", {"NOTIFY_SOCKET": addr}))
        self.assertEqual(sock.recv(100), b"READY=1")

    def test_abstract_socket(self) -> None:
        sock, addr = self.listen(abstract=True)
        self.assertTrue(systemd.notify("STOPPING=1", {"NOTIFY_SOCKET": addr}))
        self.assertEqual(sock.recv(100), b"STOPPING=1")

    def test_no_socket_is_a_no_op(self) -> None:
        self.assertFalse(systemd.notify("READY=1", {}))

    def test_watchdog_interval(self) -> None:
        self.assertEqual(systemd.watchdog_interval({"WATCHDOG_USEC": "4000000"}), 2.0)
        self.assertEqual(systemd.watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}),
                         2.0)
        self.assertIsNone(systemd.watchdog_interval({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}))
        self.assertIsNone(systemd.watchdog_interval({}))

    def test_watchdog_pings_until_stopping(self) -> None:
        sock, addr = self.listen()
        clock = task.Clock()
        notifier = systemd.Notifier({"NOTIFY_SOCKET": addr, "WATCHDOG_USEC": "1000000"}, clock)
        notifier.ready()
        self.assertEqual(sock.recv(100), b"READY=1")
        self.assertEqual(sock.recv(100), b"WATCHDOG=1")
        clock.advance(0.5)
        self.assertEqual(sock.recv(100), b"WATCHDOG=1")
        notifier.stopping()
        self.assertEqual(sock.recv(100), b"STOPPING=1")
        clock.advance(5)
        sock.settimeout(0.05)
        self.assertRaises(socket.timeout, sock.recv, 100)

    def test_ready_and_stopping_wait_for_room_in_a_full_queue(self) -> None:
        sock, addr = self.listen()
        clock = task.Clock()
        notifier = systemd.Notifier({"NOTIFY_SOCKET": addr, "WATCHDOG_USEC": "1000000"}, clock)
        filler = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.addCleanup(filler.close)
        filler.setblocking(False)
        queued = 0
        while True:  # systemd has not read anything for a while: its queue is full
            try:
                filler.sendto(b"OLD", addr)
            except BlockingIOError:
                break
            queued += 1
        notifier.ready()  # its watchdog's first ping is dropped: the next one will do
        notifier.stopping()
        clock.advance(systemd.QUEUE_FULL_RETRY_SECONDS)  # still full: both wait again
        self.assertEqual([sock.recv(100) for _ in range(queued)], [b"OLD"] * queued)
        clock.advance(systemd.QUEUE_FULL_RETRY_SECONDS)
        self.assertEqual([sock.recv(100), sock.recv(100)], [b"READY=1", b"STOPPING=1"])  # in order
        clock.advance(systemd.QUEUE_FULL_GIVE_UP_SECONDS)
        sock.settimeout(0.05)
        self.assertRaises(socket.timeout, sock.recv, 100)  # delivered once each, the watchdog stopped
