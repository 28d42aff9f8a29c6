"""Admission: plugins that see (and may change or refuse) every write.

As upstream, mutating plugins run first (``admit``), then the strategy's
defaulting and validation, then validating plugins (``validate``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.registry.resource_type import ResourceType

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"


@dataclass
class Attributes:
    operation: str
    rtype: "ResourceType"
    namespace: str
    name: str
    obj: Optional[dict]
    old_obj: Optional[dict] = None
    subresource: str = ""
    user: Any = None
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)


class AdmissionPlugin:
    """Override either hook; both may raise a StatusError to refuse."""

    async def admit(self, attrs: Attributes) -> None:
        """Mutating admission."""

    async def validate(self, attrs: Attributes) -> None:
        """Validating admission."""


class AdmissionChain:
    def __init__(self, plugins: Sequence[AdmissionPlugin] = ()) -> None:
        self.plugins = list(plugins)

    async def admit(self, attrs: Attributes) -> None:
        for plugin in self.plugins:
            await plugin.admit(attrs)

    async def validate(self, attrs: Attributes) -> None:
        for plugin in self.plugins:
            await plugin.validate(attrs)
