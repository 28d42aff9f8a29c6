"""AlwaysAdmit and AlwaysDeny: upstream's two trivial (deprecated) plugins, off by default."""
from __future__ import annotations

from typing import Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.initializer import AdmissionDeps
from kapiserver.registry.admission import AdmissionPlugin, Attributes

ALWAYS_ADMIT = "AlwaysAdmit"
ALWAYS_DENY = "AlwaysDeny"


class AlwaysAdmit(AdmissionPlugin):
    name = ALWAYS_ADMIT
    mutating = True
    validating = True


class AlwaysDeny(AdmissionPlugin):
    name = ALWAYS_DENY
    mutating = True
    validating = True

    async def admit(self, attrs: Attributes) -> None:
        raise admission_forbidden(attrs, "admission control is denying all modifications")

    async def validate(self, attrs: Attributes) -> None:
        raise admission_forbidden(attrs, "admission control is denying all modifications")


def always_admit(config: Optional[bytes], deps: AdmissionDeps) -> AlwaysAdmit:
    return AlwaysAdmit()


def always_deny(config: Optional[bytes], deps: AdmissionDeps) -> AlwaysDeny:
    return AlwaysDeny()
