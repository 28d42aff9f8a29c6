"""Wire encodings of API objects: JSON (orjson) and YAML.

Objects inside the server are plain dicts; these functions are the only
place that turns them into bytes and back.
"""
from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

import orjson

from kapiserver.machinery import errors

JSON = "application/json"
YAML = "application/yaml"

if TYPE_CHECKING:
    import yaml

# Go's encoding/json escapes these inside strings (HTML safety, JavaScript line
# terminators); they can only occur inside strings, so replacing bytes is safe.
_GO_ESCAPES = {b"<": b"\\u003c", b">": b"\\u003e", b"&": b"\\u0026",
               "\u2028".encode(): b"\\u2028", "\u2029".encode(): b"\\u2029"}
_GO_ESCAPE_RE = re.compile(b"[<>&]|\xe2\x80[\xa8\xa9]")


def _needs_go_escapes(body: bytes) -> bool:
    # four substring searches (memchr-fast) instead of the regex: on most bodies,
    # which hold none of these, the regex's scan cost several times orjson's encoding
    return b"<" in body or b">" in body or b"&" in body or b"\xe2\x80" in body


def encode_json(obj: Any, pretty: bool = False) -> bytes:
    """JSON with the bytes kube-apiserver writes: Go's escaping; a compact body ends
    with a newline (json.Encoder), a pretty one does not (json.MarshalIndent)."""
    if pretty:
        body = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
    else:
        body = orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE)
    if _needs_go_escapes(body):
        body = _GO_ESCAPE_RE.sub(lambda m: _GO_ESCAPES[m.group(0)], body)
    return body


def exact_size(body: bytes) -> bytes:
    """A copy of ``body`` in an allocation of its own length, for bytes kept beyond the request.

    orjson (3.12 on) returns its output in the buffer it wrote it into, reserved ahead by
    the size of each container and doubled as it grew, never shrunk (``sys.getsizeof``
    shows only the length): the 1 KB ConfigMap of bench/scale.py as orjson 3.13 writes it
    holds 8 KB.  One copy (a memcpy) costs far less than the encoding did.
    """
    return bytes(memoryview(body))


def decode_json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {e}") from None


def copy_json(value: Any) -> Any:
    """A deep copy of decoded JSON (several times faster than copy.deepcopy: one C round trip)."""
    try:
        return orjson.loads(orjson.dumps(value))
    except (TypeError, orjson.JSONEncodeError):  # not plain JSON after all (YAML timestamps, big ints)
        return copy.deepcopy(value)


def encode_yaml(obj: Any) -> bytes:
    """YAML as upstream writes it (machinery/yaml_encoding.py; PyYAML loads with the first YAML answer)."""
    from kapiserver.machinery import yaml_encoding

    return yaml_encoding.encode(obj)


def decode_yaml(body: bytes) -> Any:
    """YAML as sigs.k8s.io/yaml reads it, bounded (machinery/yamljson.py; PyYAML's own composer
    recurses in C and crashes the process on deeply nested documents)."""
    from kapiserver.machinery import limits, yamljson

    try:
        return yamljson.yaml_to_json(body)
    except (yamljson.YAMLError, limits.TooDeep) as e:
        raise errors.bad_request(f"error converting YAML to JSON: {e}") from None


def encode(obj: Any, media_type: str, pretty: bool = False) -> bytes:
    if media_type == YAML:
        return encode_yaml(obj)
    return encode_json(obj, pretty)


def yaml_problem(e: yaml.YAMLError) -> str:
    """What a YAML parse error says went wrong (without PyYAML's context lines when it has them)."""
    import yaml  # (loaded already: it raised ``e``)

    return (e.problem if isinstance(e, yaml.MarkedYAMLError) else None) or str(e)
