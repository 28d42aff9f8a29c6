"""What both CEL users check in a compiled program, with cel-go's texts: references to
variables and functions the environment does not declare, and parse errors.

CRD validation rules (``apiextensions/cel/rules.py``) and admission expressions
(``compiler.py``) compile with the same engine and report the same errors as
upstream's shared ``k8s.io/apiserver/pkg/cel`` environment does.
"""
from __future__ import annotations

import re

# a function name that is an operator (``_+_``, ``@in``, ``!_``, ``-_``), always declared
OPERATOR = re.compile(r"^[_@!-]")
# the variables a macro binds (``l.all(x, ...)``, ``m.map(k, v, ...)``): declared inside it
BOUND_VARS = re.compile(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,"
                        r"(?:\s*([A-Za-z_]\w*)\s*,)?")


def compile_error(rule: str, err: Exception) -> str:
    """The engine's parse error in cel-go's words, without the engine's prefix."""
    text = str(err)
    prefix = f"Failed to parse expression '{rule}': "
    text = text[len(prefix):] if text.startswith(prefix) else text
    return text.replace("\n| ", "\n | ")


def ref_error(source: str, name: str) -> str:
    """cel-go's "undeclared reference" error, pointing at the first use of ``name``."""
    m = re.search(rf"(?<![\w.]){re.escape(name)}\b", source) or re.search(re.escape(name), source)
    offset = m.start() if m else 0
    line = source.count("\n", 0, offset) + 1
    col = offset - (source.rfind("\n", 0, offset) + 1) + 1
    text_line = source.splitlines()[line - 1] if source else ""
    return (f"ERROR: <input>:{line}:{col}: undeclared reference to '{name}' (in container '')\n"
            f" | {text_line}\n | {'.' * (col - 1)}^")
