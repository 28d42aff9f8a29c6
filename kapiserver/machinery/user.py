"""Who made a request: the authenticated user as every later filter sees it."""
from __future__ import annotations

from dataclasses import dataclass, field

AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
MASTERS_GROUP = "system:masters"
NODES_GROUP = "system:nodes"  # kubelets' group (upstream's user.NodesGroup)
# upstream's user.CredentialIDKey: which credential authenticated the request (audit, TokenReview)
CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id"


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


def with_authenticated_group(user: UserInfo) -> UserInfo:
    """``user`` in ``system:authenticated`` (upstream's AuthenticatedGroupAdder): unchanged for
    ``system:anonymous`` and for users already in it or in ``system:unauthenticated``."""
    if user.name == ANONYMOUS_USER or AUTHENTICATED_GROUP in user.groups or UNAUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(name=user.name, groups=(*user.groups, AUTHENTICATED_GROUP), uid=user.uid, extra=user.extra)
