"""JSON patch (RFC 6902), the ``application/json-patch+json`` PATCH type.

kube-apiserver applies JSON patches with evanphx/json-patch (v4); its quirks
are part of the API and are kept here: the whole-document path ``""`` is
addressable by ``replace`` alone (and only with an object or array: another
value changes nothing), negative array indices count from the end, a missing
``value`` means ``null``, and a missing key of an object reads as ``null``
(v4's ``partialDoc.get``), so ``test`` of it against ``null`` passes,
``replace`` of it adds it, and ``copy`` of it copies a ``null``.  A malformed
patch document is a 400 BadRequest; a patch that cannot be applied
is a 422 whose cause carries the library's message.
"""
from __future__ import annotations

import re
from typing import Any, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.codec import copy_json
from kapiserver.machinery.jsonvalues import go_json_type

MAX_OPERATIONS = 10000
_INDEX_RE = re.compile(r"[+-]?[0-9]+")


class _ApplyError(Exception):
    pass


def patch_not_applied(message: str) -> errors.StatusError:
    """Upstream's NewGenericServerResponse(422, ...) for a patch that does not apply."""
    return errors.StatusError(422, "Invalid", "the server rejected our request due to an error in our request",
                              {"causes": [{"reason": "UnexpectedServerResponse", "message": message}]})


def _decode_key(token: str) -> str:
    out, i = [], 0
    while i < len(token):
        if token.startswith("~1", i):
            out.append("/")
            i += 2
        elif token.startswith("~0", i):
            out.append("~")
            i += 2
        else:
            out.append(token[i])
            i += 1
    return "".join(out)


def _index(key: str, length: int, allow_end: bool = False) -> int:
    """A Go Atoi-style array index, negative counting from the end."""
    if not _INDEX_RE.fullmatch(key):
        raise _ApplyError(f'strconv.Atoi: parsing "{key}": invalid syntax')
    idx = int(key)
    limit = length + 1 if allow_end else length
    if idx < 0:
        if idx < -limit:
            raise _ApplyError(f"Unable to access invalid index: {idx}: invalid index referenced")
        idx += limit
    if idx >= limit:
        raise _ApplyError(f"Unable to access invalid index: {idx}: invalid index referenced")
    return idx


def _find(doc: Any, path: str) -> tuple[Optional[Any], str]:
    """The container holding the last token of ``path`` and that token (None if unreachable)."""
    parts = path.split("/")
    if len(parts) < 2:
        return None, ""
    node = doc
    for part in parts[1:-1]:
        key = _decode_key(part)
        try:
            node = _get(node, key)
        except _ApplyError:
            return None, ""
        if not isinstance(node, (dict, list)):
            return None, ""
    return node, _decode_key(parts[-1])


def _get(container: Any, key: str) -> Any:
    """The member or element at ``key``; a missing member is None (``null``), as v4 reads it."""
    if isinstance(container, dict):
        return container.get(key)
    return container[_index(key, len(container))]


