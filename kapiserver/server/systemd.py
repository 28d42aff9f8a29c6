"""systemd's notify protocol (sd_notify) without libsystemd.

With ``Type=notify`` systemd passes ``NOTIFY_SOCKET`` (a path, or an abstract
socket name starting with ``@``) and waits for ``READY=1``; ``STOPPING=1``
announces shutdown; with ``WatchdogSec=`` it passes ``WATCHDOG_USEC`` (and
``WATCHDOG_PID``) and expects ``WATCHDOG=1`` at least that often.  Outside
systemd every call is a no-op.
"""
from __future__ import annotations

import os
import socket
from typing import Mapping, Optional

from twisted.internet import task
from twisted.logger import Logger

log = Logger()


def _address(env: Mapping[str, str]) -> Optional[str]:
    addr = env.get("NOTIFY_SOCKET", "")
    if not addr or not addr.startswith(("/", "@")):
        return None
    if addr.startswith("@"):
        return "\0" + addr[1:]  # Linux abstract namespace
    return addr


def notify(state: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to systemd; True if a datagram was sent."""
    addr = _address(os.environ if env is None else env)
    if addr is None:
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)
            sock.sendto(state.encode("utf-8"), addr)
        return True
    except OSError as e:
        log.warn("sd_notify {state!r} failed: {error}", state=state, error=e)
        return False


def watchdog_interval(env: Optional[Mapping[str, str]] = None) -> Optional[float]:
    """Seconds between WATCHDOG=1 pings (half of WATCHDOG_USEC), or None if not asked for."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec:
        return None
    if pid and pid != str(os.getpid()):
        return None
    try:
        value = int(usec)
    except ValueError:
        return None
    if value <= 0:
        return None
    return value / 2 / 1_000_000


class Notifier:
    """The server's link to systemd: readiness, stopping and the watchdog heartbeat."""

    def __init__(self, env: Optional[Mapping[str, str]] = None, reactor=None) -> None:
        self._env = dict(os.environ if env is None else env)
        self._reactor = reactor
        self._watchdog: Optional[task.LoopingCall] = None

    def notify(self, state: str) -> bool:
        return notify(state, self._env)

    def ready(self) -> None:
        """Tell systemd we serve; starts the watchdog heartbeat if the unit asked for one."""
        self.notify("READY=1")
        self.start_watchdog()

    def stopping(self) -> None:
        self.notify("STOPPING=1")
        self.stop_watchdog()

    def start_watchdog(self) -> None:
        interval = watchdog_interval(self._env)
        if interval is None or self._watchdog is not None or _address(self._env) is None:
            return
        self._watchdog = task.LoopingCall(self.notify, "WATCHDOG=1")
        if self._reactor is not None:
            self._watchdog.clock = self._reactor
        self._watchdog.start(interval, now=True)
        log.info("systemd watchdog: pinging every {interval:.3f}s", interval=interval)

    def stop_watchdog(self) -> None:
        if self._watchdog is not None and self._watchdog.running:
            self._watchdog.stop()
        self._watchdog = None
