"""Port checks that Services and Endpoints share with the pod spec's containers
(upstream's ValidatePortNumOrName and the supported protocols).  Apart from
:mod:`kapiserver.apis.core.podspec` so that a start, which writes the
``kubernetes`` Service and its Endpoints, does not load the pod validation."""
from __future__ import annotations

from typing import Any

from kapiserver.machinery import errors, validation
from kapiserver.machinery.errors import Cause

PROTOCOLS = ["SCTP", "TCP", "UDP"]


def validate_port_number(value: Any, path: str) -> list[Cause]:
    return [errors.field_invalid(path, value, m) for m in validation.is_valid_port_num(value)]


def validate_port_num_or_name(port: Any, path: str) -> list[Cause]:
    """upstream's ValidatePortNumOrName (an IntOrString port)."""
    if isinstance(port, str):
        return [errors.field_invalid(path, port, m) for m in validation.is_valid_port_name(port)]
    return validate_port_number(port if port is not None else 0, path)
