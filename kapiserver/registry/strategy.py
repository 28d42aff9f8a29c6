"""Per-kind behaviour of the generic Store (upstream's RESTCreateStrategy & co).

A kind overrides only what differs from the defaults.  Hooks mutate the
object dicts in place and return validation problems as lists of
:class:`~kapiserver.machinery.errors.Cause`; the Store turns a non-empty list
into a 422 Invalid.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional, Protocol

from kapiserver.machinery import errors
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.validation import DNS1123_SUBDOMAIN

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.registry.resource_type import ResourceType

# Top-level fields a status write keeps from the request (the rest comes from the stored object).
_STATUS_WRITABLE = ("apiVersion", "kind", "metadata", "status")
# upstream's metav1.ResetObjectMetaForStatus: metadata a status write may not change
RESET_OBJECT_META_FOR_STATUS = ("deletionTimestamp", "generation", "selfLink", "labels", "annotations",
                                "finalizers", "ownerReferences")

# Called once the write a begin_* hook prepared is done: True when it was stored.
FinishFunc = Callable[[bool], Awaitable[None]]


class ServerSettings(Protocol):
    """The server settings a strategy's :meth:`Strategy.bind` may read (the server's Config)."""

    service_cluster_ip_range: str


class Strategy:
    """Defaults shared by most kinds."""

    name_validation: str = DNS1123_SUBDOMAIN
    # PUT of a missing object creates it (upstream AllowCreateOnUpdate).
    allow_create_on_update: bool = False
    # PUT without metadata.resourceVersion is allowed (AllowUnconditionalUpdate).
    allow_unconditional_update: bool = True
    # metadata.generation is 1 on create and moves with the spec (generation_changes), as
    # upstream's PrepareForCreate/PrepareForUpdate set it for workloads, policies, CRDs and
    # custom resources.  Other kinds keep what the creating request sent (usually none).
    tracks_generation: bool = False

    def prepare_for_create(self, rtype: "ResourceType", obj: dict) -> None:
        """Clear what a client may not set on create (status behind a subresource)."""
        if rtype.has_status:
            obj.pop("status", None)

    def prepare_for_update(self, rtype: "ResourceType", new: dict, old: dict) -> None:
        """The main resource cannot change status when a status subresource exists."""
        if rtype.has_status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)

    # What a write to ``/status`` may change besides status, as upstream's status
    # strategies decide: built-in kinds reset only the spec (``new.Spec =
    # old.Spec``), so labels, annotations and other metadata changes are kept, except
    # the metadata fields named here; None resets everything but status (custom
    # resources).
    status_fixed_metadata: Optional[tuple[str, ...]] = ()

    def prepare_for_status_update(self, rtype: "ResourceType", new: dict, old: dict) -> None:
        """The status subresource changes status (and the metadata the kind allows)."""
        if self.status_fixed_metadata is None:
            keep_status = new.get("status")
            new.clear()
            new.update({k: copy.deepcopy(v) for k, v in old.items() if k != "status"})
            if keep_status is not None:
                new["status"] = keep_status
            return
        for key in [k for k in new if k not in _STATUS_WRITABLE]:
            if key not in old:
                del new[key]
        for key, value in old.items():
            if key not in _STATUS_WRITABLE:
                new[key] = copy.deepcopy(value)
        md, old_md = new.setdefault("metadata", {}), old.get("metadata") or {}
        for name in self.status_fixed_metadata:
            if name in old_md:
                md[name] = copy.deepcopy(old_md[name])
            else:
                md.pop(name, None)

    def prepare_for_subresource_update(self, rtype: "ResourceType", subresource: str, new: dict, old: dict) -> None:
        """Writes through an update-style subresource other than status
        (``namespaces/finalize``, ``pods/ephemeralcontainers``): what may change."""
        if subresource == "finalize":
            self.prepare_for_finalize_update(rtype, new, old)
            return
        raise errors.method_not_allowed()

    def prepare_for_finalize_update(self, rtype: "ResourceType", new: dict, old: dict) -> None:
        """``namespaces/{name}/finalize`` changes everything but status (upstream's
        namespaceFinalizeStrategy): the namespace controller drops ``spec.finalizers`` here."""
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)

    def validate_subresource_update(self, rtype: "ResourceType", subresource: str, new: dict,
                                    old: dict) -> list[Cause]:
        """Validation of a write through an update-style subresource (not status)."""
        return self.validate_update(rtype, new, old)

    def bind(self, rtype: "ResourceType", store: Any, config: Optional["ServerSettings"]) -> None:
        """Called once the server has built the Store serving ``rtype``: kinds whose
        hooks need other objects or settings (Services allocating cluster IPs) keep
        what they need here."""

    def default(self, rtype: "ResourceType", obj: dict) -> None:
        """Fill defaults (upstream's defaulting functions)."""

    def validate(self, rtype: "ResourceType", obj: dict) -> list[Cause]:
        """Kind-specific validation on create (metadata is validated by the Store)."""
        return []

    def validate_update(self, rtype: "ResourceType", new: dict, old: dict) -> list[Cause]:
        """Kind-specific validation on update; defaults to create validation."""
        return self.validate(rtype, new)

    def validate_status_update(self, rtype: "ResourceType", new: dict, old: dict) -> list[Cause]:
        """Validation of a write to the ``status`` subresource (upstream's status strategy);
        defaults to the update validation."""
        return self.validate_update(rtype, new, old)

    async def validate_async(self, rtype: "ResourceType", obj: dict, old: Optional[dict]) -> list[Cause]:
        """Validation that may need to leave the reactor thread (CRD CEL rules); ``old`` on update."""
        return []

    async def begin_create(self, rtype: "ResourceType", obj: dict, dry_run: bool) -> Optional[FinishFunc]:
        """Take what the object needs from shared state before it is stored (upstream's
        BeginCreate: Services allocate cluster IPs and node ports).  Runs after validation;
        the returned function learns whether the write succeeded (and gives back on failure)."""
        return None

    async def begin_update(self, rtype: "ResourceType", new: dict, old: dict,
                           dry_run: bool) -> Optional[FinishFunc]:
        """begin_create for an update (upstream's BeginUpdate); runs once per write attempt."""
        return None

    async def after_delete(self, rtype: "ResourceType", obj: dict) -> None:
        """The object was removed from storage (upstream's AfterDelete): give back what it held."""

    def generation_changes(self, rtype: "ResourceType", new: dict, old: dict) -> bool:
        """Whether an update raises metadata.generation by one.  For a kind that tracks its
        generation, when anything but metadata and status changed; others never do."""
        if not self.tracks_generation:
            return False

        def spec_part(o: dict) -> dict:
            return {k: v for k, v in o.items() if k not in ("metadata", "status", "apiVersion", "kind")}
        return spec_part(new) != spec_part(old)

    def delete_pending(self, rtype: "ResourceType", obj: dict) -> bool:
        """Whether a delete only marks the object (besides metadata.finalizers).

        Namespaces use it: while ``spec.finalizers`` is not empty a delete
        sets phase Terminating and the namespace controller finishes the job.
        May mutate ``obj`` (the object being marked) when it answers True, and then only
        as the mark shows it (an object already marked shows it too).
        """
        return False

    def graceful_delete_period(self, obj: dict, requested: Optional[int]) -> Optional[int]:
        """Upstream's RESTGracefulDeleteStrategy.CheckGracefulDelete: the grace period a delete of
        ``obj`` gets (``requested`` is the DeleteOptions' gracePeriodSeconds), or None for a kind
        deleted at once (every kind but pods).  A period of 0 still marks the object
        (deletionTimestamp) before it is removed, as upstream's two writes do."""
        return None

    def finalize_on_read(self, rtype: "ResourceType", obj: dict) -> None:
        """Adjust a stored object before it is returned (defaults added since it was stored)."""
