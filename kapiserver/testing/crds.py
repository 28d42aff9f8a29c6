"""Install CustomResourceDefinitions from YAML files into a test server and wait until they are served.

envtest's ``CRDDirectoryPaths`` for Python tests: each path is a YAML (or JSON)
file holding one or many documents, or a directory of such files (``*.yaml``,
``*.yml``, ``*.json``, not recursive).  Every document must be a
``CustomResourceDefinition``; one already installed is replaced by the file's
version.  :func:`install_crds` returns once each CRD reports
``Established=True``: the server then serves its resource (as kube-apiserver
does), so a test or an operator can use it at once.

Only the server's admin HTTPS client (:meth:`ServerProcess.admin_request`)
is used: no client library is needed.
"""
from __future__ import annotations

import os
import time
from typing import Iterable, Union

import yaml

from kapiserver.testing.process import ServerProcess

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ESTABLISH_TIMEOUT_SECONDS = 30.0
_SUFFIXES = (".yaml", ".yml", ".json")
PathLike = Union[str, "os.PathLike[str]"]


def load_crds(paths: Iterable[PathLike]) -> list[dict]:
    """The CRD documents of ``paths`` (files, or directories of YAML/JSON files), in order.

    Empty documents are skipped; a document of another kind is an error that
    names the file (a test's fixture should not install something else quietly).
    """
    crds: list[dict] = []
    names = [os.fspath(path) for path in paths]
    for path in names:
        files = ([os.path.join(path, name) for name in sorted(os.listdir(path)) if name.endswith(_SUFFIXES)]
                 if os.path.isdir(path) else [path])
        for file_path in files:
            with open(file_path) as f:
                for document in yaml.safe_load_all(f):
                    if document is None:
                        continue
                    if not isinstance(document, dict) or document.get("kind") != "CustomResourceDefinition":
                        kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
                        raise ValueError(f"{file_path}: a document of kind {kind!r} is not a CustomResourceDefinition")
                    crds.append(document)
    if not crds:
        raise ValueError(f"no CustomResourceDefinition in {', '.join(names)}")
    return crds


def _condition(crd: dict, kind: str) -> dict:
    for condition in (crd.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind:
            return condition
    return {}


def _create_or_replace(server: ServerProcess, crd: dict) -> str:
    name: str = crd["metadata"]["name"]
    status, body = server.admin_request("POST", CRD_PATH, crd)
    if status == 409:  # installed already (an earlier test, another session's file): take this file's version
        status, current = server.admin_request("GET", f"{CRD_PATH}/{name}")
        if status == 200:
            replacement = dict(crd, metadata=dict(crd["metadata"],
                                                  resourceVersion=current["metadata"]["resourceVersion"]))
            status, body = server.admin_request("PUT", f"{CRD_PATH}/{name}", replacement)
    if status not in (200, 201):
        raise RuntimeError(f"installing CRD {name} answered {status}: {body.get('message', body)}")
    return name


def install_crds(server: ServerProcess, paths: Iterable[PathLike],
                 timeout: float = ESTABLISH_TIMEOUT_SECONDS) -> list[str]:
    """Create (or replace) the CRDs of ``paths`` and wait until every one is Established; their names.

    A CRD whose names the server refuses (``NamesAccepted=False``, e.g. a
    plural another CRD of the group has) is an error with the server's message.
    """
    names = [_create_or_replace(server, crd) for crd in load_crds(paths)]
    waiting = list(names)
    deadline = time.monotonic() + timeout
    while waiting:
        status, crd = server.admin_request("GET", f"{CRD_PATH}/{waiting[0]}")
        if status != 200:
            raise RuntimeError(f"reading CRD {waiting[0]} answered {status}: {crd.get('message', crd)}")
        accepted = _condition(crd, "NamesAccepted")
        if accepted.get("status") == "False":
            raise RuntimeError(f"CRD {waiting[0]}: names not accepted: {accepted.get('message')}")
        if _condition(crd, "Established").get("status") == "True":
            waiting.pop(0)
            continue
        if time.monotonic() > deadline:
            raise RuntimeError(f"CRD {waiting[0]} not Established after {timeout}s: {crd.get('status')}")
        time.sleep(0.05)
    return names


def uninstall_crds(server: ServerProcess, names: Iterable[str], timeout: float = ESTABLISH_TIMEOUT_SECONDS) -> None:
    """Delete the CRDs named (and so their custom resources) and wait until they are gone."""
    names = list(names)
    for name in names:
        status, body = server.admin_request("DELETE", f"{CRD_PATH}/{name}")
        if status not in (200, 202, 404):
            raise RuntimeError(f"deleting CRD {name} answered {status}: {body.get('message', body)}")
    deadline = time.monotonic() + timeout
    for name in names:
        while server.admin_request("GET", f"{CRD_PATH}/{name}")[0] != 404:
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} still there {timeout}s after its deletion")
            time.sleep(0.05)
