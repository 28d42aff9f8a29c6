"""A set of served resource types with their Stores, indexed for routing and discovery."""
from __future__ import annotations

from typing import Iterator, Optional

from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store


class APIGroupSet:
    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], tuple[ResourceType, Store]] = {}
        self.generation = 0  # bumped on every change; caches of discovery/OpenAPI key on it

    def add(self, rtype: ResourceType, store: Store) -> None:
        self._by_path[(rtype.group, rtype.version, rtype.plural)] = (rtype, store)
        self.generation += 1

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_path if k[0] == group and k[2] == plural]:
            del self._by_path[key]
        self.generation += 1

    def lookup(self, group: str, version: str, plural: str) -> Optional[tuple[ResourceType, Store]]:
        return self._by_path.get((group, version, plural))

    def store_for(self, group: str, version: str, plural: str) -> Store:
        found = self.lookup(group, version, plural)
        if found is None:
            raise KeyError((group, version, plural))
        return found[1]

    def types(self) -> list[ResourceType]:
        return [rt for rt, _ in self._by_path.values()]

    def __iter__(self) -> Iterator[tuple[ResourceType, Store]]:
        return iter(list(self._by_path.values()))

    def has_group(self, group: str) -> bool:
        return any(k[0] == group for k in self._by_path)

    def has_group_version(self, group: str, version: str) -> bool:
        return any(k[0] == group and k[1] == version for k in self._by_path)

    def groups(self) -> list[str]:
        return sorted({k[0] for k in self._by_path})
