"""Who asks, and how: the context a request carries into the Store (user, dry run, field
manager, warnings to return), and how admission sees a write made through a subresource
with a kind of its own.

It sits below the Store, admission's contract and the subresource declarations, which
all take it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

from kapiserver.machinery.groupversion import GroupVersionKind
from kapiserver.machinery.user import UserInfo

# The managers recorded in managedFields for writes the server makes itself: its own, and
# those of the in-process controllers upstream runs in kube-controller-manager.
SERVER_MANAGER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"


def _nothing() -> None:
    return None


class SubresourceView(NamedTuple):
    """How admission sees a write made through a subresource with a kind of its own
    (``deployments/scale`` takes a Scale): the parent object as that kind, and the parent
    with the changes mutating admission made to the view."""

    subresource: str
    kind: GroupVersionKind
    to_view: Callable[[dict], dict]
    # (the view after mutating admission, the parent) -> the parent, changed in place
    from_view: Callable[[dict, dict], None]


@dataclass
class Context:
    """Who asks, and how (dry run, field validation warnings to return)."""

    user: Optional[UserInfo] = None
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    # the field manager of this write (``?fieldManager=`` or derived from the User-Agent)
    field_manager: str = SERVER_MANAGER
    # the request computed the object's managedFields itself (server-side apply, scale):
    # the Store keeps them instead of recording an update
    managed_fields_set: bool = False
    # the request's options as admission shows them (``fieldManager``, ``fieldValidation``,
    # ``dryRun`` as given in the query); the Store adds kind and apiVersion per operation
    options: dict = field(default_factory=dict)
    # audit annotations admission added (kept for the request's audit event)
    audit_annotations: dict = field(default_factory=dict)
    # admission sees this update through a subresource's own kind (a Scale for ``/scale``)
    admission_view: Optional[SubresourceView] = None
    # the size of the write's work: its body's length, or the stored object's when that is larger
    # (``Store``'s ``_sized_for``); a large one is decoded, defaulted, recorded, validated and
    # encoded off the reactor
    body_size: int = 0
    # called when the write turns out to work on a large stored object: its request holds the
    # cyclic collector off while that object's decoded form lives (machinery/collector_pause.py)
    on_large_object: Callable[[], None] = _nothing
