"""The API Priority and Fairness bootstrap objects, kept as upstream's config producer keeps them.

Every server runs it (upstream's ``priority-and-fairness-config-producer``
post-start hook runs in every kube-apiserver), at start until it succeeds
once (``/readyz`` fails until then), then every minute:

* the suggested PriorityLevelConfigurations and FlowSchemas are created when
  missing; an existing one gets the bootstrap spec back while its
  ``apf.kubernetes.io/autoupdate-spec`` annotation is ``true`` (without the
  annotation: while its generation is 1), and the annotation is set to what
  was decided;
* the mandatory ones (``exempt``, ``catch-all``) likewise, but always kept
  at the bootstrap spec;
* objects with ``autoupdate-spec: true`` that are no longer among the
  bootstrap objects are deleted.

Every write is a compare-and-swap: servers sharing a storage that race lose
a round and look again a minute later.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.apis.flowcontrol.semantic import semantically_equal
from kapiserver.flowcontrol import bootstrap
from kapiserver.flowcontrol.api import default_flow_schema_spec, default_priority_level_spec
from kapiserver.machinery import errors, strconv
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.registry.context import Context
from kapiserver.registry.options import DeleteOptions, ListOptions
from kapiserver.registry.store import Store

log = Logger()

READY_CHECK = "poststarthook/priority-and-fairness-config-producer"
FIELD_MANAGER = "api-priority-and-fairness-config-producer-v1"
RETRY_SECONDS = 1.0
PERIOD_SECONDS = 60.0

def _parse_bool(value: Optional[str]) -> Optional[bool]:
    """Go's strconv.ParseBool; None when it is not a boolean."""
    if value in strconv.TRUE_VALUES:
        return True
    if value in strconv.FALSE_VALUES:
        return False
    return None


def _annotation(obj: dict) -> Optional[str]:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(bootstrap.AUTO_UPDATE_ANNOTATION)


def revise(current: dict, wanted: dict, mandatory: bool, default_spec: Callable[[dict], None]) -> Optional[dict]:
    """The object to write so ``current`` follows the bootstrap object ``wanted``, or None (upstream's
    ReviseIfNeeded)."""
    auto = mandatory
    if not auto:
        parsed = _parse_bool(_annotation(current))
        auto = parsed if parsed is not None else (current.get("metadata") or {}).get("generation") == 1
    existing = _parse_bool(_annotation(current))
    update_annotation = not (_annotation(current) is not None and existing == auto)
    spec = copy.deepcopy(wanted["spec"])
    default_spec(spec)
    spec_changed = auto and not semantically_equal(spec, current.get("spec"))
    if not (update_annotation or spec_changed):
        return None
    revised = copy.deepcopy(current)
    if spec_changed:
        revised["spec"] = spec
    if update_annotation:
        revised["metadata"].setdefault("annotations", {})[bootstrap.AUTO_UPDATE_ANNOTATION] = \
            "true" if auto else "false"
    return revised


class APFBootstrapEnsurer:
    def __init__(self, flow_schemas: Store, priority_levels: Store, reactor: IReactorTime) -> None:
        self.flow_schemas = flow_schemas
        self.priority_levels = priority_levels
        self.reactor = reactor
        self.ensured = False
        self._call: Any = None
        self._running: Optional[defer.Deferred] = None
        self._stopped = False

    def check(self) -> None:
        """The readiness check: the bootstrap objects were ensured once."""
        if not self.ensured:
            raise RuntimeError("the API Priority and Fairness bootstrap configuration is not ensured yet")

    async def start(self) -> None:
        """Run the first round now (the caller awaits it, as the other per-server first runs); its
        failure is logged and retried every second."""
        self._stopped = False
        self._run()
        if self._running is not None:
            await self._running

    def stop(self) -> None:
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()

    def _run(self) -> None:
        if self._stopped:
            return
        self._running = defer.Deferred.fromCoroutine(self.ensure())
        self._running.addCallbacks(self._succeeded, self._failed)

    def _succeeded(self, _: Any) -> None:
        self.ensured = True
        if not self._stopped:
            self._call = self.reactor.callLater(PERIOD_SECONDS, self._run)

    def _failed(self, failure: Any) -> None:
        if self._stopped:
            return
        log.warn("APF bootstrap ensurer ran into an error, will retry: {err}", err=failure.getErrorMessage())
        if not self._stopped:
            self._call = self.reactor.callLater(PERIOD_SECONDS if self.ensured else RETRY_SECONDS, self._run)

    async def ensure(self) -> None:
        """One round: suggested, then mandatory, then remove what is no longer bootstrap."""
        levels, schemas = self.priority_levels, self.flow_schemas
        for obj in bootstrap.SUGGESTED_PRIORITY_LEVELS:
            await self._ensure(levels, obj, False, default_priority_level_spec)
        for obj in bootstrap.SUGGESTED_FLOW_SCHEMAS:
            await self._ensure(schemas, obj, False, default_flow_schema_spec)
        for obj in bootstrap.MANDATORY_PRIORITY_LEVELS:
            await self._ensure(levels, obj, True, default_priority_level_spec)
        for obj in bootstrap.MANDATORY_FLOW_SCHEMAS:
            await self._ensure(schemas, obj, True, default_flow_schema_spec)
        await self._remove_unwanted(schemas, bootstrap.MANDATORY_FLOW_SCHEMAS + bootstrap.SUGGESTED_FLOW_SCHEMAS)
        await self._remove_unwanted(levels, bootstrap.MANDATORY_PRIORITY_LEVELS
                                    + bootstrap.SUGGESTED_PRIORITY_LEVELS)

    async def _ensure(self, store: Store, wanted: dict, mandatory: bool,
                      default_spec: Callable[[dict], None]) -> None:
        name = wanted["metadata"]["name"]
        ctx = Context(field_manager=FIELD_MANAGER)
        while True:
            try:
                current = await store.get("", name)
                break
            except errors.StatusError as e:
                if e.reason != "NotFound":
                    raise
            try:
                await store.create("", copy.deepcopy(wanted), ctx)
                log.info("created the {kind} {name} (API Priority and Fairness bootstrap)", kind=wanted["kind"],
                         name=name)
                return
            except errors.StatusError as e:
                if e.reason != "AlreadyExists":
                    raise
        revised = revise(current, wanted, mandatory, default_spec)
        if revised is None:
            return
        try:
            await store.update("", name, revised, ctx=ctx)
            log.info("updated the {kind} {name} (API Priority and Fairness bootstrap)", kind=wanted["kind"],
                     name=name)
        except errors.StatusError as e:
            if e.reason != "Conflict":  # someone updated it meanwhile: looked at again next round
                raise

    async def _remove_unwanted(self, store: Store, wanted: list[dict]) -> None:
        names = {o["metadata"]["name"] for o in wanted}
        listed = await store.list("", ListOptions(parse_label_selector(""), parse_field_selector("")))
        for obj in listed["items"]:
            name = obj["metadata"]["name"]
            if name in names or _parse_bool(_annotation(obj)) is not True:
                continue
            try:
                await store.delete("", name, DeleteOptions())
                log.info("deleted the {kind} {name}: no longer an API Priority and Fairness bootstrap object",
                         kind=obj.get("kind"), name=name)
            except errors.StatusError as e:
                if e.reason != "NotFound":
                    raise

