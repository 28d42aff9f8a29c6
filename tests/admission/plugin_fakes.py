"""Small stand-ins for the admission plugin unit tests: a resource type and a Lister."""
from __future__ import annotations

from typing import Optional
from kapiserver.registry.admission import CREATE, Attributes



class RType:
    def __init__(self, group: str, plural: str, kind: str, namespaced: bool = True) -> None:
        self.group, self.plural, self.kind, self.version, self.namespaced = group, plural, kind, "v1", namespaced


PODS = RType("", "pods", "Pod")
NODES = RType("", "nodes", "Node", namespaced=False)
PRIORITY_CLASSES = RType("scheduling.k8s.io", "priorityclasses", "PriorityClass", namespaced=False)


class FakeLister:
    """What a plugin reads of other objects, from a fixed list (cluster-scoped)."""

    def __init__(self, *objects: dict) -> None:
        self.objects = list(objects)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    async def list(self) -> list[dict]:
        return list(self.objects)

    async def get(self, name: str, namespace: str = "") -> Optional[dict]:
        return next((o for o in self.objects if o["metadata"]["name"] == name), None)


def attrs(obj: dict, rtype=PODS, operation: str = CREATE, old: Optional[dict] = None,
          subresource: str = "") -> Attributes:
    return Attributes(operation, rtype, "ns" if rtype.namespaced else "",  # type: ignore[arg-type]
                      obj["metadata"].get("name", ""), obj, old, subresource)


def pod(name: str = "p", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}
