"""The apiextensions server: CustomResourceDefinitions and the custom resources they define.

STUB until CRD support lands: it serves nothing and is synced at once.
"""
from __future__ import annotations

from typing import Any


class APIExtensionsServer:
    def __init__(self, api: Any) -> None:
        self.api = api

    async def start(self) -> None:
        self.api.crds_synced = True

    def stop(self) -> None:
        pass
