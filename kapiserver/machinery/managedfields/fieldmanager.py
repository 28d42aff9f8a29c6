"""The field manager of one resource (and subresource): upstream's default chain.

For every write the server records who set which fields.  :meth:`FieldManager.update`
does it for creates, updates and non-apply patches; :meth:`FieldManager.apply`
is server-side apply.  Both follow upstream's managers, outermost first:

* version check: an applied configuration names this resource's apiVersion/kind;
* client-side-apply migration (manager ``kubectl`` only): conflicts on fields
  whose live value is what ``kubectl.kubernetes.io/last-applied-configuration``
  holds are not conflicts, and a successful apply rewrites that annotation;
* ``before-first-apply``: an object without managedFields gets them, owned by
  that manager, before its first apply; a plain update does not start tracking;
* the update-manager cap: more than 10 update entries fold the oldest into
  ``ancient-changes``;
* the manager identity (name, operation, API version, subresource); an update
  is merged into its manager's earlier entry and stamps its time;
* metadata the server owns (name, uid, resourceVersion...) is never owned.

The objects given here are plain dicts; they are not modified.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Hashable, Optional

import orjson

from kapiserver.machinery import errors, meta
from kapiserver.machinery.managedfields import entries, typed
from kapiserver.machinery.managedfields.conflicts import conflict_error
from kapiserver.machinery.managedfields.entries import APPLY, UPDATE, Managed, ManagerKey, manager_key
from kapiserver.machinery.managedfields.fieldpath import Set, VersionedSet, go_json
from kapiserver.machinery.managedfields.schema import TypeRef
from kapiserver.machinery.managedfields.updater import Conflicts, Managers, SetFilter, Updater

MAX_UPDATE_MANAGERS = 10
BEFORE_FIRST_APPLY = "before-first-apply"
ANCIENT_CHANGES = "ancient-changes"
UNKNOWN_MANAGER = "unknown"
CSA_MANAGER = "kubectl"  # the manager kubectl applies with; its conflicts may be settled by the annotation
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024

# the update in progress, before it is merged into its manager's entry
_CURRENT_OPERATION = ManagerKey("current-operation", "", "", "")

_STRIPPED = Set.of(("f:apiVersion",), ("f:kind",), ("f:metadata",),
                   *(("f:metadata", "f:" + name) for name in (
                       "name", "namespace", "creationTimestamp", "selfLink", "uid", "clusterName", "generation",
                       "managedFields", "resourceVersion")))


def without_managed_fields(obj: Optional[dict]) -> dict:
    """A shallow view of ``obj`` without metadata.managedFields/resourceVersion (what is compared)."""
    return meta.without_metadata(obj, ("managedFields", "resourceVersion")) if obj else {}


def gvk_string(api_version: Any, kind: Any) -> str:
    """Go's GroupVersionKind.String(): ``apps/v1, Kind=Deployment``, ``/v1, Kind=Pod``."""
    api_version = api_version if isinstance(api_version, str) else ""
    kind = kind if isinstance(kind, str) else ""
    group, _, version = api_version.rpartition("/")
    if api_version.count("/") > 1:
        group, version = "", ""
    return f"{group}/{version}, Kind={kind}"


def _object_gvknn(obj: dict) -> str:
    found = obj.get("metadata")
    md: dict = found if isinstance(found, dict) else {}
    return f"{md.get('namespace') or ''}/{md.get('name') or ''}; {gvk_string(obj.get('apiVersion'), obj.get('kind'))}"


