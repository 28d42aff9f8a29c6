"""Who made a request: the authenticated user as every later filter sees it."""
from __future__ import annotations

from dataclasses import dataclass, field

AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
MASTERS_GROUP = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    """The user.Info of upstream: name, groups, uid and extra attributes."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The ``userInfo`` shape used by TokenReview, SubjectAccessReview and audit events."""
        out: dict = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            out["uid"] = self.uid
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS = UserInfo(name=ANONYMOUS_USER, groups=(UNAUTHENTICATED_GROUP,))
