"""Drive a built-in kind's strategy the way the Store does, without a server:
prepare, default, metadata checks, kind checks, the asynchronous ones and the
begin_create/begin_update hooks (Services allocate there, from ranges kept in
a dict: nothing here waits on anything)."""
from __future__ import annotations

import copy
import re
from typing import Any, Callable

from twisted.internet import defer

from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.apis.core.allocation_bitmap import AllocationBitmap
from kapiserver.machinery import errors, validation
from kapiserver.registry.resource_type import ResourceType
from kapiserver.storage import interface as kv_store

# the version each test talks to (the stored one where a kind has two)
_PREFERRED = {("events.k8s.io", "Event"): None, ("autoscaling", "HorizontalPodAutoscaler"): "v2"}


class _RangeStorage:
    """Just enough of a Storage for the Service allocator's two RangeAllocation records."""

    def __init__(self) -> None:
        self.kvs: dict[str, kv_store.KeyValue] = {}
        self.revision = 0

    def get(self, key: str, revision: int = 0) -> defer.Deferred:
        return defer.succeed(self.kvs.get(key))

    def create(self, key: str, value: bytes, lease: int = 0) -> defer.Deferred:
        if key in self.kvs:
            return defer.fail(kv_store.KeyExistsError(key))
        self.revision += 1
        self.kvs[key] = kv_store.KeyValue(key, value, self.revision, self.revision)
        return defer.succeed(self.kvs[key])

    def update(self, key: str, value: bytes, expected_mod_revision: int = 0, lease: Any = None) -> defer.Deferred:
        current = self.kvs.get(key)
        if current is None:
            return defer.fail(kv_store.KeyNotFoundError(key))
        if expected_mod_revision and current.mod_revision != expected_mod_revision:
            return defer.fail(kv_store.ConflictError(key, current))
        self.revision += 1
        self.kvs[key] = kv_store.KeyValue(key, value, current.create_revision, self.revision)
        return defer.succeed(self.kvs[key])


class _Store:
    def __init__(self) -> None:
        self.storage = _RangeStorage()


def _bind(rt: ResourceType) -> ResourceType:
    """Bind the kinds whose strategies need a Store (Services: their allocation ranges)."""
    if rt.kind == "Service" and rt.group == "":
        store = _Store()
        rt.strategy.bind(rt, store, None)
        allocator = rt.strategy.allocator
        for stored in (allocator.ips, allocator.ports):  # what the repair creates at start
            _drive(stored.write_snapshot(AllocationBitmap(stored.size, stored.reserved), None))
    return rt


def resource_type(group: str, kind: str) -> ResourceType:
    for rt in builtin_resource_types():
        if rt.group == group and rt.kind == kind:
            wanted = _PREFERRED.get((group, kind), rt.version)
            if wanted is None or rt.version == wanted:
                return _bind(rt)
    raise KeyError((group, kind))


def _drive(coro: Any) -> Any:
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("a validation hook waited on something")


def _stamp(rt: ResourceType, obj: dict) -> dict:
    obj = copy.deepcopy(obj)
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
    md = obj.setdefault("metadata", {})
    if rt.namespaced:
        md.setdefault("namespace", "default")
    else:
        md.pop("namespace", None)
    md.setdefault("uid", "6b3d5c5e-0000-4000-8000-000000000001")
    md.setdefault("creationTimestamp", "2024-01-01T00:00:00Z")
    if rt.strategy.tracks_generation:
        md["generation"] = 1
    return obj


def create(rt: ResourceType, obj: dict) -> tuple[dict, list[str]]:
    """(the object as it would be stored, ``field: message`` of each cause)."""
    obj = _stamp(rt, obj)
    st = rt.strategy
    st.prepare_for_create(rt, obj)
    st.default(rt, obj)
    causes = validation.validate_object_meta(obj.get("metadata") or {}, rt.namespaced, st.name_validation)
    causes += st.validate(rt, obj)
    causes += _drive(st.validate_async(rt, obj, None))
    if not causes:
        causes = _begin(st.begin_create(rt, obj, False))
    if not causes:  # give back what it was allocated, so that many creates never fill a range
        _drive(st.after_delete(rt, copy.deepcopy(obj)))
    return obj, [f"{c.field}: {c.message}" for c in causes]


def update(rt: ResourceType, new: dict, old: dict, status: bool = False) -> tuple[dict, list[str]]:
    new = _stamp(rt, new)
    new["metadata"]["resourceVersion"] = "1"
    st = rt.strategy
    if status:
        st.prepare_for_status_update(rt, new, old)
    else:
        st.prepare_for_update(rt, new, old)
    st.default(rt, new)
    md = new["metadata"]
    causes = validation.validate_object_meta(md, rt.namespaced, st.name_validation)
    causes += validation.validate_object_meta_update(md, old["metadata"])
    causes += (st.validate_status_update if status else st.validate_update)(rt, new, old)
    causes += _drive(st.validate_async(rt, new, old))
    if not causes:
        causes = _begin(st.begin_update(rt, new, old, False))
    return new, [f"{c.field}: {c.message}" for c in causes]


