"""Regular expressions with RE2 semantics and linear cost (Go's ``regexp``), via ``google-re2``.

Upstream compiles CRD schema ``pattern``s and CEL ``matches``/``find``
arguments with Go's regexp package, which is RE2: no backreferences or
lookaround, and matching time linear in the input.  Python's ``re``
backtracks (``^(a+)+$`` against 30 ``a``\\s and a ``b`` takes seconds and
stalls the reactor), so every client-supplied pattern goes through here.

RE2 (a C++ library, about 2.4 MiB resident with its runtime) is loaded with
the first pattern compiled: a server whose clients send none never maps it.
"""
from __future__ import annotations

import functools
from typing import Any, Optional


@functools.cache
def _re2() -> tuple[Any, Any]:
    """The ``re2`` module and the options every pattern is compiled with."""
    import re2
    options = re2.Options()
    options.log_errors = False  # a bad pattern is the client's error: answer it, do not log it
    return re2, options


class RegexError(ValueError):
    """A pattern RE2 does not accept; ``str()`` is RE2's reason."""


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> Any:
    re2, options = _re2()
    try:
        return re2.compile(pattern, options=options)
    except re2.error as e:
        reason = e.args[0] if e.args else str(e)
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return RegexError(reason)


def compile(pattern: str) -> Any:  # noqa: A001 - the module is used as regex.compile
    """The compiled pattern (cached); raises :class:`RegexError` when RE2 refuses it."""
    found = _compile(pattern)
    if isinstance(found, RegexError):
        raise found
    return found


def compile_or_none(pattern: str) -> Optional[Any]:
    """The compiled pattern (cached), or None when RE2 refuses it: a schema ``pattern`` or a
    CEL ``find`` argument, whose refusal was reported when the schema or rule was checked."""
    found = _compile(pattern)
    return None if isinstance(found, RegexError) else found


def problem(pattern: str) -> Optional[str]:
    """Why RE2 refuses ``pattern`` (None when it compiles)."""
    found = _compile(pattern)
    return str(found) if isinstance(found, RegexError) else None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (Go's ``MatchString``)."""
    return compile(pattern).search(text) is not None
