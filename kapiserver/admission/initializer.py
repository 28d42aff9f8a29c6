"""What admission plugins may need from the server (upstream's plugin initializers).

The server builds one :class:`AdmissionDeps` before its stores exist; the
callables are looked up lazily, when a plugin starts or admits a request.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Hashable

from twisted.internet.interfaces import IReactorTime

from kapiserver.auth.authorizer import Authorizer

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.registry.resource_type import ResourceType
    from kapiserver.registry.store import Store


@dataclass(frozen=True)
class AdmissionDeps:
    reactor: IReactorTime
    # the one authorizer (VAP ``authorizer`` variable, match conditions)
    authorizer: Authorizer
    # any served resource's Store: ``store(group, version, plural)`` (KeyError if not served)
    store: Callable[[str, str, str], "Store"]
    # every served resource type, built-in and custom (equivalent resources, param kinds)
    served_types: Callable[[], list["ResourceType"]]
    # changes whenever the served types do (CRDs come and go)
    served_types_generation: Callable[[], Hashable]
    # ``$ref`` -> schema of the built-in definitions (type checking of policies)
    schema_resolver: Callable[[str], dict]
