"""Wire encodings of API objects: JSON (orjson) and YAML.

Objects inside the server are plain dicts; these functions are the only
place that turns them into bytes and back.
"""
from __future__ import annotations

import copy
import functools
import re
from typing import TYPE_CHECKING, Any, Optional

import orjson
import yaml

from kapiserver.machinery import errors

JSON = "application/json"
YAML = "application/yaml"

if TYPE_CHECKING:  # (the C dumper's stubs do not say it is a SafeDumper; it behaves as one)
    from yaml import SafeDumper as YamlDumperBase
else:
    try:  # the C dumper is several times faster when libyaml is present
        from yaml import CSafeDumper as YamlDumperBase
    except ImportError:  # pragma: no cover
        from yaml import SafeDumper as YamlDumperBase

_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()  # the dumpers' (implicit types: YAML 1.1)
# strings go-yaml v2 reads as booleans that PyYAML's resolver does not
_GO_YAML_BOOLEANS = frozenset(("y", "Y", "n", "N"))


class _YamlDumper(YamlDumperBase):
    """Strings styled as sigs.k8s.io/yaml (go-yaml v2, a port of libyaml's emitter) styles them."""


def _go_yaml_string(dumper: Any, data: str) -> Any:
    style = _short_string_style(data) if len(data) <= 64 else _string_style(data)
    return dumper.represent_scalar(_STR_TAG, data, style=style)


def _string_style(data: str) -> Optional[str]:
    # go-yaml v2: a string with a line break asks for a literal block (the emitter falls back
    # to double quotes where one cannot hold it), one that would read back as another type
    # ("0", "true", "", a timestamp) for double quotes, any other for plain (else single
    # quotes, else double: the emitter's choice, libyaml's too)
    if "\n" in data:
        return "|"
    if (data in _GO_YAML_BOOLEANS or _go_yaml_number(data)
            or _RESOLVER.resolve(yaml.ScalarNode, data, (True, False)) != _STR_TAG):
        return '"'
    return None


# keys and short values repeat from object to object (the resolver's regexes cost more)
_short_string_style = functools.lru_cache(maxsize=4096)(_string_style)


# go-yaml v2's yamlStyleFloat: what it lets strconv.ParseFloat read as a float
_GO_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _go_yaml_number(data: str) -> bool:
    """Whether go-yaml v2 reads the string as a number where PyYAML may not (``1e3``, ``0o17``):
    on what starts like a number, underscores removed, Go's ParseInt with base prefixes or its
    float syntax.  (``+inf`` and non-ASCII digits stay strings there.)"""
    if not data or data[0] not in "0123456789+-." or not data.isascii() or data != data.strip():
        return False
    plain = data.replace("_", "") if data[0] != "." else data
    try:
        int(plain, 0)  # Python's base prefixes are Go's (a leading-zero octal PyYAML resolves itself)
        return True
    except ValueError:
        return _GO_YAML_FLOAT.fullmatch(plain) is not None


_YamlDumper.add_representer(str, _go_yaml_string)


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
    """YAML as upstream writes it (sigs.k8s.io/yaml: map keys sorted)."""
    return yaml.dump(obj, Dumper=_YamlDumper, default_flow_style=False, sort_keys=True,
                     allow_unicode=True).encode()


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
    return (e.problem if isinstance(e, yaml.MarkedYAMLError) else None) or str(e)
