"""A minimal in-process informer: list, then watch one resource type through its Store.

Controllers get ``on_event(type, obj)`` for the initial state (ADDED) and
every change; a broken or expired watch is restarted with a fresh list.
It is a client of the Store, as client-go's informers are of the API, so it
lives beside it: authorizers, flow control, admission and the controllers
all use it.
"""
from __future__ import annotations

from typing import Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger

from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.options import ListOptions
from kapiserver.registry.store import Store
from kapiserver.registry.watch import BOOKMARK, ERROR, ResourceWatch

log = Logger()
RESTART_DELAY_SECONDS = 1.0


def keys_only(obj: dict) -> dict:
    """``keep`` for an owner that holds its own form of the objects: the informer keeps their
    keys (which a re-list's sweep reads) and nothing of the objects."""
    return {}


class Informer:
    def __init__(self, store: Store, on_event: Callable[[str, dict], None], reactor: IReactorTime,
                 field_selector: str = "", after_list: Optional[Callable[[], None]] = None,
                 metadata_only: bool = False, keep: Optional[Callable[[dict], dict]] = None) -> None:
        self.store = store
        self.on_event = on_event
        # called after every (re)list: objects deleted while the watch was down get no
        # DELETED event, the owner compares what it knows with ``objects``
        self.after_list = after_list
        self.reactor = reactor
        self.field_selector = field_selector
        # objects are ``{"apiVersion", "kind", "metadata"}`` only, read without decoding the
        # rest of the stored value (see ResourceWatch); no field selector with it
        self.metadata_only = metadata_only
        # what ``objects`` holds of each object: all of it by default; an owner that keeps its own
        # form of the objects (RBAC's compiled rules) or reads a few fields of them keeps only
        # those, so an idle process does not hold every decoded object twice
        self.keep = keep
        self.objects: dict[tuple[str, str], dict] = {}
        self._watch: Optional[ResourceWatch] = None
        self._stopped = False
        self._restart: Optional[IDelayedCall] = None
        self.synced: defer.Deferred[None] = defer.Deferred()

    # WatchSink
    def send(self, event_type: str, obj: dict) -> None:
        if event_type == BOOKMARK:
            return
        if event_type == ERROR:
            return  # finish() follows; we restart there
        md = obj.get("metadata") or {}
        key = (md.get("namespace", ""), md.get("name", ""))
        if event_type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj if self.keep is None else self.keep(obj)
        try:
            self.on_event(event_type, obj)
        except Exception:
            log.failure("controller failed handling {type} of {name}", type=event_type, name=key)

    def finish(self) -> None:
        self._schedule_restart()

    def _schedule_restart(self) -> None:
        if not self._stopped and (self._restart is None or not self._restart.active()):
            self._restart = self.reactor.callLater(RESTART_DELAY_SECONDS, self.start)

    def start(self) -> None:
        if self._stopped:
            return
        self.objects.clear()  # the fresh list re-adds what still exists
        opts = ListOptions(parse_label_selector(""), parse_field_selector(self.field_selector), watch=True)
        self._watch = ResourceWatch(self.store, "", opts, self, self.reactor, bookmark_interval=0,
                                    metadata_only=self.metadata_only)
        d = defer.Deferred.fromCoroutine(self._watch.start())

        def started(_):
            if self.after_list is not None:
                try:
                    self.after_list()
                except Exception:
                    log.failure("handling the list of {resource} failed", resource=self.store.rtype.plural)
            if not self.synced.called:
                self.synced.callback(None)

        def failed(f):
            log.error("informer for {resource} failed to start: {err}", resource=self.store.rtype.plural,
                      err=f.getErrorMessage())
            self._schedule_restart()
        d.addCallbacks(started, failed)

    def stop(self) -> None:
        self._stopped = True
        if self._restart is not None and self._restart.active():
            self._restart.cancel()
        if self._watch is not None:
            self._watch.stop()
