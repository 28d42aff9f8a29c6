"""Every well-typed value a client can send reaches the strategies without
breaking them: each field of each sample is removed, set to its zero value and
to an edge value, and create, update and status update must answer with
causes (or none), never an exception (which would be a 500).

Ill-typed values never get this far: the decoder refuses them with a 400."""
from __future__ import annotations

import copy
from typing import Any, Iterator

from twisted.trial import unittest

from kapiserver.machinery.errors import StatusError
from tests.apis import harness, samples

_REMOVE = object()


def _paths(node: Any, path: tuple = ()) -> Iterator[tuple]:
    if path:
        yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, path + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, path + (i,))


def _at(node: Any, path: tuple) -> Any:
    for key in path:
        node = node[key]
    return node


def _variants(value: Any) -> list:
    """Removal (null decodes to an unset field), the zero value, and one edge of the same type."""
    if isinstance(value, bool):
        return [_REMOVE, not value]
    if isinstance(value, int):
        return [_REMOVE, 0, -1, (1 << 63) - 1]
    if isinstance(value, float):
        return [_REMOVE, 0.0]
    if isinstance(value, str):
        return [_REMOVE, "", "x" * 300, "1e1000"]
    if isinstance(value, list):
        return [_REMOVE, [], [type(value[0])()] if value else [], value + value]
    if isinstance(value, dict):
        return [_REMOVE, {}]
    return [_REMOVE]


def _put(node: Any, path: tuple, value: Any) -> None:
    parent = _at(node, path[:-1])
    if value is _REMOVE and isinstance(parent, dict):
        del parent[path[-1]]
    elif value is _REMOVE:  # a null list item decodes to the element's zero value
        parent[path[-1]] = type(parent[path[-1]])()
    else:
        parent[path[-1]] = copy.deepcopy(value)


class StrategiesTakeAnyWellTypedValue(unittest.TestCase):
    def _check(self, group: str, kind: str) -> None:
        rt = harness.resource_type(group, kind)
        original = samples.sample(group, kind)
        before = harness.stored(rt, original)
        for path in list(_paths(original)):
            for value in _variants(_at(original, path)):
                where = f"{kind} {'.'.join(map(str, path))} = {'<removed>' if value is _REMOVE else value!r}"
                obj = copy.deepcopy(original)
                _put(obj, path, value)
                after = copy.deepcopy(before)
                steps = [("create", lambda: harness.create(rt, obj))]
                try:
                    _put(after, path, value)
                except (KeyError, IndexError):  # a field the server resets on create (a Node's status)
                    pass
                else:
                    steps += [("update", lambda: harness.update(rt, copy.deepcopy(after), before)),
                              ("status", lambda: harness.update(rt, copy.deepcopy(after), before, True))]
                for step, run in steps:
                    try:
                        run()
                    except StatusError as e:
                        # only the decoder's own refusals may surface here (base64 of binaryData)
                        self.assertEqual(e.code, 400, f"{step} {where}: {e}")
                    except Exception as e:  # noqa: BLE001 - the point of the test
                        self.fail(f"{step} {where}: {type(e).__name__}: {e}")


def _make_test(group: str, kind: str) -> Any:
    return lambda self: self._check(group, kind)


for (_group, _kind) in samples.SAMPLES:
    setattr(StrategiesTakeAnyWellTypedValue, f"test_{_kind}", _make_test(_group, _kind))
