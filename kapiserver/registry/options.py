"""Typed query options of list/watch and delete (metav1.ListOptions, DeleteOptions)."""
from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Optional

import orjson

from kapiserver.machinery import errors, strconv
from kapiserver.machinery.fields import FieldSelector, parse_field_selector
from kapiserver.machinery.labels import LabelSelector, parse_label_selector
from kapiserver.machinery.validation import FOREGROUND_FINALIZER, ORPHAN_FINALIZER

NOT_OLDER_THAN = "NotOlderThan"
EXACT = "Exact"
PROPAGATION_POLICIES = ("Orphan", "Background", "Foreground")


def query_arg(args: dict, name: str) -> Optional[str]:
    """The first value of a query parameter (``request.args``), or None when absent."""
    values = args.get(name.encode())
    if not values:
        return None
    return values[0].decode("utf-8", "replace")


def go_bool(value: Optional[str]) -> bool:
    """A bool query parameter as upstream decodes it (runtime.Convert_Slice_string_To_bool):
    true unless absent, ``0`` or ``false`` in any case (Go's EqualFold): ``t``, ``yes`` and
    even an empty value (``?watch=``) are true."""
    return value is not None and value != "0" and value.casefold() != "false"


def _bool_arg(args: dict, name: str) -> bool:
    return go_bool(query_arg(args, name))


def _int_arg(args: dict, name: str) -> Optional[int]:
    """An int64 parameter as strconv.ParseInt(value, 10, 64) reads it (Python's int() would
    also take spaces, underscores and non-ASCII digits); its error is upstream's 400 message."""
    value = query_arg(args, name)
    if value is None:
        return None
    try:
        return strconv.parse_int(value)  # the Go field is an int64
    except ValueError as e:
        raise errors.bad_request(str(e)) from None


