"""The Site of the handler chain: requests (``filters/request.py`` :class:`APIRequest`) over the
connections of this package, which it builds (``protocol.py``) and tracks for a graceful shutdown."""
from __future__ import annotations

from typing import Any, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.web import resource, server

from kapiserver.auth.authenticator import Authenticator
from kapiserver.auth.authorizer import Authorizer
from kapiserver.endpoints.connection.policy import ConnectionPolicy
from kapiserver.endpoints.connection.protocol import APIConnection, OpenConnections
from kapiserver.endpoints.filters.request import APIRequest


class APISite(server.Site):
    """The Site of the handler chain: :class:`APIRequest` over the connections of ``endpoints/connection``.

    ``authenticator`` is the one the authentication filter uses (None: requests
    are authenticated by the filter only, bodies always read), ``authorizer`` the
    authorization filter's (anonymous uploads it refuses are not read); ``connections``
    are the open connections, which a graceful shutdown drains.  ``access_log``: a line
    per request (kube-apiserver writes its request log only at ``-v=3`` and up; here
    ``log_level: debug``): formatting and writing it costs a busy server several percent.
    """

    requestFactory = APIRequest
    displayTracebacks = False

    def __init__(self, handler_chain: resource.IResource, max_body_bytes: int,
                 authenticator: Optional[Authenticator] = None, policy: Optional[ConnectionPolicy] = None,
                 reactor: Optional[IReactorTime] = None, authorizer: Optional[Authorizer] = None, access_log: bool = True,
                 **kwargs: Any) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        super().__init__(handler_chain, reactor=reactor, **kwargs)
        self.noisy = False
        self.max_body_bytes = max_body_bytes
        self.authenticator = authenticator
        # anonymous requests with a body are authorized before it is read (the filter decides again)
        self.authorizer = authorizer
        self.policy = policy if policy is not None else ConnectionPolicy(max_body_bytes=max_body_bytes)
        self.connections = OpenConnections()
        self.access_log = access_log

    def log(self, request: Any) -> None:
        if self.access_log:
            super().log(request)

    def buildProtocol(self, addr: Any) -> Any:
        connection = APIConnection(self)
        connection.factory = self
        return connection
