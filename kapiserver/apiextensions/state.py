"""What the served versions of one CRD share with the controllers that follow it.

Apart from :mod:`.custom_resource` so the apiextensions server and its controllers can keep
it without importing the custom resource machinery (schemas, CEL rules, the CRD's own
validation), which loads with the first CRD."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class CRDState:
    """What every served version of one CRD shares and the controllers update."""

    name: str
    terminating: bool = False
