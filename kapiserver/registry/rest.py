"""The verbs of a kind's REST storage, as upstream's registry/rest interfaces (``Getter``,
``Lister``, ``Creater``).

The generic :class:`Store` has every verb.  A kind answered from elsewhere (the reviews,
bindings, componentstatuses) implements only its own, over no storage; the handlers of
get, list and create take the verb's interface (``endpoints/scope.py``), which answers 405
for REST storage without it, as upstream's installer serves only the verbs a storage
implements.  The other verbs are the generic Store's.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, runtime_checkable

from kapiserver.machinery.fields import FieldSelector
from kapiserver.registry.context import Context
from kapiserver.registry.options import ListOptions
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import StoredList, StoredObject, WriteResult


class RESTStorage(Protocol):
    """What serves one kind's resource: :class:`Store`, or the verbs below."""

    @property
    def rtype(self) -> ResourceType: ...


@runtime_checkable
class Getter(RESTStorage, Protocol):
    async def get_stored(self, namespace: str, name: str, resource_version: str = "") -> "StoredObject | dict":
        """The object (a stored value, or the object itself); a 404 when there is none."""


@runtime_checkable
class Lister(RESTStorage, Protocol):
    def field_selector(self, opts: ListOptions) -> FieldSelector:
        """The options' field selector in the kind's field labels (a 400 for one it lacks)."""

    async def list_stored(self, namespace: str, opts: ListOptions,
                          warnings: Optional[list[str]] = None) -> "StoredList | dict":
        """The objects the options select."""


@runtime_checkable
class Creater(RESTStorage, Protocol):
    async def create_result(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> WriteResult:
        """Create ``obj`` (or answer it: a review); ``answer()`` of the result is what the
        handler answers."""
