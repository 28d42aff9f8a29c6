"""Small helpers for ObjectMeta: timestamps, uids, generated names."""
from __future__ import annotations

import datetime
import os
import secrets
import time

# Upstream's utilrand alphabet: no vowels (no accidental words) and no
# look-alike characters.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
GENERATED_SUFFIX_LENGTH = 5


_formatted_second: list = [-1, ""]  # the last second formatted, and its text


def now_rfc3339() -> str:
    """metav1.Time: RFC 3339, UTC, second precision.

    Formatted once per second: a write stamps several times (creation, managedFields).
    """
    second = int(time.time())
    if _formatted_second[0] != second:
        _formatted_second[:] = [second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))]
    return _formatted_second[1]


def now_rfc3339_micro() -> str:
    """metav1.MicroTime (events' eventTime, leases' renewTime)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def rfc3339_in(seconds: int) -> str:
    """metav1.Time ``seconds`` from now (a deletionTimestamp: when a grace period ends)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(time.time()) + seconds))


def rfc3339_moved(value: str, seconds: int) -> str:
    """metav1.Time ``value`` moved by ``seconds`` (a shortened grace period)."""
    moved = parse_rfc3339(value) + datetime.timedelta(seconds=seconds)
    return moved.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# RFC 4122's variant: the high two bits of the 9th byte are 10 (hex digit 8, 9, a or b)
_UUID_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def new_uid() -> str:
    """A random (version 4) UUID in its text form: an object's uid, a request's Audit-ID.

    Formatted from 16 random bytes directly; ``str(uuid.uuid4())`` builds a UUID object
    on the way, which costs about 1 % of a GET when every request needs one."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_UUID_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def generate_name(prefix: str) -> str:
    """``generateName`` + 5 random characters; the prefix is cut to keep the name <= 63."""
    max_prefix = 63 - GENERATED_SUFFIX_LENGTH
    return prefix[:max_prefix] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH))


def metadata(obj: dict) -> dict:
    """The object's metadata dict, created if missing."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def without_metadata(obj: dict, names: tuple[str, ...] = ("managedFields",)) -> dict:
    """``obj`` with its metadata copied without ``names`` (``obj`` itself when it has none of
    them): a shallow view, the rest shared."""
    md = obj.get("metadata")
    if not isinstance(md, dict) or not any(name in md for name in names):
        return obj
    return {**obj, "metadata": {k: v for k, v in md.items() if k not in names}}

