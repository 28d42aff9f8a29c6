"""Cron schedules as CronJobs accept them (the robfig/cron v3 standard parser upstream uses).

Five fields (minute hour day-of-month month day-of-week) with ``*``, ``?``,
ranges, steps, lists and month/weekday names, or a descriptor (``@hourly``,
``@every 1h30m``).  :func:`schedule_error` returns upstream's error text.
"""
from __future__ import annotations

import re
from typing import Optional

_MONTHS = {name: i + 1 for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (min, max, names) of minute, hour, day of month, month, day of week
_FIELDS = ((0, 59, None), (0, 23, None), (1, 31, None), (1, 12, _MONTHS), (0, 6, _DAYS))
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_DURATION_RE = re.compile(r"[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+|[-+]?0")


class _CronError(Exception):
    pass


def _parse_int(expr: str) -> int:
    """Go's strconv.Atoi with robfig's messages."""
    if not re.fullmatch(r"[+-]?[0-9]+", expr):
        raise _CronError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    num = int(expr)
    if num < 0:
        raise _CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _int_or_name(expr: str, names: Optional[dict]) -> int:
    if names and expr.lower() in names:
        return names[expr.lower()]
    return _parse_int(expr)


def _check_range(expr: str, low: int, high: int, names: Optional[dict]) -> None:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    if low_high[0] in ("*", "?"):
        start, end = low, high
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], names)
        else:
            raise _CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 2:
        step = _parse_int(range_and_step[1])
        if len(low_high) == 1:
            end = high  # "N/step" means "N-max/step"
    elif len(range_and_step) == 1:
        step = 1
    else:
        raise _CronError(f"too many slashes: {expr}")
    if start < low:
        raise _CronError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise _CronError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise _CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise _CronError(f"step of range should be a positive number: {expr}")


def _check(spec: str) -> None:
    if not spec:
        raise _CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        _, _, spec = spec.partition(" ")
        spec = spec.strip()
    if spec.startswith("@"):
        if spec in DESCRIPTORS:
            return
        if spec.startswith("@every "):
            duration = spec[len("@every "):]
            if not _DURATION_RE.fullmatch(duration):
                raise _CronError(f'failed to parse duration {spec}: time: invalid duration "{duration}"')
            return
        raise _CronError(f"unrecognized descriptor: {spec}")
    fields = spec.split()
    if len(fields) != 5:
        raise _CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    for text, (low, high, names) in zip(fields, _FIELDS):
        for expr in text.split(","):
            _check_range(expr, low, high, names)


def schedule_error(spec: str) -> str:
    """Why a schedule is refused ("" when it parses)."""
    try:
        _check(spec)
    except _CronError as e:
        return str(e)
    return ""