class FieldManager:
    def __init__(self, root: TypeRef, api_version: str, kind: str, subresource: str = "",
                 reset_fields: Optional[SetFilter] = None, shape: Optional[Callable[[Any], Any]] = None,
                 now: Callable[[], str] = meta.now_rfc3339, max_update_managers: int = MAX_UPDATE_MANAGERS) -> None:
        self.root = root
        # built-in kinds: objects are compared in the shape of their Go type (see goshape)
        self.shape = shape or _as_is
        # the shape of no object (a create's live side), made once: comparisons only read it
        self._no_object = self.shape({})
        self.api_version = api_version
        self.kind = kind
        self.subresource = subresource
        self.now = now
        self.max_update_managers = max_update_managers
        self.updater = Updater(root, reset_fields, manager_order=_identifier)

    # ------------------------------------------------------------ update

    def update(self, live: Optional[dict], new: dict, requested: Any, manager: str) -> Optional[list]:
        """The managedFields to store with ``new``, written over ``live`` (None on create).

        ``requested`` is the managedFields the request carried (the client
        may replace or clear them on the main resource); ``new`` and ``live``
        may carry managedFields too, they are ignored.
        """
        managed = self._live_or_requested(live, requested)
        if not managed.fields and live is not None:
            return None  # an existing object nobody tracked: only an apply starts tracking it
        with typed.memo():
            live_shape = self.shape(without_managed_fields(live)) if live else self._no_object
            managed = self._update(live_shape, self.shape(without_managed_fields(new)), managed, manager)
            return entries.encode(managed)

    def _live_or_requested(self, live: Optional[dict], requested: Any) -> Managed:
        live_entries = ((live or {}).get("metadata") or {}).get("managedFields")
        if not self.subresource:
            if entries.is_reset(requested):
                return Managed()
            try:
                managed = entries.decode(requested)
            except entries.ManagedFieldsError:
                managed = Managed()
            if managed.fields:
                return managed
        try:
            return entries.decode(live_entries)
        except entries.ManagedFieldsError:
            return Managed()

    def _update(self, live: dict, new: dict, managed: Managed, manager: str) -> Managed:
        """Update, with the update-manager cap, identity, time and stripped metadata."""
        key = manager_key(manager or UNKNOWN_MANAGER, UPDATE, self.api_version, self.subresource)
        fields = self.updater.update(live, new, self.api_version, managed.fields, _CURRENT_OPERATION)
        fields = _strip(fields, _CURRENT_OPERATION)
        times = dict(managed.times)
        current = fields.pop(_CURRENT_OPERATION, None)
        if current is not None:
            previous = fields.get(key)
            union = current.set if previous is None else current.set.union(previous.set)
            fields[key] = VersionedSet(union, current.api_version, current.applied)
            times[key] = self.now()
        return self._cap(Managed(fields, times))

    def _cap(self, managed: Managed) -> Managed:
        """At most ``max_update_managers`` update entries: the oldest fold into ``ancient-changes``."""
        updaters = [k for k, vs in managed.fields.items() if not vs.applied]
        if len(updaters) <= self.max_update_managers:
            return managed
        fields, times = dict(managed.fields), dict(managed.times)
        updaters.sort(key=lambda k: (entries.time_seconds(times.get(k)), _identifier(k)))
        first_of_version: dict[str, Hashable] = {}
        length = len(updaters)
        for k in updaters:
            if length <= self.max_update_managers:
                break
            vs = fields[k]
            version = vs.api_version
            bucket = ManagerKey(ANCIENT_CHANGES, UPDATE, version, "")
            first = first_of_version.get(version)
            if first is None:
                first_of_version[version] = k
                continue
            if bucket not in fields:
                fields[bucket] = fields.pop(first)
            fields[bucket] = VersionedSet(vs.set.union(fields[bucket].set), vs.api_version, vs.applied)
            del fields[k]
            length -= 1
            times[bucket] = times.get(k)
        return Managed(fields, times)

    # ------------------------------------------------------------ apply

    def apply(self, live: dict, config: Any, manager: str, force: bool) -> tuple[dict, Optional[list]]:
        """Server-side apply of ``config`` by ``manager`` onto ``live`` (``{}`` to create).

        Returns the new object (``live`` unchanged when the apply changes
        nothing) and its managedFields.  Raises StatusError: 400 for a
        configuration of another kind or carrying managedFields, 409 for
        conflicts, and upstream's unnamed 500 for fields the schema does not
        declare or values of the wrong type.
        """
        if not isinstance(config, dict):
            raise errors.bad_request("error decoding YAML: the body must be an object")
        if config.get("apiVersion") != self.api_version or config.get("kind") != self.kind:
            raise errors.bad_request(f"invalid object type: {gvk_string(config.get('apiVersion'), config.get('kind'))}")
        try:
            managed = entries.decode(((live.get("metadata") or {}) if live else {}).get("managedFields"))
        except entries.ManagedFieldsError as e:
            # upstream: a 500 without a reason; it is the client's data, so a 400 here
            raise errors.bad_request(f"failed to decode managed fields: {e}") from None
        try:
            with typed.memo():
                obj, managed = self._apply_settling_conflicts(live, config, managed, manager, force)
        except Conflicts as c:
            raise conflict_error(c) from None
        if manager == CSA_MANAGER and _last_applied(obj) is not None:
            obj = _with_last_applied(obj, config)
        return obj, entries.encode(managed)

    def _apply_settling_conflicts(self, live: dict, config: dict, managed: Managed, manager: str, force: bool
                                  ) -> tuple[dict, Managed]:
        try:
            return self._apply(live, config, managed, manager, force)
        except Conflicts as c:
            if manager != CSA_MANAGER:
                raise
            allowed = self._allowed_by_last_applied(live)
            if allowed is None:
                raise
            remaining = [(m, p) for m, p in c.conflicts if not allowed.has(p)]
            if remaining:
                raise Conflicts(remaining) from None
            return self._apply(live, config, managed, manager, True)

    def _apply(self, live: dict, config: dict, managed: Managed, manager: str, force: bool
               ) -> tuple[dict, Managed]:
        live_view = without_managed_fields(live)
        if not managed.fields:
            managed = self._update(self._no_object, self.shape(live_view), managed, BEFORE_FIRST_APPLY)
        md = config.get("metadata")
        if isinstance(md, dict) and md.get("managedFields") is not None:
            raise errors.bad_request("metadata.managedFields must be nil")
        try:
            typed.validate(config, self.root)
        except typed.ValidationErrors as e:
            # upstream answers a 500 without a reason; it is the client's configuration: a 400 here
            raise errors.bad_request(f"failed to create typed patch object ({_object_gvknn(config)}): {e}") from None
        key = manager_key(manager, APPLY, self.api_version, self.subresource)
        new, fields = self.updater.apply(live_view, config, self.api_version, managed.fields, key, force)
        fields = _strip(fields, key)
        times = dict(managed.times)
        if new is not None:
            times[key] = self.now()
            obj = new
        else:
            obj = live_view
        return obj, Managed(fields, times)

    def _allowed_by_last_applied(self, live: dict) -> Optional[Set]:
        """Fields the last-applied annotation sets to their live values (None if it cannot tell)."""
        raw = _last_applied(live)
        if raw is None:
            return None
        try:
            last = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(last, dict) or last.get("apiVersion") != self.api_version:
            return None
        try:
            typed.validate(last, self.root)
        except typed.ValidationErrors:
            return None
        comparison = typed.compare(last, without_managed_fields(live), self.root)
        return (typed.to_field_set(last, self.root).difference(comparison.modified)
                .difference(comparison.added).difference(comparison.removed))


