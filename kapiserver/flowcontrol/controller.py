"""The configuration consumer of API Priority and Fairness (upstream's apf_controller.go).

It watches FlowSchemas and PriorityLevelConfigurations and, whenever one
changes, digests all of them into the state the filter uses: the flow
schemas in matching order (those whose priority level is missing are left
out, and marked ``Dangling``), and one queue set per priority level.  The
mandatory ``exempt`` and ``catch-all`` objects are imagined while they are
not stored, so requests are classified from the first one on.

Each limited level's concurrency limit is its share of the server's
(``limits.max_requests_inflight + limits.max_mutating_requests_inflight``):
``ceil(server limit × nominalConcurrencyShares / sum of all shares)``.
Upstream also lends and borrows seats between levels every 10 seconds
(``lendablePercent``, ``borrowingLimitPercent``); here every level keeps its
nominal limit.

A level that disappears while requests wait or run in it keeps serving them
(quiescing) and is dropped once idle.  Every server writes the ``Dangling``
condition of the FlowSchemas it reads, as every kube-apiserver does, at most
six times a minute per schema.
"""
from __future__ import annotations

import datetime
import hashlib
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.flowcontrol import bootstrap
from kapiserver.flowcontrol.api import DANGLING, default_priority_level_spec, matching_order
from kapiserver.flowcontrol.queueset import QueueSet
from kapiserver.flowcontrol.retry_after import DroppedRequests
from kapiserver.flowcontrol.rules import flow_distinguisher, matches_flow_schema
from kapiserver.flowcontrol.work_estimate import max_seats
from kapiserver.machinery import errors, gorepr
from kapiserver.request.info import RequestInfo

log = Logger()

# who writes the Dangling conditions (upstream's ConfigConsumerAsFieldManager)
FIELD_MANAGER = "api-priority-and-fairness-config-consumer-v1"
UPDATES_PER_MINUTE = 6
RETRY_SECONDS = 30.0
# Requests alike whose flow schema is remembered at most (the memo starts over when full).
MATCHES_REMEMBERED = 4096


class PriorityLevelState:
    def __init__(self, level: dict, queues: QueueSet) -> None:
        self.level = level
        self.queues = queues
        self.quiescing = False
        self.concurrency_limit = 0
        self.max_seats = 0

    @property
    def name(self) -> str:
        return self.level["metadata"]["name"]

    @property
    def uid(self) -> str:
        return self.level["metadata"].get("uid") or ""

    @property
    def exempt(self) -> bool:
        return (self.level.get("spec") or {}).get("type") == "Exempt"


@dataclass
class Classification:
    flow_schema: dict
    level: PriorityLevelState
    distinguisher: str
    hash_value: int

    @property
    def flow_schema_name(self) -> str:
        return self.flow_schema["metadata"]["name"]

    @property
    def flow_schema_uid(self) -> str:
        return self.flow_schema["metadata"].get("uid") or ""


def flow_hash(fs_name: str, distinguisher: str) -> int:
    """hashFlowID: the first 8 bytes of sha256(name NUL distinguisher), little endian."""
    digest = hashlib.sha256(fs_name.encode() + b"\x00" + distinguisher.encode()).digest()
    return struct.unpack("<Q", digest[:8])[0]


def shares(level: dict) -> int:
    spec = level.get("spec") or {}
    limited = spec.get("limited")
    if isinstance(limited, dict):
        return int(limited.get("nominalConcurrencyShares") or 0)
    return int((spec.get("exempt") or {}).get("nominalConcurrencyShares") or 0)


def _queuing(level: dict) -> Optional[dict]:
    limited = (level.get("spec") or {}).get("limited") or {}
    response = limited.get("limitResponse") or {}
    return response.get("queuing") if response.get("type") == "Queue" else None


