"""What a kind's REST storage may need from the server (``ResourceType.make_store``).

Most kinds need only the generic Store over the storage backend; a few are
answered from elsewhere (access reviews ask the authorizer, token requests sign
with the service-account key, the RBAC kinds check escalation with the rule
resolver).  They get this typed bundle, built once from the
completed configuration, instead of the whole server.  It holds auth's parts,
so it sits with the kinds (apis/), above auth; the registry knows it only as
what ``make_store`` is given.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Protocol

from twisted.internet.interfaces import IReactorTime

from kapiserver.auth.authorizer import Authorizer
from kapiserver.registry.admission import AdmissionChain
from kapiserver.registry.leases import LeaseReuser
from kapiserver.storage.interface import Storage

if TYPE_CHECKING:
    from kapiserver.auth.authentication import Authentication
    from kapiserver.auth.rbac.policy_index import PolicyIndex
    from kapiserver.registry.store import Store


class HealthReport(Protocol):
    """The server's health checks, as the componentstatuses kind reads them."""

    def names(self, kind: str) -> list[str]: ...

    async def run_one(self, kind: str, name: str) -> Optional[Exception]:
        """Run one check: the exception it raised, or None if it passed."""


class RegistryDeps(NamedTuple):
    storage: Storage
    admission: AdmissionChain
    leases: LeaseReuser
    authorizer: Authorizer
    reactor: IReactorTime
    # the cluster CA certificate (PEM), as published in kube-root-ca.crt
    ca_pem: str
    # another kind's Store: ``store(group, version, plural)`` (KeyError if not served)
    store: Callable[[str, str, str], "Store"]
    # the server's health checks (componentstatuses reports the storage one)
    health: Optional[HealthReport] = None
    # the authenticators and the service-account token signer (TokenRequest, TokenReview)
    authentication: Optional["Authentication"] = None
    # what RBAC grants whom (the RBAC kinds' escalation checks read it, whatever the authorization modes)
    rule_resolver: "PolicyIndex | None" = None
