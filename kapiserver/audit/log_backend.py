"""The audit log backend (``--audit-log-path``): one JSON event per line, rotated by size.

Events are encoded on the reactor thread (orjson, microseconds) and handed
to a writer thread through a bounded queue, so a slow disk never stalls
request handling: when the queue is full the event is refused, counted in
``apiserver_audit_error_total{plugin="log"}``, and the request that produced
it is answered 500, as upstream's blocking log backend fails a request whose
event it could not store.

Rotation follows lumberjack (upstream's log writer): before a write would
make the file larger than ``--audit-log-maxsize`` megabytes (100 when 0), the
file is renamed ``<name>-<UTC time 2006-01-02T15-04-05.000><ext>`` and a new
one started; backups beyond ``--audit-log-maxbackup`` (0 = all kept) and older
than ``--audit-log-maxage`` days (0 = any age) are removed.  Every file is
created 0600 in a directory created 0700.  ``-`` writes to standard output.
"""
from __future__ import annotations

import datetime
import os
import queue
import re
import threading
from typing import Any, Callable, Optional

import orjson
from twisted.internet import defer
from twisted.logger import Logger

from kapiserver.audit.metrics import AuditMetrics
from kapiserver.machinery import private_files

log = Logger()

PLUGIN = "log"
MEGABYTE = 1024 * 1024
DEFAULT_MAX_SIZE_MB = 100
QUEUE_EVENTS = 10_000
_STOP = object()
_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S.%f"


def backup_name(path: str, when: datetime.datetime) -> str:
    directory, name = os.path.split(path)
    stem, ext = os.path.splitext(name)
    stamp = when.strftime(_TIME_FORMAT)[:-3]  # milliseconds, as Go's .000
    return os.path.join(directory, f"{stem}-{stamp}{ext}")


class RotatingFile:
    """An append-only file rotated by size (lumberjack's Logger); used from one thread."""

    def __init__(self, path: str, max_size_mb: int = 0, max_backups: int = 0, max_age_days: int = 0,
                 now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.timezone.utc)) -> None:
        self.path = path
        self.max_bytes = (max_size_mb or DEFAULT_MAX_SIZE_MB) * MEGABYTE
        self.max_backups = max_backups
        self.max_age_days = max_age_days
        self.now = now
        self.fd: Optional[int] = None
        self.size = 0

    def open(self) -> None:
        self.fd = private_files.open_private_append(self.path)
        self.size = os.fstat(self.fd).st_size

    def write(self, data: bytes) -> None:
        if self.fd is None:
            self.open()
        if len(data) > self.max_bytes:
            raise OSError(f"write length {len(data)} exceeds maximum file size {self.max_bytes}")
        if self.size + len(data) > self.max_bytes:
            self.rotate()
        assert self.fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.size += len(data)

    def rotate(self) -> None:
        self.close()
        try:
            os.rename(self.path, backup_name(self.path, self.now()))
        except FileNotFoundError:
            pass
        self.open()
        self.remove_old_backups()

    def backups(self) -> list[tuple[datetime.datetime, str]]:
        """Rotated files of this log, newest first."""
        directory, name = os.path.split(self.path)
        stem, ext = os.path.splitext(name)
        pattern = re.compile(re.escape(stem) + r"-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3})" + re.escape(ext) + "$")
        found = []
        for entry in os.listdir(directory or "."):
            m = pattern.match(entry)
            if not m:
                continue
            when = datetime.datetime.strptime(m.group(1) + "000", _TIME_FORMAT).replace(tzinfo=datetime.timezone.utc)
            found.append((when, os.path.join(directory, entry)))
        return sorted(found, reverse=True)

    def remove_old_backups(self) -> None:
        backups = self.backups()
        doomed = []
        if self.max_backups > 0:
            doomed += backups[self.max_backups:]
            backups = backups[:self.max_backups]
        if self.max_age_days > 0:
            cutoff = self.now() - datetime.timedelta(days=self.max_age_days)
            doomed += [b for b in backups if b[0] < cutoff]
        for _, path in doomed:
            try:
                os.remove(path)
            except OSError as e:
                log.warn("cannot remove old audit log {path}: {err}", path=path, err=e)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class LogBackend:
    """Writes events as JSON lines from a thread of its own."""

    name = PLUGIN

    def __init__(self, path: str, max_size_mb: int = 0, max_backups: int = 0, max_age_days: int = 0,
                 reactor: Any = None, queue_events: int = QUEUE_EVENTS, *, metrics: AuditMetrics) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self.errors = metrics.errors.labels(plugin=PLUGIN)  # events lost
        self.path = path
        self.file = None if path == "-" else RotatingFile(path, max_size_mb, max_backups, max_age_days)
        # unbounded as a queue (a stop marker always fits), bounded by the check in process_events
        self.queue: "queue.Queue[Any]" = queue.Queue()
        self.queue_events = queue_events
        self.thread: Optional[threading.Thread] = None
        self.stopped: Optional[defer.Deferred] = None

    def check(self) -> None:
        """Open the file now, so a path that cannot be written fails the start (raises OSError)."""
        if self.file is not None:
            self.file.open()

    def start(self) -> None:
        if self.thread is not None:
            return
        self.stopped = defer.Deferred()
        self.thread = threading.Thread(target=self._run, name="audit-log", daemon=True)
        self.thread.start()

    def process_events(self, events: list[dict]) -> bool:
        ok = True
        for event in events:
            try:
                line = orjson.dumps(event, default=str) + b"\n"
            except TypeError as e:
                log.error("cannot encode audit event {id}: {err}", id=event.get("auditID"), err=e)
                self.errors.inc()
                ok = False
                continue
            if self.thread is None or self.queue.qsize() >= self.queue_events:
                self.errors.inc()
                log.error("audit log {state}: event {id} dropped", id=event.get("auditID"),
                          state="stopped" if self.thread is None else "queue full")
                ok = False
                continue
            self.queue.put_nowait(line)
        return ok

    def _run(self) -> None:
        try:
            while True:
                item = self.queue.get()
                lines = []
                stop = item is _STOP
                if not stop:
                    lines.append(item)
                while not stop:  # everything already queued goes out in one write
                    try:
                        item = self.queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stop = True
                    else:
                        lines.append(item)
                if lines:
                    self._write(lines)
                if stop:
                    break
        finally:
            if self.file is not None:
                self.file.close()
            stopped = self.stopped
            if stopped is not None:
                self.reactor.callFromThread(stopped.callback, None)

    def _write(self, lines: list[bytes]) -> None:
        try:
            if self.file is None:
                os.write(1, b"".join(lines))
            elif len(lines) == 1 or sum(len(x) for x in lines) + self.file.size <= self.file.max_bytes:
                self.file.write(b"".join(lines))
            else:  # may cross the size limit: line by line, so rotation falls between lines
                for line in lines:
                    self.file.write(line)
        except OSError as e:
            self.errors.inc(len(lines))
            log.error("writing the audit log {path} failed: {err}", path=self.path, err=e)

    def shutdown(self) -> defer.Deferred:
        """Write what is queued, close the file; fires when done."""
        if self.thread is None or self.stopped is None:
            return defer.succeed(None)
        done = self.stopped
        self.thread = None
        self.queue.put(_STOP)
        return done

    def __str__(self) -> str:
        return PLUGIN
