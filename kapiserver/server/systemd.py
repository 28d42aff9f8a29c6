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
from typing import Any, Mapping, Optional

from twisted.internet import task
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

log = Logger()


def _address(env: Mapping[str, str]) -> Optional[str]:
    addr = env.get("NOTIFY_SOCKET", "")
    if not addr or not addr.startswith(("/", "@")):
        return None
    if addr.startswith("@"):
        return "\0" + addr[1:]  # Linux abstract namespace
    return addr


# When systemd's queue is full (it has not read the last datagrams yet), READY=1 and
# STOPPING=1 are sent again this often, for this long; a WATCHDOG=1 is simply dropped.
QUEUE_FULL_RETRY_SECONDS = 0.05
QUEUE_FULL_GIVE_UP_SECONDS = 10.0


def notify(state: str, env: Optional[Mapping[str, str]] = None) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``) to systemd; True if a datagram was sent."""
    env = os.environ if env is None else env
    if _address(env) is None:
        return False
    error = _send(state, env)
    if error is not None:
        log.warn("sd_notify {state!r} failed: {error}", state=state, error=error)
    return error is None


def _send(state: str, env: Mapping[str, str]) -> Optional[OSError]:
    """Send one datagram without ever blocking; the error if it was not sent (None: sent, or no socket)."""
    addr = _address(env)
    if addr is None:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.setblocking(False)
            sock.sendto(state.encode("utf-8"), addr)
        return None
    except OSError as e:
        return e


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

    def __init__(self, env: Optional[Mapping[str, str]] = None, reactor: Optional[IReactorTime] = None) -> None:
        self._env = dict(os.environ if env is None else env)
        self._reactor = reactor
        self._watchdog: Optional[task.LoopingCall] = None
        # READY=1 / STOPPING=1 not yet taken by a full queue, the retry, and when to stop trying
        self._undelivered: list[str] = []
        self._retry: Any = None
        self._give_up_at: Optional[float] = None

    def notify(self, state: str) -> bool:
        return notify(state, self._env)

    def ready(self) -> None:
        """Tell systemd we serve; starts the watchdog heartbeat if the unit asked for one."""
        self._deliver("READY=1")
        self.start_watchdog()

    def stopping(self) -> None:
        self._deliver("STOPPING=1")
        self.stop_watchdog()

    def _deliver(self, state: str) -> None:
        """Send a state systemd must not miss, after those still waiting, in order: while
        systemd's queue is full, again a little later (for a while)."""
        self._undelivered.append(state)
        if self._retry is None:
            self._flush()

    def _flush(self) -> None:
        self._retry = None
        while self._undelivered:
            error = _send(self._undelivered[0], self._env)
            if isinstance(error, BlockingIOError) and self._reactor is not None:
                now = self._reactor.seconds()
                if self._give_up_at is None:
                    self._give_up_at = now + QUEUE_FULL_GIVE_UP_SECONDS
                if now < self._give_up_at:
                    self._retry = self._reactor.callLater(QUEUE_FULL_RETRY_SECONDS, self._flush)
                    return
            if error is not None:
                log.warn("sd_notify {state!r} failed: {error}", state=self._undelivered[0], error=error)
            self._undelivered.pop(0)
            self._give_up_at = None

    def _ping(self) -> None:
        error = _send("WATCHDOG=1", self._env)
        if error is not None and not isinstance(error, BlockingIOError):  # a full queue: the next ping
            log.warn("sd_notify 'WATCHDOG=1' failed: {error}", error=error)

    def start_watchdog(self) -> None:
        interval = watchdog_interval(self._env)
        if interval is None or self._watchdog is not None or _address(self._env) is None:
            return
        self._watchdog = task.LoopingCall(self._ping)
        if self._reactor is not None:
            self._watchdog.clock = self._reactor
        self._watchdog.start(interval, now=True)
        log.info("systemd watchdog: pinging every {interval:.3f}s", interval=interval)

    def stop_watchdog(self) -> None:
        if self._watchdog is not None and self._watchdog.running:
            self._watchdog.stop()
        self._watchdog = None
