"""The served resource types with their Stores: one group set per server part, and all of them.

An :class:`APIGroupSet` is what one link of the delegation chain serves (the
aggregator's apiregistration.k8s.io, the built-in groups, the CRDs' groups),
indexed for routing and discovery; :class:`ServedResources` is every set at
once, for what looks across them (admission, the garbage collector, OpenAPI,
the server's own informers).
"""
from __future__ import annotations

from typing import Hashable, Iterator, Optional, Protocol

from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.rest import RESTStorage
from kapiserver.registry.store import Store


class APIGroupSet:
    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], tuple[ResourceType, RESTStorage]] = {}
        self.generation = 0  # bumped on every change; caches of discovery/OpenAPI key on it

    def add(self, rtype: ResourceType, store: RESTStorage) -> None:
        self._by_path[(rtype.group, rtype.version, rtype.plural)] = (rtype, store)
        self.generation += 1

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_path if k[0] == group and k[2] == plural]:
            del self._by_path[key]
        self.generation += 1

    def lookup(self, group: str, version: str, plural: str) -> Optional[tuple[ResourceType, RESTStorage]]:
        return self._by_path.get((group, version, plural))

    def store_for(self, group: str, version: str, plural: str) -> Store:
        """The generic Store of a stored kind (KeyError for one not served, or not stored)."""
        found = self.lookup(group, version, plural)
        if found is None or not isinstance(found[1], Store):
            raise KeyError((group, version, plural))
        return found[1]

    def stores(self) -> list[Store]:
        """The generic Stores (the kinds that are stored)."""
        return [store for _, store in self._by_path.values() if isinstance(store, Store)]

    def types(self) -> list[ResourceType]:
        return [rt for rt, _ in self._by_path.values()]

    def __iter__(self) -> Iterator[tuple[ResourceType, RESTStorage]]:
        return iter(list(self._by_path.values()))

    def has_group(self, group: str) -> bool:
        return any(k[0] == group for k in self._by_path)

    def has_group_version(self, group: str, version: str) -> bool:
        return any(k[0] == group and k[1] == version for k in self._by_path)

    def groups(self) -> list[str]:
        return sorted({k[0] for k in self._by_path})


class ServedTypes(Protocol):
    """Every served resource type, and a value that changes whenever they do (caches key on it)."""

    def types(self) -> list[ResourceType]: ...

    @property
    def generation(self) -> Hashable: ...


class ServedResources:
    """Every resource the server serves: the aggregator's, the built-in and the CRDs' groups.

    ``store(group, version, plural)`` finds a served resource's Store (KeyError if none);
    ``generation`` changes whenever a CRD is installed or uninstalled.
    """

    def __init__(self, aggregator: APIGroupSet, kube: APIGroupSet, crds: APIGroupSet) -> None:
        self.aggregator = aggregator
        self.kube = kube
        self.crds = crds

    def types(self) -> list[ResourceType]:
        return self.aggregator.types() + self.kube.types() + self.crds.types()

    def stores(self) -> list[Store]:
        """The generic Stores of every set (the kinds that are stored)."""
        return self.aggregator.stores() + self.kube.stores() + self.crds.stores()

    def lookup(self, group: str, version: str, plural: str) -> Optional[tuple[ResourceType, RESTStorage]]:
        return (self.kube.lookup(group, version, plural) or self.crds.lookup(group, version, plural)
                or self.aggregator.lookup(group, version, plural))

    def store(self, group: str, version: str, plural: str) -> Store:
        """The generic Store of a stored kind (KeyError for one not served, or not stored)."""
        found = self.lookup(group, version, plural)
        if found is None or not isinstance(found[1], Store):
            raise KeyError((group, version, plural))
        return found[1]

    @property
    def generation(self) -> Hashable:
        return (self.aggregator.generation, self.kube.generation, self.crds.generation)


class FixedTypes:
    """Served types that never change (a tool or a unit test mapping a list it holds)."""

    def __init__(self, types: list[ResourceType]) -> None:
        self._types = types

    def types(self) -> list[ResourceType]:
        return self._types

    @property
    def generation(self) -> Hashable:
        return 0
