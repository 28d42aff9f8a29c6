"""Answers ``python setup.py --name`` / ``--version`` (/ ``--fullname``) from pyproject.toml.

kapiserver is built by hatchling (pyproject.toml's ``[build-system]``): ``pip install .`` and
``python -m build`` never run this file.  It is here for tools and scripts that still ask
``setup.py`` for the project's name or version; pyproject.toml stays the one place both are
written.  It needs neither setuptools nor anything else beyond the standard library, and builds
nothing: other commands point to pip.
"""
from __future__ import annotations

import pathlib
import re
import sys

PYPROJECT = pathlib.Path(__file__).resolve().parent / "pyproject.toml"
QUERIES = ("--name", "--version", "--fullname")


def project_metadata() -> dict[str, str]:
    """``[project]``'s name and version."""
    text = PYPROJECT.read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # Python 3.10: the two plain string keys of [project], read as TOML writes them
        table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        found = dict(re.findall(r'^(name|version)\s*=\s*"([^"]*)"\s*$', table.group(1) if table else "", re.M))
        return {"name": found["name"], "version": found["version"]}
    project = tomllib.loads(text)["project"]
    return {"name": project["name"], "version": project["version"]}


def main(argv: list[str]) -> int:
    if not argv or any(arg not in QUERIES for arg in argv):
        print("kapiserver builds with hatchling (pyproject.toml): use `pip install .` or `python -m build`; "
              f"setup.py answers only {', '.join(QUERIES)}", file=sys.stderr)
        return 1
    meta = project_metadata()
    answers = {"--name": meta["name"], "--version": meta["version"],
               "--fullname": f"{meta['name']}-{meta['version']}"}
    for arg in argv:
        print(answers[arg])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
