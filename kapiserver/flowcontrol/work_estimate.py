"""How many seats a request takes (upstream's util/flowcontrol/request).

A LIST (and a watch that sends its initial events: watch-list) takes one
seat per 100 objects it will go through, at least 1 and at most the level's
maximum (15 % of its concurrency limit, no more than limit / hand size, at
most 10).  Every other request takes one seat.  Upstream also holds seats
for a while after a write, by the number of watches it notifies; that is not
done here (a write takes one seat for as long as it runs).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from kapiserver.flowcontrol.queueset import WorkEstimate
from kapiserver.request.info import RequestInfo

MINIMUM_SEATS = 1
MAXIMUM_SEATS_LIMIT = 10
OBJECTS_PER_SEAT = 100.0
MAX_SEATS_PERCENT = 0.15

# (API group, resource) -> objects stored now (None: unknown)
ObjectCounter = Callable[[str, str], Optional[int]]


def max_seats(concurrency_limit: int, hand_size: int) -> int:
    """The most seats one request of a queuing level may take."""
    if not hand_size:
        return 0
    return int(max(1, min(math.ceil(concurrency_limit * MAX_SEATS_PERCENT), concurrency_limit // hand_size)))


def _truthy(args: dict, key: bytes) -> bool:
    values = args.get(key) or []
    return bool(values) and values[0].lower() in (b"true", b"1")


def _arg(args: dict, key: bytes) -> str:
    values = args.get(key) or []
    return values[0].decode("utf-8", "replace") if values else ""


def _from_storage(args: dict) -> bool:
    """shouldListFromStorage: which lists go past the watch cache (a continue token, an exact
    resourceVersion); consistent lists are served from the cache, as upstream's in 1.32."""
    if _arg(args, b"continue"):
        return True
    match = _arg(args, b"resourceVersionMatch")
    rv = _arg(args, b"resourceVersion")
    limit = _arg(args, b"limit")
    legacy_exact = limit not in ("", "0") and not match and rv not in ("", "0")
    return (match not in ("", "NotOlderThan")) or legacy_exact


def estimate(info: RequestInfo, args: dict, count: ObjectCounter, level_max_seats: int) -> WorkEstimate:
    """The seats of one request, given the level's maximum (0: no queuing, the limit applies)."""
    top = level_max_seats if 0 < level_max_seats <= MAXIMUM_SEATS_LIMIT else MAXIMUM_SEATS_LIMIT
    if info.verb not in ("list", "watch"):
        return WorkEstimate(MINIMUM_SEATS)
    if info.name:
        return WorkEstimate(MINIMUM_SEATS)
    if info.verb == "watch" and not _truthy(args, b"sendInitialEvents"):
        return WorkEstimate(MINIMUM_SEATS)
    stored = count(info.group, info.resource)
    if stored is None:
        return WorkEstimate(MINIMUM_SEATS)
    try:
        limit = int(_arg(args, b"limit") or 0)
    except ValueError:
        limit = 0
    scanned = stored
    if not (info.verb == "watch" or not _from_storage(args)):
        pages = limit if 0 < limit < stored else stored
        if _arg(args, b"fieldSelector") or _arg(args, b"labelSelector"):
            scanned = stored + pages
        else:
            scanned = 2 * pages
    seats = int(math.ceil(scanned / OBJECTS_PER_SEAT))
    return WorkEstimate(min(max(seats, MINIMUM_SEATS), top))