def _usable(level: dict) -> bool:
    """queueSetCompleterForPL's checks: a level this controller cannot run is ignored."""
    spec = level.get("spec") or {}
    kind = spec.get("type")
    if (kind == "Limited") != isinstance(spec.get("limited"), dict):
        return False
    if (kind == "Exempt") != isinstance(spec.get("exempt"), dict):
        return False
    if (kind == "Exempt") != (level["metadata"]["name"] == bootstrap.EXEMPT):
        return False
    if kind == "Limited":
        response = spec["limited"].get("limitResponse") or {}
        if (response.get("type") == "Reject") != (response.get("queuing") is None):
            return False
        queuing = response.get("queuing")
        if queuing is not None:
            queues, hand = queuing.get("queues") or 0, queuing.get("handSize") or 0
            if queues <= 0 or hand <= 0 or hand > queues:
                return False
    return True


class APFController:
    """The digested configuration and the queue sets; see the module docstring."""

    def __init__(self, server_concurrency_limit: int, reactor: IReactorTime,
                 wall_clock: Optional[Callable[[], float]] = None) -> None:
        self.server_concurrency_limit = server_concurrency_limit
        self.reactor = reactor
        self.wall_clock = wall_clock
        self.levels: dict[str, PriorityLevelState] = {}
        self.flow_schemas: list[dict] = []
        # the schema chosen for requests alike (_matching_schema), valid for _matched_in
        self._matched_in: list[dict] = self.flow_schemas
        self._matched: dict[tuple, dict] = {}
        self.dropped = DroppedRequests(reactor.seconds)
        self.flow_schema_store: Any = None
        self._informers: list = []
        self._listed = False  # both informers have listed their kind
        self._digest_call: Any = None
        self._recent_updates: list[tuple[float, str]] = []
        self._retry_call: Any = None
        self._stopped = False
        self.synced: defer.Deferred = defer.Deferred()
        self.digest([], [])

    # ------------------------------------------------------------ lifecycle

    def start(self, flow_schemas: Any, priority_levels: Any) -> None:
        """Watch the two kinds through their Stores; digest on every change."""
        from kapiserver.machinery.meta import without_metadata
        from kapiserver.registry.informer import Informer
        self.flow_schema_store = flow_schemas
        # the informers keep the objects without managedFields (never read here; 60 % of the
        # bootstrap FlowSchemas' size)
        self._fs = Informer(flow_schemas, lambda t, o: self.schedule_digest(), self.reactor,
                            keep=without_metadata)
        self._pl = Informer(priority_levels, lambda t, o: self.schedule_digest(), self.reactor,
                            keep=without_metadata)
        self._informers = [self._fs, self._pl]
        for informer in self._informers:
            informer.start()
        both = defer.gatherResults([self._fs.synced, self._pl.synced])
        both.addCallback(self._informers_synced)
        both.addCallback(self._mark_synced)
        both.addErrback(lambda f: log.failure("APF configuration informers", f))

    def _mark_synced(self, _: object) -> None:
        if not self.synced.called:
            self.synced.callback(None)

    def stop(self) -> None:
        self._stopped = True
        for informer in self._informers:
            informer.stop()
        for call in (self._digest_call, self._retry_call):
            if call is not None and call.active():
                call.cancel()

    def schedule_digest(self) -> None:
        """Digest once for a burst of changes (the next reactor turn)."""
        if self._digest_call is None or not self._digest_call.active():
            self._digest_call = self.reactor.callLater(0, self.digest_now)

    def _informers_synced(self, _: object = None) -> None:
        self._listed = True
        self.digest_now()

    def digest_now(self) -> None:
        # Not before both kinds are listed: with the flow schemas and not yet their
        # levels, every schema would be written Dangling, and then not again.
        if not self._listed or self._stopped:
            return
        levels = list(self._pl.objects.values())
        schemas = list(self._fs.objects.values())
        updates = self.digest(levels, schemas)
        if updates:
            defer.Deferred.fromCoroutine(self._write_conditions(updates)).addErrback(
                lambda f: log.failure("writing FlowSchema conditions", f))

    # ------------------------------------------------------------ digestion

    def digest(self, levels: list[dict], schemas: list[dict]) -> list[tuple[str, dict]]:
        """Replace the configuration; returns the (FlowSchema name, Dangling condition) to write."""
        new_levels: dict[str, PriorityLevelState] = {}
        for level in levels:
            level = dict(level, spec=dict(level.get("spec") or {}))
            default_priority_level_spec(level["spec"])
            if not _usable(level):
                log.warn("ignoring PriorityLevelConfiguration {name}: its spec is broken",
                         name=level["metadata"].get("name"))
                continue
            state = self.levels.get(level["metadata"]["name"])
            if state is None or state.exempt != ((level.get("spec") or {}).get("type") == "Exempt"):
                state = PriorityLevelState(level, self._queue_set(level["metadata"]["name"]))
            state.level = level
            state.quiescing = False
            new_levels[state.name] = state
        updates: list[tuple[str, dict]] = []
        ordered: list[dict] = []
        for fs in schemas:
            level_name = ((fs.get("spec") or {}).get("priorityLevelConfiguration") or {}).get("name") or ""
            found = level_name in new_levels
            condition = self._dangling_condition(fs, not found, level_name)
            if condition is not None:
                updates.append((fs["metadata"]["name"], condition))
            if found:
                ordered.append(fs)
        ordered.sort(key=matching_order)
        names = {fs["metadata"]["name"] for fs in ordered}
        if bootstrap.EXEMPT not in names:
            ordered.insert(0, bootstrap.mandatory_flow_schema(bootstrap.EXEMPT))
        if bootstrap.CATCH_ALL not in names:
            ordered.append(bootstrap.mandatory_flow_schema(bootstrap.CATCH_ALL))
        # levels no longer configured: kept while busy (quiescing), or when mandatory (imagined)
        for name, state in self.levels.items():
            if name in new_levels:
                continue
            if name in (bootstrap.EXEMPT, bootstrap.CATCH_ALL):
                state.level = bootstrap.mandatory_priority_level(name)
                default_priority_level_spec(state.level["spec"])
                new_levels[name] = state
            elif not state.queues.is_idle():
                state.quiescing = True
                new_levels[name] = state
        for name in (bootstrap.EXEMPT, bootstrap.CATCH_ALL):
            if name not in new_levels:
                level = bootstrap.mandatory_priority_level(name)
                default_priority_level_spec(level["spec"])
                new_levels[name] = PriorityLevelState(level, self._queue_set(name))
        self._configure_limits(new_levels)
        self.levels = new_levels
        self.flow_schemas = ordered
        return updates

    def _queue_set(self, name: str) -> QueueSet:
        kwargs = {"wall_clock": self.wall_clock} if self.wall_clock is not None else {}
        queues = QueueSet(name, self.reactor.seconds, self.reactor.callLater, **kwargs)
        queues.on_idle = lambda: self._maybe_reap(name)
        return queues

    def _maybe_reap(self, name: str) -> None:
        state = self.levels.get(name)
        if state is not None and state.quiescing:
            self.schedule_digest()

    def _configure_limits(self, levels: dict[str, PriorityLevelState]) -> None:
        total_shares = sum(shares(s.level) for s in levels.values())
        for state in levels.values():
            if state.exempt:
                state.concurrency_limit = 0
                state.max_seats = 0
                state.queues.configure(-1, 0, 0, 0)
                continue
            limit = int(math.ceil(self.server_concurrency_limit * shares(state.level) / total_shares)) \
                if total_shares else 0
            state.concurrency_limit = limit
            queuing = _queuing(state.level)
            if queuing is None:
                state.max_seats = 0
                state.queues.configure(0, 0, 0, limit)
            else:
                hand = int(queuing["handSize"])
                state.max_seats = max_seats(limit, hand)
                state.queues.configure(int(queuing["queues"]), hand, int(queuing["queueLengthLimit"]), limit)

    def _dangling_condition(self, fs: dict, dangling: bool, level_name: str) -> Optional[dict]:
        """presyncFlowSchemaStatus: the Dangling condition to write, or None when it is right."""
        wanted_status = "True" if dangling else "False"
        named = f"This FlowSchema references the PriorityLevelConfiguration object named {gorepr.quote(level_name)}"
        if dangling:
            reason, message = "NotFound", f"{named} but there is no such object"
        else:
            reason, message = "Found", f"{named} and it exists"
        for condition in (fs.get("status") or {}).get("conditions") or ():
            if condition.get("type") == DANGLING:
                if (condition.get("status"), condition.get("reason"), condition.get("message")) == \
                        (wanted_status, reason, message):
                    return None
                break
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"type": DANGLING, "status": wanted_status, "lastTransitionTime": now, "reason": reason,
                "message": message}

    async def _write_conditions(self, updates: list[tuple[str, dict]]) -> None:
        from kapiserver.registry.context import Context
        store = self.flow_schema_store
        if store is None:
            return
        now = self.reactor.seconds()
        self._recent_updates = [(t, n) for t, n in self._recent_updates if now - t < 60]
        delayed = False
        for name, condition in updates:
            if sum(1 for _, n in self._recent_updates if n == name) >= UPDATES_PER_MINUTE:
                delayed = True
                continue
            self._recent_updates.append((now, name))

            def set_condition(current: Optional[dict], condition: dict = condition) -> dict:
                assert current is not None
                status = current.setdefault("status", {})
                conditions = list(status.get("conditions") or ())
                at = next((i for i, c in enumerate(conditions) if c.get("type") == DANGLING), len(conditions))
                conditions[at:at + 1] = [condition]
                status["conditions"] = conditions
                return current
            try:
                await store.guaranteed_update("", name, set_condition, "status",
                                              Context(field_manager=FIELD_MANAGER))
            except errors.StatusError as e:
                if e.reason != "NotFound":  # deleted meanwhile: its event is coming
                    log.warn("setting the Dangling condition of FlowSchema {name}: {err}", name=name, err=e)
                    delayed = True
            except Exception as e:  # storage unavailable (or stopping): tried again later
                if self._stopped:
                    return
                log.warn("setting the Dangling condition of FlowSchema {name}: {err}", name=name, err=e)
                delayed = True
        if delayed and not self._stopped and (self._retry_call is None or not self._retry_call.active()):
            self._retry_call = self.reactor.callLater(RETRY_SECONDS, self.digest_now)

    # ------------------------------------------------------------ classification

    def _matching_schema(self, user_name: str, groups: tuple[str, ...], info: RequestInfo) -> dict:
        """The first flow schema the request matches, remembered for requests alike.

        Walking every schema's rules took a tenth of a GET; what a rule looks at (user,
        groups, verb, group, resource/subresource, namespace; the path of a non-resource
        request) repeats from request to request.  Remembered per digested list of schemas.
        """
        schemas = self.flow_schemas
        if self._matched_in is not schemas or len(self._matched) >= MATCHES_REMEMBERED:
            self._matched_in, self._matched = schemas, {}
        alike = (user_name, groups, info.verb, info.group, info.resource, info.subresource, info.namespace) \
            if info.is_resource_request else (user_name, groups, info.verb, None, info.path)
        chosen = self._matched.get(alike)
        if chosen is None:
            chosen = next((fs for fs in schemas if matches_flow_schema(user_name, groups, info, fs)), None)
            if chosen is None:  # nothing matched (no catch-all group on the user): catch-all anyway, as upstream
                chosen = next(fs for fs in schemas if fs["metadata"]["name"] == bootstrap.CATCH_ALL)
            self._matched[alike] = chosen
        return chosen

    def classify(self, user_name: str, groups: tuple[str, ...], info: RequestInfo) -> Classification:
        """The first flow schema (in matching order) the request matches, its level and its flow."""
        chosen = self._matching_schema(user_name, groups, info)
        spec = chosen.get("spec") or {}
        state = self.levels[spec["priorityLevelConfiguration"]["name"]]
        distinguisher = ""
        hash_value = 0
        queuing = None if state.exempt else _queuing(state.level)
        if queuing is not None and int(queuing.get("queues") or 0) > 1:
            distinguisher = flow_distinguisher(spec.get("distinguisherMethod"), user_name, info)
            hash_value = flow_hash(chosen["metadata"]["name"], distinguisher)
        return Classification(chosen, state, distinguisher, hash_value)
