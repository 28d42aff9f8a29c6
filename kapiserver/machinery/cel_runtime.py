"""The CEL engine (the ``cel`` module of the common-expression-language package), without its CLI.

``cel/__init__.py`` also imports the package's interactive command line (typer, rich,
prompt_toolkit), which the server never uses: measured on this project's 2-core machine, that
is about 200 ms of every start and about 24 MiB of resident memory.  Importing ``cel`` through
this module registers an empty ``cel.cli`` first, so only the engine is loaded.  (If something
imported the real package earlier, it is used as it is.)
"""
from __future__ import annotations

import sys
import types

if "cel" not in sys.modules:
    sys.modules.setdefault("cel.cli", types.ModuleType("cel.cli"))

import cel as cel  # noqa: E402  (after the stub, on purpose)
from cel import stdlib as stdlib  # noqa: E402

__all__ = ["cel", "stdlib"]
