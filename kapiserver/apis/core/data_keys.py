"""The ``data`` maps of ConfigMaps and Secrets: key rules, base64 values, size.

Both kinds share upstream's ``IsConfigMapKey`` rule and the 1 MiB total, and
both carry ``[]byte`` values that JSON transports as base64: a value that is
not valid standard base64 makes upstream's decoder reject the whole body
with 400 BadRequest before any validation runs.
"""
from __future__ import annotations

import base64
import binascii
from typing import Optional

from kapiserver.machinery import errors, validation
from kapiserver.machinery.jsonvalues import go_json_type

MAX_SIZE = 1024 * 1024  # upstream's MaxSecretSize, also the ConfigMap limit
_B64_ALPHABET = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
IMMUTABLE_MESSAGE = "field is immutable when `immutable` is set"


def key_path(map_name: str, key: str) -> str:
    """A map entry's field path as upstream prints it: ``data[key]``."""
    return f"{map_name}[{key}]"


def validate_keys(values: dict, map_name: str) -> list[errors.Cause]:
    """Every key a config key (upstream's IsConfigMapKey)."""
    causes = []
    for key in values:
        for problem in validation.is_config_map_key(key):
            causes.append(errors.field_invalid(key_path(map_name, key), key, problem))
    return causes


def base64_error_offset(text: str) -> Optional[int]:
    """Where Go's strict ``base64.StdEncoding`` fails on ``text`` (None if it decodes).

    Go skips ``\\r`` and ``\\n``, needs complete 4-character quanta and accepts
    ``=`` only as final padding; the offset is the one its CorruptInputError
    reports.
    """
    i, n = 0, len(text)
    while i < n:
        got = 0
        while got < 4:
            while i < n and text[i] in "\r\n":
                i += 1
            if i == n:
                return None if got == 0 else n - got
            ch = text[i]
            if ch == "=":
                if got < 2:
                    return i
                j = i + 1
                if got == 2:  # a second '=' must follow
                    while j < n and text[j] in "\r\n":
                        j += 1
                    if j == n:
                        return n
                    if text[j] != "=":
                        return j - 1
                    j += 1
                while j < n and text[j] in "\r\n":
                    j += 1
                return j if j < n else None
            if ch not in _B64_ALPHABET:
                return i
            got += 1
            i += 1
    return None


def decode_value(text: object) -> Optional[bytes]:
    """The bytes of a base64 value, or None when Go would not decode it."""
    if not isinstance(text, str) or base64_error_offset(text) is not None:
        return None
    try:
        return base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None


def check_base64_map(obj: dict, map_name: str, kind: str) -> int:
    """Reject (400) a map holding a value that is not base64; return its decoded size."""
    values = obj.get(map_name)
    if not values:
        return 0
    if not isinstance(values, dict):
        raise errors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: json: cannot unmarshal '
                                 f'{go_json_type(values)} into Go struct field {kind}.{map_name} of type '
                                 f'map[string][]uint8')
    size = 0
    for key, value in values.items():
        if value is None:
            continue
        if not isinstance(value, str):
            raise errors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: json: cannot '
                                     f'unmarshal {go_json_type(value)} into Go struct field {kind}.{map_name} of '
                                     f'type []uint8')
        offset = base64_error_offset(value)
        if offset is not None:
            raise errors.bad_request(f'{kind} in version "v1" cannot be handled as a {kind}: illegal base64 data '
                                     f'at input byte {offset}')
        size += len(decode_value(value) or b"")
    return size




def same_map(a: Optional[dict], b: Optional[dict]) -> bool:
    """Map equality where absent and empty are the same (storage drops empty maps)."""
    return (a or {}) == (b or {})
