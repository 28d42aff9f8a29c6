"""``kube-system/kube-apiserver-legacy-service-account-token-tracking``: since when this
cluster's API servers record the use of legacy (Secret-based) ServiceAccount tokens.

Every kube-apiserver runs upstream's legacy token tracking controller: the
ConfigMap is created with ``since`` = today's UTC date (``2006-01-02``) when it
is missing, and ``since`` rewritten when it is not a date. kube-controller-manager's
legacy-serviceaccount-token-cleaner reads it (and logs an error every sync
while it is missing). As upstream, creations are at most one per 30 minutes,
so servers that disagree about the ConfigMap's existence cannot fight.
"""
from __future__ import annotations

import datetime
from typing import Any, Callable, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.controllers.named_object import NamedObjectController
from kapiserver.machinery import errors
from kapiserver.registry.store import Store

log = Logger()
NAMESPACE = "kube-system"
NAME = "kube-apiserver-legacy-service-account-token-tracking"
DATA_KEY = "since"
CREATION_INTERVAL_SECONDS = 30 * 60


def today(now: datetime.datetime) -> str:
    return now.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d")


def is_date(value: Any) -> bool:
    """Go's time.Parse("2006-01-02", value): exactly a four-digit year, two-digit month and day
    (ASCII digits, as Go reads them), a day that month has.  (Not ``strptime``: its first use
    imports ``_strptime`` and builds locale tables, 6 ms of the start that reads this.)"""
    if not isinstance(value, str) or len(value) != 10 or value[4] != "-" or value[7] != "-":
        return False
    digits = value[:4] + value[5:7] + value[8:]
    if not (digits.isascii() and digits.isdigit()):
        return False
    try:
        datetime.date(int(value[:4]), int(value[5:7]), int(value[8:]))
    except ValueError:
        return False
    return True


class LegacyTokenTrackingController(NamedObjectController):
    namespace, name, queue_name = NAMESPACE, NAME, "legacy_token_tracking_controller"

    def __init__(self, configmaps: Store, reactor: IReactorTime,
                 clock: Optional[Callable[[], datetime.datetime]] = None) -> None:
        super().__init__(configmaps, reactor)
        self.clock = clock or (lambda: datetime.datetime.now(datetime.timezone.utc))
        self._last_creation: Optional[float] = None

    async def sync(self, current: Optional[dict]) -> None:
        if current is None:
            await self._create()
            return
        if is_date((current.get("data") or {}).get(DATA_KEY)):
            return

        def fix(obj: Optional[dict]) -> dict:
            assert obj is not None  # (called with the stored object: no create)
            obj.setdefault("data", {})
            if obj["data"] is None:
                obj["data"] = {}
            obj["data"][DATA_KEY] = today(self.clock())
            return obj
        try:
            await self.store.guaranteed_update(NAMESPACE, NAME, fix)
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise

    async def _create(self) -> None:
        now = self.reactor.seconds()
        if self._last_creation is not None and now - self._last_creation < CREATION_INTERVAL_SECONDS:
            self.queue.add(NAME, delay=CREATION_INTERVAL_SECONDS - (now - self._last_creation))
            return
        self._last_creation = now
        try:
            await self.store.create(NAMESPACE, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE},
                "data": {DATA_KEY: today(self.clock())}})
        except errors.StatusError as e:
            if e.code == 409:
                return
            self._last_creation = None  # a failed attempt does not use up the interval
            raise