def _add(container: Any, key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
    elif key == "-":
        container.append(value)
    else:
        container.insert(_index(key, len(container), allow_end=True), value)


def _remove(container: Any, key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise _ApplyError(f"Unable to remove nonexistent key: {key}: missing value")
        del container[key]
    else:
        del container[_index(key, len(container))]


def _set(container: Any, key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
    else:
        container[_index(key, len(container))] = value


def _string_member(op: dict, name: str, kind: str) -> str:
    value = op.get(name)
    if not isinstance(value, str):
        raise _ApplyError(f"{kind} operation failed to decode {name}: missing value")
    return value


def _apply_one(doc: Any, op: dict) -> Any:
    """The document after ``op``: changed in place, or a new one (a replace of the whole document)."""
    kind = op.get("op") if isinstance(op.get("op"), str) else "unknown"
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        raise _ApplyError(f"Unexpected kind: {kind}: unknown object type")
    path = _string_member(op, "path", kind)
    value = copy_json(op.get("value"))  # the ops are reused when a conflict makes the Store retry
    if kind == "replace" and path == "":
        # v4 replaces the whole document with an object or an array; with anything else its
        # error wraps a nil error, which is no error: the document stays as it is.  Without a
        # value it dereferences nil (kube-apiserver drops the connection): the error it means
        if "value" not in op:
            raise _ApplyError("replace operation value must be object or array")
        return value if isinstance(value, (dict, list)) else doc
    if kind == "add":
        con, key = _find(doc, path)
        if con is None:
            raise _ApplyError(f'add operation does not apply: doc is missing path: "{path}": missing value')
        try:
            _add(con, key, value)
        except _ApplyError as e:
            raise _ApplyError(f"error in add for path: '{path}': {e}") from None
    elif kind == "remove":
        con, key = _find(doc, path)
        if con is None:
            raise _ApplyError(f'remove operation does not apply: doc is missing path: "{path}": missing value')
        try:
            _remove(con, key)
        except _ApplyError as e:
            raise _ApplyError(f"error in remove for path: '{path}': {e}") from None
    elif kind == "replace":
        con, key = _find(doc, path)
        if con is None:
            raise _ApplyError(f"replace operation does not apply: doc is missing path: {path}: missing value")
        try:
            _get(con, key)
        except _ApplyError:  # a bad index; an object's missing key is added
            raise _ApplyError(f"replace operation does not apply: doc is missing key: {path}: missing value") \
                from None
        try:
            _set(con, key, value)
        except _ApplyError as e:
            raise _ApplyError(f"error in remove for path: '{path}': {e}") from None
    elif kind == "test":
        con, key = _find(doc, path)
        if con is None:
            raise _ApplyError(f"test operation does not apply: is missing path: {path}: missing value")
        try:
            current = _get(con, key)
        except _ApplyError as e:
            raise _ApplyError(f"error in test for path: '{path}': {e}") from None
        if not _json_equal(current, value):
            raise _ApplyError(f"testing value {path} failed: test failed")
    else:  # move, copy
        source = _string_member(op, "from", kind)
        con, key = _find(doc, source)
        if con is None:
            raise _ApplyError(f"{kind} operation does not apply: doc is missing from path: {source}: missing value")
        try:
            moved = _get(con, key)
            if kind == "move":
                _remove(con, key)
            else:
                moved = copy_json(moved)
        except _ApplyError as e:
            where = f"path: '{key}'" if kind == "move" else f"from: '{source}'"
            raise _ApplyError(f"error in {kind} for {where}: {e}") from None
        con, key = _find(doc, path)
        if con is None:
            raise _ApplyError(f"{kind} operation does not apply: doc is missing destination path: {path}: "
                              "missing value")
        try:
            _add(con, key, moved)
        except _ApplyError as e:
            prefix = f"error in move for path: '{path}'" if kind == "move" else \
                "error while adding value during copy"
            raise _ApplyError(f"{prefix}: {e}") from None
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    return a == b


def strict_json_patch_problem(ops: Any) -> Optional[str]:
    """What upstream's strict decoding of a JSON patch into ``[]handlers.jsonPatchOp`` (the patch
    handler's, under fieldValidation Warn and Strict, before :func:`validate_json_patch`'s) refuses:
    another shape, or ``op``/``path``/``from`` that are not strings (null leaves them empty)."""
    if ops is None:
        return None
    if not isinstance(ops, list):
        return f"json: cannot unmarshal {go_json_type(ops)} into Go value of type []handlers.jsonPatchOp"
    for op in ops:
        if op is None:
            continue
        if not isinstance(op, dict):
            return f"json: cannot unmarshal {go_json_type(op)} into Go value of type handlers.jsonPatchOp"
        for name in ("op", "path", "from"):
            value = op.get(name)
            if value is not None and not isinstance(value, str):
                return (f"json: cannot unmarshal {go_json_type(value)} into Go struct field jsonPatchOp.{name} of "
                        "type string")
    return None


def validate_json_patch(ops: Any) -> None:
    """Reject what upstream's decoder rejects, before anything is applied (400/413)."""
    if not isinstance(ops, list):
        raise errors.bad_request(f"json: cannot unmarshal {go_json_type(ops)} into Go value of type jsonpatch.Patch")
    for op in ops:
        if not isinstance(op, dict):
            raise errors.bad_request(f"json: cannot unmarshal {go_json_type(op)} into Go value of type "
                                     "jsonpatch.Operation")
    if len(ops) > MAX_OPERATIONS:
        raise errors.too_large(f"The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, "
                               f"got {len(ops)}")


def apply_json_patch(doc: Any, ops: list) -> Any:
    """The document after applying every operation in order (a new value; ``doc`` is untouched)."""
    validate_json_patch(ops)
    result = copy_json(doc)
    for op in ops:
        try:
            result = _apply_one(result, op)
        except _ApplyError as e:
            raise patch_not_applied(str(e)) from None
    return result
