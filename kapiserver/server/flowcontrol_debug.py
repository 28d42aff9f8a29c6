"""``/debug/api_priority_and_fairness/dump_{priority_levels,queues,requests}`` (apf_controller_debug.go).

Text in upstream's layout: comma-separated columns aligned by Go's
tabwriter, one row per priority level, per queue, or per request (waiting
or running); ``?includeRequestDetails=1`` adds who and what to each request.
An HTTP resource the server installs (upstream's ``apfController.Install`` on
the server's mux), reading the controller of ``kapiserver.flowcontrol``.
"""
from __future__ import annotations

import datetime
from typing import Any, Iterable

from twisted.web import resource, server

from kapiserver.endpoints import static
from kapiserver.endpoints.request_context import context_of
from kapiserver.flowcontrol.controller import APFController
from kapiserver.flowcontrol.queueset import Request, format_seat_seconds
from kapiserver.machinery.tabwriter import align

_ZERO_TIME = "0001-01-01T00:00:00Z"


def _row(*columns: Any) -> str:
    return ",\t".join(str(c) for c in columns)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _rfc3339nano(seconds: float | None) -> str:
    """Go's time.RFC3339Nano of a wall-clock time (seconds since the epoch) in UTC: trailing
    zeros of the fraction dropped."""
    if seconds is None:
        return _ZERO_TIME
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return f"{text}.{fraction}Z" if fraction else f"{text}Z"


def _go_duration(seconds: float) -> str:
    """time.Duration.String() for the durations requests carry (0s, 5ms...)."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:g}ms" if ms >= 1 else f"{seconds * 1e6:g}µs"
    return f"{seconds:g}s"


def dump_priority_levels(controller: APFController) -> str:
    lines = [_row("PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests",
                  "ExecutingRequests", "DispatchedRequests", "RejectedRequests", "TimedoutRequests",
                  "CancelledRequests")]
    for name in sorted(controller.levels):
        state = controller.levels[name]
        qs = state.queues
        active = sum(1 for q in qs.queues if q.waiting)
        lines.append(_row(name, active, _bool(qs.is_idle()), _bool(state.quiescing), qs.waiting, qs.executing,
                          qs.dispatched_total, qs.rejected_total, qs.timedout_total, qs.cancelled_total))
    return align("".join(line + "\n" for line in lines))


def dump_queues(controller: APFController) -> str:
    lines = [_row("PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse",
                  "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum")]
    for name in sorted(controller.levels):
        for i, q in enumerate(controller.levels[name].queues.queues):
            lines.append(_row(name, i, len(q.waiting), len(q.executing), q.seats_in_use,
                              format_seat_seconds(q.next_dispatch_r), q.initial_seats_sum, q.max_seats_sum,
                              format_seat_seconds(q.total_work_sum)))
    return align("".join(line + "\n" for line in lines))


def dump_requests(controller: APFController, details: bool) -> str:
    header = _row("PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher",
                  "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime")
    if details:
        header += ",\t" + _row("UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource",
                               "SubResource")
    lines = [header]

    def add(level: str, queue_index: int, index: int, r: Request) -> None:
        line = _row(level, r.fs_name, queue_index, index, r.distinguisher, _rfc3339nano(r.arrival_time),
                    r.estimate.initial_seats, r.estimate.final_seats, _go_duration(r.estimate.additional_latency),
                    _rfc3339nano(r.start_time))
        if details and r.details is not None:
            info = r.details.info
            version = f"{info.group}/{info.version}" if info.group else info.version
            line += ",\t" + _row(r.details.user_name, info.verb, info.path, info.namespace, info.name, version,
                                 info.resource, info.subresource)
        lines.append(line)

    for name in sorted(controller.levels):
        qs = controller.levels[name].queues
        for qi, q in enumerate(qs.queues):
            for ri, r in enumerate(q.waiting):
                add(name, qi, ri, r)
            for r in _by_arrival(q.executing):
                add(name, qi, -1, r)
        for r in _by_arrival(qs.queueless):
            add(name, -1, -1, r)
    return align("".join(line + "\n" for line in lines))


def _by_arrival(requests: Iterable[Request]) -> list[Request]:
    return sorted(requests, key=lambda r: r.arrival_time)


class APFDebugResource(resource.Resource):
    """``/debug/api_priority_and_fairness/<dump>`` (a leaf of the kube link's server paths)."""

    isLeaf = True

    def __init__(self, controller: APFController) -> None:
        super().__init__()
        self.controller = controller

    def render(self, request: server.Request) -> Any:
        parts = context_of(request).require_info().parts
        dump = parts[2] if len(parts) == 3 and parts[1] == "api_priority_and_fairness" else ""
        if dump == "dump_priority_levels":
            text = dump_priority_levels(self.controller)
        elif dump == "dump_queues":
            text = dump_queues(self.controller)
        elif dump == "dump_requests":
            values = (request.args or {}).get(b"includeRequestDetails") or [b""]
            text = dump_requests(self.controller, bool(values[0]))
        else:
            return static.not_found().render(request)
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return text.encode("utf-8")
