"""The connect subresources' streams, loaded with the first one a client opens.

The code that serves logs, exec, attach, port-forward and the proxies (the
connector, the SPDY and WebSocket codecs, the stream translator, the HTML link
rewriter, ``twisted.web.client``) is about 1.6 MiB of an idle process's memory
and a tenth of its imports.  Only a client that connects to a pod, a node or a
service needs it, and many servers never see one, so a start does not load it:
:class:`StreamsOnFirstUse` imports ``connector`` when the first such request
comes (tests/server/test_start_footprint.py checks a started server has not).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.web.server import Request

from kapiserver.endpoints.streaming.interfaces import Dial, StoreGetter
from kapiserver.endpoints.streaming.kubelet import KubeletClientConfig
from kapiserver.registry.subresources import Location

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.endpoints.streaming.connector import StreamConnector


class StreamsOnFirstUse:
    """A :class:`~kapiserver.endpoints.streaming.interfaces.ConnectStreams` that builds the
    ``StreamConnector`` (``reactor``, ``kubelet``, ``dial``) when it first serves."""

    def __init__(self, reactor: IReactorTime, kubelet: KubeletClientConfig, dial: Optional[Dial] = None) -> None:
        self._reactor = reactor
        self._kubelet = kubelet
        self._dial = dial
        self._connector: Optional[StreamConnector] = None

    @property
    def dial(self) -> Optional[Dial]:
        """How backends are connected to (None: TCP), for the connector built now or later."""
        return self._dial

    @dial.setter
    def dial(self, dial: Dial) -> None:
        self._dial = dial
        if self._connector is not None:
            self._connector.dial = dial

    def connector(self) -> StreamConnector:
        if self._connector is None:
            # loaded here, not at module level: see the module's docstring
            from kapiserver.endpoints.streaming.connector import StreamConnector
            self._connector = StreamConnector(self._reactor, self._kubelet, self._dial)
        return self._connector

    async def serve(self, request: Request, location: Location, stores: StoreGetter) -> None:
        await self.connector().serve(request, location, stores)