def _as_is(obj: Any) -> Any:
    return obj


def _identifier(key: Hashable) -> str:
    return key.identifier() if isinstance(key, ManagerKey) else str(key)


def _strip(fields: Managers, key: Hashable) -> Managers:
    vs = fields.get(key)
    if vs is None:
        return fields
    remaining = vs.set.difference(_STRIPPED)
    fields = dict(fields)
    if remaining.empty():
        del fields[key]
    else:
        fields[key] = vs.with_set(remaining)
    return fields


def _last_applied(obj: Optional[dict]) -> Optional[str]:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict):
        return None
    value = annotations.get(LAST_APPLIED)
    return value if isinstance(value, str) and value else None


def _with_last_applied(obj: dict, config: dict) -> dict:
    """``obj`` whose last-applied annotation now holds ``config`` (as kubectl writes it)."""
    applied = copy.deepcopy(config)
    applied_annotations = (applied.get("metadata") or {}).get("annotations")
    if isinstance(applied_annotations, dict):
        applied_annotations.pop(LAST_APPLIED, None)
    value = go_json(applied) + "\n"
    obj = dict(obj)
    md = dict(obj.get("metadata") or {})
    annotations = dict(md.get("annotations") or {})
    annotations[LAST_APPLIED] = value
    if sum(len(k) + len(v) for k, v in annotations.items() if isinstance(v, str)) > TOTAL_ANNOTATION_SIZE_LIMIT:
        del annotations[LAST_APPLIED]
    md["annotations"] = annotations
    obj["metadata"] = md
    return obj


# ------------------------------------------------------------------ manager names

FIELD_MANAGER_MAX_LENGTH = 128


def validate_field_manager(name: str, path: str = "fieldManager") -> list[errors.Cause]:
    """Upstream's ValidateFieldManager: at most 128 bytes, printable characters only."""
    return list(_field_manager_problems(name, path))


# Every write checks its manager's name, and the names in the entries it stores: the same few
# names, looked at character by character each time.
@functools.lru_cache(maxsize=256)
def _field_manager_problems(name: str, path: str) -> tuple[errors.Cause, ...]:
    causes = []
    if len(name.encode()) > FIELD_MANAGER_MAX_LENGTH:
        causes.append(errors.field_too_long(path, FIELD_MANAGER_MAX_LENGTH))
    position = 0
    for ch in name:
        if not _printable(ch):
            causes.append(errors.field_invalid(path, name, f"invalid character U+{ord(ch):04X} (at position {position})"))
        position += len(ch.encode())
    return tuple(causes)


def _printable(ch: str) -> bool:
    return ch == " " or ch.isprintable()


@functools.lru_cache(maxsize=256)  # (a server sees a few User-Agents, on every write)
def manager_from_user_agent(user_agent: str) -> str:
    """The manager of a request without ``fieldManager``: the User-Agent up to its first
    ``/``, printable characters only, cut at 128 bytes (``kubectl/v1.32.4 (linux/amd64)...``
    is ``kubectl``)."""
    out = []
    size = 0
    for ch in user_agent.split("/", 1)[0]:
        if not _printable(ch):
            continue
        n = len(ch.encode())
        if size + n > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(ch)
        size += n
    return "".join(out)