@dataclass
class ListOptions:
    label_selector: LabelSelector
    field_selector: FieldSelector
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""
    resource_version_match: str = ""
    timeout_seconds: Optional[int] = None
    allow_watch_bookmarks: bool = False
    send_initial_events: Optional[bool] = None
    watch: bool = False

    @classmethod
    def from_args(cls, args: dict, watch: Optional[bool] = None) -> "ListOptions":
        """Parse query arguments; ``watch`` forces the watch flag (``/watch/`` paths)."""
        opts = cls(
            label_selector=parse_label_selector(query_arg(args, "labelSelector") or ""),
            field_selector=parse_field_selector(query_arg(args, "fieldSelector") or ""),
            limit=max(_int_arg(args, "limit") or 0, 0),  # upstream pages only for a limit above 0
            continue_token=query_arg(args, "continue") or "",
            resource_version=query_arg(args, "resourceVersion") or "",
            resource_version_match=query_arg(args, "resourceVersionMatch") or "",
            timeout_seconds=_int_arg(args, "timeoutSeconds"),
            allow_watch_bookmarks=_bool_arg(args, "allowWatchBookmarks"),
            watch=_bool_arg(args, "watch") if watch is None else watch,
        )
        sie = query_arg(args, "sendInitialEvents")
        if sie is not None:
            opts.send_initial_events = go_bool(sie)
        opts.set_defaults()
        opts.validate()
        return opts

    def set_defaults(self) -> None:
        """Upstream's SetListOptionsDefaults (the WatchList feature is on in v1.32): a watch from "now" or
        from the cache (resourceVersion "" or "0") that asks for neither sendInitialEvents nor a
        resourceVersionMatch is a watch-list, sendInitialEvents=true&resourceVersionMatch=NotOlderThan; so its
        options are validated as one (a continue token is refused) and it ends its initial events with a
        bookmark when it allows bookmarks."""
        if self.send_initial_events is not None or self.resource_version_match:
            return
        if self.watch and self.resource_version in ("", "0"):
            self.send_initial_events = True
            self.resource_version_match = NOT_OLDER_THAN

    @property
    def is_watch_list(self) -> bool:
        """Upstream's isListWatchRequest: initial events and bookmarks asked for (or defaulted)."""
        return bool(self.send_initial_events) and self.allow_watch_bookmarks

    def validate(self) -> None:
        """Upstream's ValidateListOptions (neither limit nor timeoutSeconds is checked: a negative limit
        does not page, a negative timeout ends a watch at once)."""
        causes = []
        if self.continue_token and self.resource_version and self.resource_version != "0":
            causes.append(errors.Cause(errors.FORBIDDEN, "specifying resource version is not allowed when using "
                                       "continue", "resourceVersion"))
        causes += self._watch_causes() if self.watch else self._list_causes()
        if causes:
            raise errors.invalid("ListOptions", "meta.k8s.io", "", causes)

    def _list_causes(self) -> list[errors.Cause]:
        """Upstream's ValidateListOptions for a list, in its order."""
        causes = []
        match = self.resource_version_match
        if match:
            if not self.resource_version:
                causes.append(errors.field_forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if self.continue_token:
                causes.append(errors.field_forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
            if match not in (EXACT, NOT_OLDER_THAN):
                causes.append(errors.field_not_supported("resourceVersionMatch", match, [EXACT, NOT_OLDER_THAN, ""]))
            if match == EXACT and self.resource_version == "0":
                causes.append(errors.field_forbidden(
                    "resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if self.send_initial_events is not None:
            causes.append(errors.field_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
        return causes

    def _watch_causes(self) -> list[errors.Cause]:
        """Upstream's validateWatchOptions (the WatchList feature is on in v1.32)."""
        causes = []
        match = self.resource_version_match
        if self.send_initial_events is not None:
            if match != NOT_OLDER_THAN:
                causes.append(errors.field_forbidden(
                    "resourceVersionMatch", f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
        if match:
            if self.send_initial_events is None:
                causes.append(errors.field_forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                    "provided"))
            if match != NOT_OLDER_THAN:
                causes.append(errors.field_not_supported("resourceVersionMatch", match, [NOT_OLDER_THAN]))
            if self.continue_token:
                causes.append(errors.field_forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"))
        return causes

    def parsed_resource_version(self) -> int:
        """The resourceVersion as a revision (0 when unset or "0")."""
        return parse_resource_version(self.resource_version)


def parse_resource_version(value: str) -> int:
    if not value:
        return 0
    try:
        rv = int(value)
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{value}"') from None
    if rv < 0 or rv >= 1 << 64:  # a uint64, as upstream parses it
        raise errors.bad_request(f'invalid resource version "{value}"')
    return rv


# ---------------------------------------------------------------- continue tokens


def encode_continue(revision: int, start_key: str) -> str:
    """An opaque token: the list revision and the next key (relative to the prefix)."""
    payload = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start_key})
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded))
        if data.get("v") != "meta.k8s.io/v1":
            raise ValueError("version")
        rv, start = int(data["rv"]), str(data["start"])
    except Exception:
        raise errors.bad_request("continue key is not valid: the continue token is malformed") from None
    return rv, start


# ---------------------------------------------------------------- delete


@dataclass
class DeleteOptions:
    grace_period_seconds: Optional[int] = None
    precondition_uid: str = ""
    precondition_resource_version: str = ""
    propagation_policy: str = ""
    orphan_dependents: Optional[bool] = None
    dry_run: bool = False
    # delete a stored object that cannot be decoded, without reading it (upstream's unsafe deletion)
    ignore_store_read_error: bool = False
    raw: dict = field(default_factory=dict)

    @classmethod
    def from_request(cls, args: dict, body: Optional[dict]) -> "DeleteOptions":
        body = body or {}
        pre = body.get("preconditions") or {}
        opts = cls(
            grace_period_seconds=body.get("gracePeriodSeconds", _int_arg(args, "gracePeriodSeconds")),
            precondition_uid=pre.get("uid") or "",
            precondition_resource_version=pre.get("resourceVersion") or "",
            propagation_policy=body.get("propagationPolicy") or query_arg(args, "propagationPolicy") or "",
            orphan_dependents=body.get("orphanDependents"),
            dry_run=bool(body.get("dryRun")) or bool(query_arg(args, "dryRun")),
            ignore_store_read_error=bool(body.get("ignoreStoreReadErrorWithClusterBreakingPotential"))
            or _bool_arg(args, "ignoreStoreReadErrorWithClusterBreakingPotential"),
            raw=body,
        )
        if opts.propagation_policy and opts.propagation_policy not in PROPAGATION_POLICIES:
            raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [errors.Cause(
                errors.NOT_SUPPORTED,
                f'Unsupported value: "{opts.propagation_policy}": supported values: "Foreground", '
                f'"Background", "Orphan"', "propagationPolicy")])
        if opts.propagation_policy and opts.orphan_dependents is not None:
            raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [errors.Cause(
                errors.INVALID, "orphanDependents and deletionPropagation cannot be both set",
                "propagationPolicy")])
        if opts.grace_period_seconds is not None and opts.grace_period_seconds < 0:
            opts.grace_period_seconds = 1  # upstream turns negative grace periods into 1
        return opts

    def _explicit_policy(self) -> str:
        """The propagation policy the request asked for ("" when it said nothing)."""
        if self.orphan_dependents is not None:
            return "Orphan" if self.orphan_dependents else "Background"
        return self.propagation_policy

    def gc_finalizers(self, finalizers: list[str]) -> list[str]:
        """The object's finalizers once this delete's propagation policy is applied.

        Orphan adds ``orphan``, Foreground adds ``foregroundDeletion``,
        Background drops both (the garbage collector then works after the
        object is gone); without a policy a GC finalizer the object already
        carries stays (upstream's deletionFinalizersForGarbageCollection).
        """
        policy = self._explicit_policy()
        if not policy:
            if ORPHAN_FINALIZER in finalizers:
                policy = "Orphan"
            elif FOREGROUND_FINALIZER in finalizers:
                policy = "Foreground"
        kept = [f for f in finalizers if f not in (ORPHAN_FINALIZER, FOREGROUND_FINALIZER)]
        if policy == "Orphan":
            kept.append(ORPHAN_FINALIZER)
        elif policy == "Foreground":
            kept.append(FOREGROUND_FINALIZER)
        return kept
