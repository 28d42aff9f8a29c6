"""API Priority and Fairness on ``/metrics``: upstream's ``apiserver_flowcontrol_*`` names and labels
(the ones read from the queue sets at scrape time).

The server registers a :class:`FlowControlCollector` in its registry, naming
the controller it reads once it runs one."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Optional

from kapiserver.flowcontrol.controller import APFController
from kapiserver.machinery.metrics import Family, LabelledFamily, counter_family, gauge_family


class FlowControlCollector:
    def __init__(self, source: Callable[[], Optional[APFController]]) -> None:
        self.source = source

    def collect(self) -> Iterable[Family]:
        controller = self.source()
        families = self._families()
        if controller is not None:
            self._fill(controller, families)
        return list(families.values())

    @staticmethod
    def _families() -> dict[str, LabelledFamily]:
        level_schema = ["flow_schema", "priority_level"]
        return {
            "inqueue": gauge_family("apiserver_flowcontrol_current_inqueue_requests",
                                    "Number of requests currently pending in queues of the API Priority and "
                                    "Fairness subsystem", level_schema),
            "executing": gauge_family("apiserver_flowcontrol_current_executing_requests",
                                      "Number of requests in initial (for a WATCH) or any (for a non-WATCH) "
                                      "execution stage in the API Priority and Fairness subsystem", level_schema),
            "seats": gauge_family("apiserver_flowcontrol_current_executing_seats",
                                  "Concurrency (number of seats) occupied by the currently executing (initial "
                                  "stage for a WATCH, any stage otherwise) requests in the API Priority and "
                                  "Fairness subsystem", ["priority_level"]),
            "nominal": gauge_family("apiserver_flowcontrol_nominal_limit_seats",
                                    "Nominal number of execution seats configured for each priority level",
                                    ["priority_level"]),
            "dispatched": counter_family("apiserver_flowcontrol_dispatched_requests",
                                         "Number of requests executed by API Priority and Fairness subsystem",
                                         level_schema),
            "rejected": counter_family("apiserver_flowcontrol_rejected_requests",
                                       "Number of requests rejected by API Priority and Fairness subsystem",
                                       level_schema + ["reason"]),
        }

    @staticmethod
    def _fill(controller: APFController, families: dict[str, LabelledFamily]) -> None:
        for name in sorted(controller.levels):
            state = controller.levels[name]
            qs = state.queues
            waiting: Counter[str] = Counter(r.fs_name for q in qs.queues for r in q.waiting)
            executing: Counter[str] = Counter(r.fs_name for q in qs.queues for r in q.executing)
            executing.update(r.fs_name for r in qs.queueless)
            for schema, count in sorted(waiting.items()):
                families["inqueue"].add_metric([schema, name], count)
            for schema, count in sorted(executing.items()):
                families["executing"].add_metric([schema, name], count)
            families["seats"].add_metric([name], qs.seats_in_use)
            families["nominal"].add_metric([name], state.concurrency_limit)
            for schema, count in sorted(qs.dispatched_by_schema.items()):
                families["dispatched"].add_metric([schema, name], count)
            for (schema, reason), count in sorted(qs.rejected_by_schema.items()):
                families["rejected"].add_metric([schema, name, reason], count)

