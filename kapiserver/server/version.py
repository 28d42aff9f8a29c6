"""The ``/version`` document, in kube-apiserver's ``version.Info`` shape.

We report the Kubernetes version we emulate (:mod:`kapiserver.kube_version`):
clients such as the kubectl dispatcher pick a matching kubectl from the
server's minor version.
``goVersion`` names the Python interpreter, since there is no Go here.
"""
from __future__ import annotations

import platform
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from twisted.web import resource, server

import orjson

from kapiserver import kube_version

MAJOR = str(kube_version.MAJOR)
MINOR = str(kube_version.MINOR)
GIT_VERSION = kube_version.GIT_VERSION
BUILD_DATE = "2025-01-01T00:00:00Z"


def _git_commit() -> tuple[str, str]:
    """(commit, tree state) of the source checkout, if it is one; else unknowns."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return "", "archive"
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "", "archive"
    return commit, ("dirty" if dirty else "clean")


def _platform() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm"}.get(machine, machine)
    return f"{sys.platform}/{arch}"


@lru_cache(maxsize=1)
def version_info() -> dict:
    """The payload of ``GET /version`` (computed once: it runs git)."""
    commit, state = _git_commit()
    return {
        "major": MAJOR,
        "minor": MINOR,
        "emulationMajor": MAJOR,
        "emulationMinor": MINOR,
        "minCompatibilityMajor": MAJOR,
        "minCompatibilityMinor": str(int(MINOR) - 1),
        "gitVersion": GIT_VERSION,
        "gitCommit": commit,
        "gitTreeState": state,
        "buildDate": BUILD_DATE,
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": _platform(),
    }


class VersionResource(resource.Resource):
    """``GET /version``."""

    isLeaf = True

    def render_GET(self, request: server.Request) -> bytes:
        request.setHeader(b"content-type", b"application/json")
        return orjson.dumps(version_info(), option=orjson.OPT_INDENT_2)


def version_resource() -> resource.Resource:
    return VersionResource()
