"""Loads the YAML fixtures shared with the end-to-end tests."""
from __future__ import annotations

import copy
import functools
import os

import yaml

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@functools.lru_cache(maxsize=None)
def _load(name: str) -> dict:
    with open(os.path.join(FIXTURES, name)) as f:
        return yaml.safe_load(f)


def load(name: str) -> dict:
    """A fresh copy of fixture ``name`` (tests may mutate it)."""
    return copy.deepcopy(_load(name))


def issuer_schema() -> dict:
    """The v1 openAPIV3Schema of the Issuer CRD."""
    crd = load("issuer-crd.yaml")
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]


def messages(causes) -> list[str]:
    """Causes as ``field: message`` lines, the way the 422 message shows them."""
    return [f"{c.field}: {c.message}" if c.field else c.message for c in causes]
