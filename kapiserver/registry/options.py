"""Typed query options of list/watch and delete (metav1.ListOptions, DeleteOptions)."""
from __future__ import annotations

import base64
import posixpath
from dataclasses import dataclass, field
from typing import Any, Optional

import orjson

from kapiserver.machinery import errors, gorepr, strconv
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
        does not page, a negative timeout ends a watch at once; a resourceVersion beside a continue
        token is the stored list's to refuse, after the token: :meth:`Store.list_stored`)."""
        causes = self._watch_causes() if self.watch else self._list_causes()
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
        return strconv.parse_uint(value)  # as upstream's versioner (Python's int() takes " 5", "+5", "5_0")
    except ValueError:
        raise errors.bad_request(f'invalid resource version "{value}"') from None


# ---------------------------------------------------------------- continue tokens


def encode_continue(revision: int, start_key: str) -> str:
    """An opaque token: the list revision and the next key (relative to the prefix)."""
    payload = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start_key})
    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


_RAW_URL_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_GO_JSON_TYPES = {str: "string", bool: "bool", int: "number", float: "number", list: "array", dict: "object"}


def _raw_url_b64decode(token: str) -> bytes:
    """Go's base64.RawURLEncoding.DecodeString: no padding, ``\r`` and ``\n`` skipped; its error names the
    offset of the first byte it cannot take (``=`` included)."""
    raw = token.encode("utf-8", "surrogateescape")
    kept = bytearray()
    last = 0
    for i, byte in enumerate(raw):
        if byte in (0x0A, 0x0D):
            continue
        if byte not in _RAW_URL_ALPHABET:
            raise ValueError(f"illegal base64 data at input byte {i}")
        kept.append(byte)
        last = i
    if len(kept) % 4 == 1:  # a quantum of one character holds no whole byte
        raise ValueError(f"illegal base64 data at input byte {last}")
    return base64.urlsafe_b64decode(bytes(kept) + b"=" * (-len(kept) % 4))


def _go_quote_char(byte: int) -> str:
    """encoding/json's quoteChar of a byte (as the rune of that number)."""
    if byte in (0x27, 0x22):
        return "'\\''" if byte == 0x27 else "'\"'"
    return "'" + gorepr.quote(chr(byte))[1:-1] + "'"


def _continue_field(data: dict, name: str, go_type: str) -> Any:
    """A field of the token as Go's encoding/json fills continueToken's (``string`` or ``int64``)."""
    value = data.get(name)
    if value is None:
        return None
    if go_type == "string" and isinstance(value, str):
        return value
    if go_type == "int64" and isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, int) and -(1 << 63) <= value < 1 << 63:
            return value
        raise ValueError(f"json: cannot unmarshal number {value} into Go struct field continueToken.{name} of type "
                         f"int64")
    raise ValueError(f"json: cannot unmarshal {_GO_JSON_TYPES.get(type(value), 'number')} into Go struct field "
                     f"continueToken.{name} of type {go_type}")


def decode_continue(token: str) -> tuple[int, str]:
    """Upstream's storage.DecodeContinue, with the etcd store's 400 and messages: the revision of the list
    and its next key relative to the prefix, cleaned as a path so that it cannot reach above the prefix."""
    try:
        raw = _raw_url_b64decode(token)
        first = raw.lstrip(b" \t\r\n")[:1]
        if first and first not in b'{["-0123456789tfn':
            raise ValueError(f"invalid character {_go_quote_char(first[0])} looking for beginning of value")
        data = orjson.loads(raw)
        if data is not None and not isinstance(data, dict):
            raise ValueError(f"json: cannot unmarshal {_GO_JSON_TYPES.get(type(data), 'value')} into Go value of "
                             f"type storage.continueToken")
        data = data or {}
        version: str = _continue_field(data, "v", "string") or ""
        rv: int = _continue_field(data, "rv", "int64") or 0
        start: str = _continue_field(data, "start", "string") or ""
    except orjson.JSONDecodeError as e:
        raise _invalid_continue(f"continue key is not valid: {e.msg}") from None
    except ValueError as e:
        raise _invalid_continue(f"continue key is not valid: {e}") from None
    if version != "meta.k8s.io/v1":
        raise _invalid_continue(f"continue key is not valid: server does not recognize this encoded version {version}")
    if rv == 0:
        raise _invalid_continue("continue key is not valid: incorrect encoded start resourceVersion (version "
                                "meta.k8s.io/v1)")
    if not start:
        raise _invalid_continue("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
    key = start if start.startswith("/") else "/" + start
    cleaned = posixpath.normpath(key)
    if cleaned.startswith("//"):  # Go's path.Clean keeps one leading slash
        cleaned = "/" + cleaned.lstrip("/")
    if cleaned != key:
        raise _invalid_continue(f"continue key is not valid: {start}")
    return rv, cleaned[1:]


def _invalid_continue(reason: str) -> errors.StatusError:
    return errors.bad_request(f"invalid continue token: {reason}")


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

    def check_preconditions(self, kind: str, group: str, name: str, md: dict) -> None:
        """Upstream's BeforeDelete check of the preconditions against the object's metadata: a 409
        whose qualified resource is the kind."""
        if self.precondition_uid and self.precondition_uid != md.get("uid"):
            raise errors.conflict(kind, group, name, f"the UID in the precondition ({self.precondition_uid}) does "
                                  f"not match the UID in record ({md.get('uid', '')}). The object might have been "
                                  "deleted and then recreated")
        rv = self.precondition_resource_version
        if rv and rv != md.get("resourceVersion"):
            raise errors.conflict(kind, group, name, f"the ResourceVersion in the precondition ({rv}) does not "
                                  f"match the ResourceVersion in record ({md.get('resourceVersion', '')}). The "
                                  "object might have been modified")

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
