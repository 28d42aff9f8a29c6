"""Group, version, kind and resource: upstream's ``k8s.io/apimachinery/pkg/runtime/schema``
identifiers, as admission, audit and the registry name what a request is about."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    def __str__(self) -> str:
        """Upstream's GroupVersionKind.String(): ``apps/v1, Kind=Deployment``."""
        gv = f"{self.group}/{self.version}" if self.group else self.version
        return f"{gv}, Kind={self.kind}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def to_dict(self) -> dict:
        return {"group": self.group, "version": self.version, "kind": self.kind}


@dataclass(frozen=True)
class GroupVersionResource:
    group: str
    version: str
    resource: str

    def to_dict(self) -> dict:
        return {"group": self.group, "version": self.version, "resource": self.resource}