def _begin(coro: Any) -> list:
    """Run a begin_create/begin_update hook as the Store does (the write then succeeds)."""
    try:
        finish = _drive(coro)
    except errors.StatusError as e:
        if e.code != 422:
            raise
        causes = (e.details or {}).get("causes") or ()
        return [errors.Cause(c["reason"], c["message"], c.get("field", "")) for c in causes]
    if finish is not None:
        _drive(finish(True))
    return []


def stored(rt: ResourceType, obj: dict) -> dict:
    """A valid object as the Store would have it (fails the test when it is not valid)."""
    out, causes = create(rt, obj)
    if causes:
        raise AssertionError(f"sample {rt.kind} is not valid: {causes}")
    out["metadata"]["resourceVersion"] = "1"
    return out


def causes_of(group: str, kind: str, obj: dict) -> list[str]:
    """The causes a create of ``obj`` fails with."""
    return create(resource_type(group, kind), obj)[1]


def update_causes_of(group: str, kind: str, old: dict, change: Callable[[dict], Any],
                     status: bool = False) -> list[str]:
    """The causes of an update that sends back the stored ``old`` with ``change`` applied,
    as clients do (read, modify, write)."""
    rt = resource_type(group, kind)
    before = stored(rt, old)
    after = copy.deepcopy(before)
    change(after)
    return update(rt, after, before, status)[1]


REMOVE = object()
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def changed(obj: dict, changes: dict[str, Any]) -> dict:
    """A copy of ``obj`` with each ``"spec.containers[0].name": value`` applied
    (``REMOVE`` deletes the field; missing objects on the way are created)."""
    obj = copy.deepcopy(obj)
    for where, value in changes.items():
        steps: list[Any] = [name if name else int(i) for name, i in _STEP.findall(where)]
        node: Any = obj
        for step, following in zip(steps, steps[1:]):
            if isinstance(node, dict) and step not in node:
                node[step] = [] if isinstance(following, int) else {}
            node = node[step]
        last = steps[-1]
        if value is REMOVE:
            del node[last]
        elif isinstance(node, list) and last == len(node):
            node.append(copy.deepcopy(value))
        else:
            node[last] = copy.deepcopy(value)
    return obj


def invalid_causes(group: str, kind: str, changes: dict[str, Any]) -> list[str]:
    """The causes a create of the kind's sample with ``changes`` fails with."""
    from tests.apis import samples
    return causes_of(group, kind, changed(samples.sample(group, kind), changes))


def invalid_update_causes(group: str, kind: str, changes: dict[str, Any], status: bool = False) -> list[str]:
    """The causes an update of the stored sample with ``changes`` fails with."""
    from tests.apis import samples
    rt = resource_type(group, kind)
    before = stored(rt, samples.sample(group, kind))
    return update(rt, changed(before, changes), before, status)[1]


class KindCases:
    """Mixin for table-driven tests: ``cases`` holds (changes, expected causes) for
    ``group``/``kind``; ``update_cases`` the same for updates of the stored sample."""

    group = ""
    kind = ""
    cases: list[tuple[dict, list[str]]] = []
    update_cases: list[tuple[dict, list[str]]] = []
    status_cases: list[tuple[dict, list[str]]] = []

    def test_sample_is_valid(self) -> None:
        self.assertEqual(invalid_causes(self.group, self.kind, {}), [])  # type: ignore[attr-defined]

    def _table(self, cases: list[tuple[dict, list[str]]], run: Callable[[dict], list[str]], what: str) -> None:
        wrong = []
        for changes, expected in cases:
            got = run(changes)
            if got != expected:
                shown = repr(changes)
                shown = shown if len(shown) < 300 else shown[:300] + "..."
                wrong.append(f"{self.kind} {what} with {shown}:\n  expected {expected}\n  got      {got}")
        if wrong:
            self.fail("\n".join(wrong))  # type: ignore[attr-defined]

    def test_create(self) -> None:
        self._table(self.cases, lambda c: invalid_causes(self.group, self.kind, c), "create")

    def test_update(self) -> None:
        self._table(self.update_cases, lambda c: invalid_update_causes(self.group, self.kind, c), "update")

    def test_status_update(self) -> None:
        self._table(self.status_cases, lambda c: invalid_update_causes(self.group, self.kind, c, True),
                    "status update")
