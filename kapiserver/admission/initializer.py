"""What admission plugins may need from the server (upstream's plugin initializers).

The server builds one :class:`AdmissionDeps` before its stores exist; the
callables are looked up lazily, when a plugin starts or admits a request.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from twisted.internet.interfaces import IReactorTime

from kapiserver.auth.authorizer import Authorizer

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.registry.groups import ServedTypes
    from kapiserver.registry.store import Store


class AdmissionDeps(NamedTuple):
    reactor: IReactorTime
    # the one authorizer (VAP ``authorizer`` variable, match conditions)
    authorizer: Authorizer
    # any served resource's Store: ``store(group, version, plural)`` (KeyError if not served)
    store: Callable[[str, str, str], "Store"]
    # every served resource type, built-in and custom (equivalent resources, param kinds), and a
    # generation that changes whenever they do (CRDs come and go)
    served: "ServedTypes"
    # ``$ref`` -> schema of the built-in definitions (type checking of policies)
    schema_resolver: Callable[[str], dict]
