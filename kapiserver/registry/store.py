"""The generic registry Store: one for every resource type (upstream's genericregistry.Store).

It owns the object lifecycle (create, update, patch through a
compare-and-swap loop, delete with preconditions and finalizers, lists with
selectors and pagination, watches) and calls the kind's Strategy and the
admission chain at the points upstream does.  It knows nothing about HTTP.

Objects are stored as JSON without ``metadata.resourceVersion``; on every read
the resourceVersion is set from the key's mod revision.
"""
from __future__ import annotations

import builtins

import copy
import inspect
import sys
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, NoReturn, Optional, TypeVar

import orjson
from twisted.internet import defer, threads
from twisted.logger import Logger

from kapiserver.machinery import codec, cooperate, errors, meta, strconv, validation, zero_values
from kapiserver.machinery import labels as label_selectors
from kapiserver.machinery.fields import NOT_EQUALS, FieldSelector
from kapiserver.machinery.groupversion import GroupVersionKind
from kapiserver.machinery.managedfields.fieldmanager import FieldManager, without_managed_fields
from kapiserver.registry import fieldmanagers, stored_metadata
from kapiserver.registry.admission import CONNECT, CREATE, DELETE, UPDATE, AdmissionChain, Attributes
from kapiserver.registry.context import Context
from kapiserver.registry.leases import LeaseReuser
from kapiserver.registry.options import (EXACT, DeleteOptions, ListOptions, decode_continue, encode_continue,
                                         parse_resource_version)
from kapiserver.registry.resource_type import ResourceType
from kapiserver.storage import interface as st

log = Logger()

GENERATE_NAME_ATTEMPTS = 8
# kube-apiserver's default --etcd-prefix: its storage errors name a key below it, and so do ours
UPSTREAM_KEY_PREFIX = "/registry"
# Items read from storage per round trip while filling a selector-filtered page.
_LIST_BATCH = 500
# A write whose body is at least this large is decoded, records its managedFields and validates its
# object (walks of every field: seconds for 100,000 labels, data keys or env vars) on a thread, one such
# write at a time, so the reactor serves other requests meanwhile (issue 31: /readyz during a 3 MB body).
LARGE_BODY_ON_THREAD_BYTES = 256 * 1024
_large_body_threads = defer.DeferredSemaphore(1)
_T = TypeVar("_T")

async def on_thread_if_large(body_size: int, work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)``, on the large-body thread when the request's body is ``body_size`` bytes
    or more (:func:`on_large_body_thread`), else here."""
    if body_size >= LARGE_BODY_ON_THREAD_BYTES:
        return await on_large_body_thread(work, *args)
    return work(*args)


async def on_large_body_thread(work: Callable[..., _T], *args: Any) -> _T:
    """``work(*args)`` on a thread, one such work at a time: ``work`` touches only what it is given
    (what it changes, the request's own object, nothing else uses while the request waits for it)."""
    return await _large_body_threads.run(threads.deferToThread, work, *args)


async def _on_thread_if_large(ctx: Context, work: Callable[..., _T], *args: Any) -> _T:
    return await on_thread_if_large(ctx.body_size, work, *args)


def _sized_for(ctx: Context, kv: st.KeyValue) -> Context:
    """``ctx`` for a write to the stored ``kv`` (call it before decoding ``kv``): a small patch of a
    large object (a label on a Pod of 100,000 env vars) does the large object's work, decoding,
    patching, defaulting, managedFields, validation and encoding, so it is done where a large body's
    is (on the large-body thread: on the reactor it took 1-2 s), and its request is told."""
    if len(kv.value) <= ctx.body_size:
        return ctx
    if len(kv.value) >= LARGE_BODY_ON_THREAD_BYTES:
        ctx.on_large_object()
    return replace(ctx, body_size=len(kv.value))


def _mutated(mutate: Callable[[Optional[dict]], Any], current: dict, keeps_current: bool) -> Any:
    """``mutate`` of a guaranteed update given ``current`` (or a copy, unless it keeps it unchanged);
    the large object's on the large-body thread: a mutation touches only what it is given."""
    return mutate(current if keeps_current else codec.copy_json(current))


# Selector lists decode every stored object: give the reactor a turn this often.
_YIELD_EVERY = 500
# ListResult.memo: every value on the page decodes (a list of it need not check them again)
_EVERY_VALUE_READABLE = "every value readable"


_ABSENT: Any = object()
# a graceful deletion already under way that a delete does not shorten (upstream's pendingGraceful)
GRACE_PENDING: Any = object()


class CorruptObjectError(errors.StatusError):
    """A stored value that does not decode to an object: upstream's StorageError "corrupt object" (500)."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(500, "InternalError",
                         f"Internal error occurred: StorageError: corrupt object, Code: 7, Key: {key}, "
                         f"ResourceVersion: 0, AdditionalErrorMsg: {why}",
                         {"causes": [{"reason": "UnexpectedServerResponse", "message": f"corrupt object at {key}: {why}"}]})
        self.key = key
        self.why = why


def decode(kv: st.KeyValue) -> dict:
    """A stored object, with its resourceVersion; CorruptObjectError when the value is not one."""
    try:
        obj = orjson.loads(kv.value)
    except orjson.JSONDecodeError as e:
        raise CorruptObjectError(kv.key, f"invalid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise CorruptObjectError(kv.key, f"the stored value is a JSON {type(obj).__name__}, not an object")
    md = obj.setdefault("metadata", {})
    if not isinstance(md, dict):
        raise CorruptObjectError(kv.key, "metadata is not an object")
    md["resourceVersion"] = str(kv.mod_revision)
    if kv.encodings is None:
        object.__setattr__(kv, "encodings", st.DECODES)
    return obj


# Below this size orjson decodes a whole value faster than the metadata scan reads its metadata
# (1.7 against 4 µs for a 1 KB ConfigMap; 45 against 5 µs at 16 KB).
SCAN_METADATA_FROM_BYTES = 4096


def decode_metadata(kv: st.KeyValue) -> dict:
    """The ``metadata`` of the object ``kv`` holds, without ``managedFields``, with its
    resourceVersion (as :func:`decode` sets it), decoding no more of a large value than that
    when it can (:mod:`~kapiserver.registry.stored_metadata`); a fresh dict the caller
    owns.  CorruptObjectError when the value is not an object."""
    md = stored_metadata.scan_metadata(kv.value) if len(kv.value) >= SCAN_METADATA_FROM_BYTES else None
    if md is None:
        md = decode(kv)["metadata"]
        md.pop("managedFields", None)
    md["resourceVersion"] = str(kv.mod_revision)
    return md


def readable(kv: st.KeyValue, warnings: Optional[list[str]] = None) -> Optional[dict]:
    """The object ``kv`` holds, or None when it is corrupt (logged, and named in ``warnings``)."""
    try:
        return decode(kv)
    except CorruptObjectError as e:
        log.error("skipping corrupt object at {key}: {why}", key=e.key, why=e.why)
        if warnings is not None:
            warnings.append(f"skipped the corrupt object stored at {e.key} ({e.why}); delete it with "
                            f"ignoreStoreReadErrorWithClusterBreakingPotential=true")
        return None


# The watch cache's index of every label: an object is found under ``key=value`` for each of its
# labels (neither a label's key nor its value can hold a "=").
LABELS_INDEX = "labels"


def labels_of(kv: st.KeyValue) -> tuple[str, ...]:
    """The index values of ``kv``'s labels, ``key=value`` each (interned: objects share them)."""
    labels = decode_metadata(kv).get("labels")
    if not labels or not isinstance(labels, dict):
        return ()
    return tuple(sys.intern(f"{key}={value}") for key, value in labels.items() if isinstance(value, str))

# Label operators whose values are all a matching object can have.
_LABEL_VALUES_OPERATORS = (label_selectors.EQUALS, label_selectors.DOUBLE_EQUALS, label_selectors.IN)


def _readable_pairs(kvs: list, warnings: Optional[list[str]] = None) -> list[tuple[st.KeyValue, dict]]:
    return [(kv, obj) for kv in kvs if (obj := readable(kv, warnings)) is not None]


def encode(obj: dict) -> bytes:
    md = obj.get("metadata") or {}
    if "resourceVersion" in md:
        md = dict(md)
        del md["resourceVersion"]
        obj = dict(obj, metadata=md)
    return orjson.dumps(obj)


def _only_times_differ(new: dict, old: dict) -> bool:
    """The objects differ only in the times of their managedFields entries."""
    if new.keys() != old.keys() or any(value != old[k] for k, value in new.items() if k != "metadata"):
        return False  # most updates change something outside metadata: told without copying it
    new_entries = new["metadata"].get("managedFields")
    old_entries = old["metadata"].get("managedFields")
    if not new_entries or not old_entries or len(new_entries) != len(old_entries):
        return False
    if all(n.get("time") == o.get("time") for n, o in zip(new_entries, old_entries)):
        return False
    if any({**n, "time": None} != {**o, "time": None} for n, o in zip(new_entries, old_entries)):
        return False
    return without_managed_fields(new) == without_managed_fields(old)


def _delete_options(opts: DeleteOptions, ctx: Context) -> dict:
    """The DeleteOptions admission shows: the body's, with what the query set."""
    out: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
    out.update({k: v for k, v in opts.raw.items() if k not in ("kind", "apiVersion")})
    if opts.grace_period_seconds is not None:
        out.setdefault("gracePeriodSeconds", opts.grace_period_seconds)
    if opts.propagation_policy:
        out.setdefault("propagationPolicy", opts.propagation_policy)
    if ctx.options.get("dryRun"):
        out.setdefault("dryRun", ctx.options["dryRun"])
    return out


def too_old(requested: int, compacted: int) -> errors.StatusError:
    return errors.expired(f"too old resource version: {requested} ({compacted})")


@dataclass(eq=False, repr=False)
class StoredList:
    """A list as read from storage: its ListMeta and its items, each a stored
    ``KeyValue`` (decoded by :meth:`external` when needed) or, for kinds converted
    asynchronously, the converted object itself."""

    kind: str
    api_version: str
    metadata: dict
    items: list
    store: "Store"
    # the watch cache's memo of the page these items are, whole (ListResult.memo), if they are one
    memo: Optional[dict] = None

    def external(self, item: Any) -> dict:
        """One item as clients see it (a fresh dict for a stored value)."""
        return item if isinstance(item, dict) else self.store._from_kv(item)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "apiVersion": self.api_version, "metadata": self.metadata,
                "items": [self.external(item) for item in self.items]}


def _check_resource_version(value: Any) -> None:
    """A written object's resourceVersion must parse as upstream's versioner parses it
    (strconv.ParseUint).  kube-apiserver answers a 500 with strconv's error; this is the 400
    it means, in the same words."""
    if value and isinstance(value, str):
        try:
            strconv.parse_uint(value)
        except ValueError as e:
            raise errors.bad_request(str(e)) from None


class WriteBase:
    """The value an update or delete works from, and whether it is surely the current one.

    As upstream's cacher does, a write starts from the watch cache's copy when there is
    one: the compare-and-swap on its mod revision catches a copy that is behind (the
    conflict brings the current value: :meth:`replace`), and a refusal or a no-op decided
    on the copy is checked against the backend before it stands (:meth:`decision_stands`).
    That spares etcd a read per update and delete.
    """

    def __init__(self, storage: st.Storage, key: str, kv: Optional[st.KeyValue], current: bool) -> None:
        self.storage = storage
        self.key = key
        self.kv = kv
        self.current = current

    def replace(self, kv: Optional[st.KeyValue]) -> None:
        """The backend's current value (a conflict's answer, or None when the key is gone)."""
        self.kv, self.current = kv, True

    async def decision_stands(self) -> bool:
        """After a refusal or a no-op decided on :attr:`kv`: True when that was the current
        value; otherwise :attr:`kv` is now the current one, to decide on again."""
        if self.current:
            return True
        assert self.kv is not None
        latest = await self.storage.get(self.key)
        if latest is not None and latest.mod_revision == self.kv.mod_revision:
            self.current = True
            return True
        self.replace(latest)
        return False


@dataclass(eq=False, repr=False)
class StoredObject:
    """One object as read from storage, for a GET: its stored value, decoded only when
    the answer needs the object (its compact JSON and protobuf are memoized on the value,
    as a list's items are: ``endpoints/list_encoding.py``).

    A write's answer is one too (:meth:`WriteResult.answer`): then ``decoded`` is the object
    the write stored, as a read of the value shows it, so the answer encodes it without
    parsing the bytes just stored."""

    item: st.KeyValue
    store: "Store"
    decoded: Optional[dict] = None

    def external(self) -> dict:
        """The object as clients see it (a dict of this answer's own)."""
        if self.decoded is not None:
            return self.decoded
        return self.store._from_kv(self.item)


@dataclass(eq=False, repr=False)
class WriteResult:
    """What a create or update did: the object as clients see it, whether the update
    created it, and the value stored (None when nothing was: a dry run, an update that
    changed nothing, an update that removed the object, a kind that stores nothing)."""

    obj: dict
    store: Optional["Store"]  # None: a kind that stores nothing (reviews, bindings)
    created: bool = False
    stored: Optional[st.KeyValue] = None
    # ``obj`` is what a read of ``stored`` shows (no storage conversion in between), so
    # the answer need not decode the stored bytes again
    read_back: bool = False

    def answer(self) -> "StoredObject | dict":
        """What the write's handler answers: the value stored, as a GET reads it (upstream
        answers a write with the object decoded from what etcd stored).  Its encoding is
        then memoized on the value, which the embedded store's watch cache holds too, so
        the next GET and list of the object reuse the bytes.  ``obj`` itself when nothing
        was stored, or for kinds converted asynchronously (nothing to memoize on)."""
        if self.stored is None or self.store is None or self.store.rtype.convert_from_storage_async is not None:
            return self.obj
        return StoredObject(self.stored, self.store, self.obj if self.read_back else None)


class Store:
    def __init__(self, rtype: ResourceType, storage: st.Storage, admission: Optional[AdmissionChain] = None,
                 leases: Optional[LeaseReuser] = None) -> None:
        self.rtype = rtype
        self.storage = storage
        self.admission = admission or AdmissionChain()
        self.leases = leases or LeaseReuser(storage)
        self._field_managers: dict[str, FieldManager] = {}
        # names this Store's way of turning stored values into objects in the encodings
        # memoized on them (KeyValue.encodings): a CRD served anew gets a new Store
        self.encoding_token = object()
        # the watch cache's index functions of fields, by field (Store.index_query)
        self._field_index_functions: dict[str, st.IndexValue] = {}

    # ------------------------------------------------------------ helpers

    @property
    def strategy(self):
        return self.rtype.strategy

    def _not_found(self, name: str) -> errors.StatusError:
        return errors.not_found(self.rtype.plural, self.rtype.group, name)

    def _conflict(self, name: str, why: str = errors.CONFLICT_MESSAGE) -> errors.StatusError:
        return errors.conflict(self.rtype.plural, self.rtype.group, name, why)

    def _precondition_failed(self, key: str, name: str, why: str) -> errors.StatusError:
        """A write's storage precondition that failed, as upstream's storage reports it (an
        invalid-object StorageError, made a 409 by the registry)."""
        return self._conflict(name, errors.storage_invalid_object(UPSTREAM_KEY_PREFIX + key,
                                                                  f"Precondition failed: {why}"))

    def _invalid(self, name: str, causes: list[errors.Cause]) -> errors.StatusError:
        return errors.invalid(self.rtype.kind, self.rtype.group, name, causes)

    async def _refuse(self, name: str, causes: list[errors.Cause]) -> NoReturn:
        """Raise the 422 of a write's validation.  Its Status (an object with 400,000 bad
        finalizers has as many causes, and a message listing them all, as upstream's) is rendered
        as it is written, in slices (``errors.InvalidError``)."""
        raise self._invalid(name, causes)

    def key(self, namespace: str, name: str) -> str:
        return self.rtype.storage_key(namespace, name)

    def field_manager(self, subresource: str = "") -> FieldManager:
        """The field manager of writes through ``subresource`` (built on first use)."""
        found = self._field_managers.get(subresource)
        if found is None:
            found = self._field_managers[subresource] = fieldmanagers.field_manager(self.rtype, subresource)
        return found

    async def _managed_fields(self, old: Optional[dict], new: dict, requested: Any, subresource: str,
                              ctx: Context) -> Optional[list]:
        """The managedFields to store with ``new``: those the request computed, or the update
        recorded from ``new`` as the request gave it, defaulted.  Called before mutating
        admission and the strategy's preparation, as upstream records it (what those add -
        generated selectors, a namespace's finalizer, a pod's service account - is nobody's);
        the entries are set after them (:meth:`_set_managed_fields`), so admission sees the
        object without them.  Only reads ``old`` and ``new`` (a large body's on a thread).  On failure the object is written without
        managedFields, as upstream."""
        if requested is _ABSENT:
            requested = None
        if ctx.managed_fields_set:
            return requested
        manager = self.field_manager(subresource)
        try:
            return await _on_thread_if_large(ctx, manager.update, old, new, requested, ctx.field_manager)
        except Exception:
            log.failure("failed to update managedFields of {kind} {name}", kind=self.rtype.kind,
                        name=new["metadata"].get("name", ""))
            return None

    @staticmethod
    def _set_managed_fields(md: dict, entries: Optional[list]) -> None:
        if entries:
            md["managedFields"] = entries
        else:
            md.pop("managedFields", None)

    def _attributes(self, operation: str, namespace: str, name: str, obj: Optional[dict], old: Optional[dict],
                    subresource: str, ctx: Context, options_kind: str = "") -> Attributes:
        """What admission sees of this request; warnings and audit annotations go to the request's."""
        options = {"kind": options_kind, "apiVersion": "meta.k8s.io/v1", **ctx.options} if options_kind else None
        return Attributes(operation, self.rtype, namespace, name, obj, old, subresource, ctx.user, ctx.dry_run,
                          options, warnings=ctx.warnings, audit_annotations=ctx.audit_annotations)

    async def admit_subresource(self, operation: str, namespace: str, name: str, subresource: str, obj: dict,
                                kind: GroupVersionKind, ctx: Context, options_kind: str = "") -> dict:
        """Admission of a create or connect subresource (``pods/eviction``, ``pods/exec``): both
        phases, on the subresource's own object (changed in place by mutating admission)."""
        attrs = self._attributes(operation, namespace, name, obj, None, subresource, ctx, options_kind)
        if operation == CONNECT:
            attrs.options = None
        attrs.kind = kind
        await self.admission.admit(attrs)
        await self.admission.validate(attrs)
        return obj

    def _stamp_type(self, obj: dict) -> dict:
        return self.rtype.stamp_type(obj)

    def to_external(self, obj: dict) -> dict:
        """A stored object as this resource type's clients see it."""
        if self.rtype.convert_from_storage is not None:
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            obj = self.rtype.convert_from_storage(obj)
            if rv is not None:
                obj.setdefault("metadata", {})["resourceVersion"] = rv
        self._stamp_type(obj)
        self.strategy.finalize_on_read(self.rtype, obj)
        return obj

    def _fill_zero_status(self, obj: dict) -> None:
        """Store a built-in kind's status as Go's encoding of the typed object shows it
        (a Service's ``status: {loadBalancer: {}}``), so every read returns it."""
        if not self.rtype.is_crd:
            zero_values.fill_status(obj)

    def _from_kv(self, kv: st.KeyValue) -> dict:
        return self.to_external(decode(kv))

    def _encode(self, obj: dict) -> bytes:
        """The stored form of an object of this type."""
        if self.rtype.convert_to_storage is not None:
            obj = self.rtype.convert_to_storage(obj)
        return encode(obj)

    # Asynchronous conversion (ResourceType.convert_*_async, e.g. CRD conversion
    # webhooks).  Every read and write below goes through these; without async
    # hooks they are the synchronous helpers above, so built-in kinds pay nothing.

    async def externals(self, objs: list[dict]) -> list[dict]:
        """Decoded stored objects as clients see them: one conversion call for the batch."""
        convert = self.rtype.convert_from_storage_async
        if convert is None:
            return [self.to_external(obj) for obj in objs]
        rvs = [(obj.get("metadata") or {}).get("resourceVersion") for obj in objs]
        converted = await convert(objs) if objs else []
        for obj, rv in zip(converted, rvs):
            if rv is not None:
                obj.setdefault("metadata", {})["resourceVersion"] = rv
            self._stamp_type(obj)
            self.strategy.finalize_on_read(self.rtype, obj)
        return converted

    async def _external(self, obj: dict) -> dict:
        if self.rtype.convert_from_storage_async is None:
            return self.to_external(obj)
        return (await self.externals([obj]))[0]

    async def _from_kv_async(self, kv: st.KeyValue) -> dict:
        """The stored object as clients see it; a large one (a Pod of 100,000 env vars decodes in
        ~0.2 s) is decoded on the large-body thread, as a large body is, so the reactor serves
        meanwhile (issue 31: an update or delete of it stalled every other request)."""
        if self.rtype.convert_from_storage_async is None:
            return await on_thread_if_large(len(kv.value), self._from_kv, kv)
        return (await self.externals([await on_thread_if_large(len(kv.value), decode, kv)]))[0]

    async def _encode_async(self, obj: dict, size: int) -> bytes:
        """The stored form of ``obj``, of about ``size`` bytes (the body's or the stored value's): a
        large one is encoded on the large-body thread, as it was decoded, so that the turn that
        stores it is not also spent encoding it."""
        convert = self.rtype.convert_to_storage_async
        if convert is None:
            return await on_thread_if_large(size, self._encode, obj)
        return await on_thread_if_large(size, encode, (await convert([obj]))[0])

    # ------------------------------------------------------------ get

    async def get(self, namespace: str, name: str, resource_version: str = "") -> dict:
        return await self._from_kv_async(await self._read(namespace, name, resource_version))

    async def get_stored(self, namespace: str, name: str, resource_version: str = "") -> "StoredObject | dict":
        """What the GET handler answers: the stored value (:class:`StoredObject`), or the
        object itself for kinds converted asynchronously (nothing to memoize on)."""
        kv = await self._read(namespace, name, resource_version)
        if self.rtype.convert_from_storage_async is not None:
            return await self._from_kv_async(kv)
        return StoredObject(kv, self)

    async def _read(self, namespace: str, name: str, resource_version: str) -> st.KeyValue:
        parse_resource_version(resource_version)  # reject malformed values
        key = self.key(namespace, name)
        # resourceVersion=0: any recent state will do, so the watch cache answers
        kv = await (self.storage.get_cached(key) if resource_version == "0" else self.storage.get(key))
        if kv is None:
            raise self._not_found(name)
        return kv

    # ------------------------------------------------------------ list

    def field_selector(self, opts: ListOptions) -> FieldSelector:
        return self.rtype.field_selector(opts)

    def watch_scope(self, namespace: str, opts: ListOptions) -> tuple[str, Optional[str]]:
        """The narrowest key prefix holding every object a watch with ``opts`` can match,
        and the key suffix they all end with when the prefix cannot say (or None).

        A field selector pinning ``metadata.namespace`` (and ``metadata.name``) narrows a
        watch, as upstream's cacher scopes it, so the watcher is not handed, and does not
        decode, every other object's events.  A name pinned without a namespace (the API
        server's own kube-root-ca.crt informer watches cluster-wide ConfigMaps this way)
        cannot be in the prefix: events of keys without that last segment are passed over
        before they are decoded.  The selectors still decide.
        """
        fields = opts.field_selector
        if self.rtype.namespaced and not namespace:
            namespace = fields.requires_exact_match("metadata.namespace") or ""
        prefix = self.rtype.storage_prefix(namespace)
        name = fields.requires_exact_match("metadata.name") or ""
        if namespace or not self.rtype.namespaced:
            return prefix + name, None
        return prefix, ("/" + name if name else None)

    def matcher(self, opts: ListOptions) -> Optional[Callable[[dict], bool]]:
        return self.rtype.matcher(opts)

    def index_query(self, opts: ListOptions) -> Optional[tuple[str, st.IndexValue, frozenset[str]]]:
        """An index that holds every object the list options' selectors can match: (its name, its
        function, the values to look up), or None when they pin no field or label to a few values.

        A field pinned to a value comes first (``spec.nodeName`` of a node's pods), then a label
        (``key=value``, ``key in (...)``).  Not for kinds converted asynchronously (a webhook's
        answer decides what the selectors see).
        """
        if self.rtype.convert_from_storage_async is not None:
            return None
        for r in self.field_selector(opts).requirements:
            if r.operator != NOT_EQUALS and r.field != "metadata.namespace":
                return self._field_index_name(r.field), self._field_value_of(r.field), frozenset((r.value,))
        for req in opts.label_selector.requirements:
            if req.operator in _LABEL_VALUES_OPERATORS:
                return LABELS_INDEX, labels_of, frozenset(f"{req.key}={value}" for value in req.values)
        return None

    def cache_indexes(self) -> builtins.list[tuple[str, st.IndexValue]]:
        """The indexes the watch cache builds before the server is ready (:meth:`Storage.prepare
        <kapiserver.storage.interface.Storage.prepare>`): the kind's ``indexed_fields`` and, for
        such a kind (pods, which kubelets select by node and controllers by label), the index of
        every label; none for kinds converted asynchronously (see :meth:`index_query`)."""
        if self.rtype.convert_from_storage_async is not None or not self.rtype.indexed_fields:
            return []
        return [(self._field_index_name(name), self._field_value_of(name))
                for name in self.rtype.indexed_fields] + [(LABELS_INDEX, labels_of)]

    def label_indexes(self) -> builtins.list[tuple[str, st.IndexValue]]:
        """The index of every label of a kind without ``indexed_fields``, which the server builds
        once it is ready (in the background: decoding every object of every kind before readiness
        cost a restart at 100,000 ConfigMaps about as much as kube-apiserver's whole start)."""
        if self.rtype.convert_from_storage_async is not None or self.rtype.indexed_fields:
            return []
        return [(LABELS_INDEX, labels_of)]

    def _field_index_name(self, name: str) -> str:
        # by version: versions sharing the cache may read a field differently
        return f"field {self.rtype.api_version} {name}"

    def _field_value_of(self, name: str) -> st.IndexValue:
        """The index function of a field of this kind ("" when absent: as the selector compares)."""
        known = self._field_index_functions.get(name)
        if known is not None:
            return known

        def value_of(kv: st.KeyValue) -> Optional[str]:
            return self.rtype.field_getter(self.to_external(decode(kv)))(name) or ""
        self._field_index_functions[name] = value_of
        return value_of

    async def list(self, namespace: str, opts: ListOptions, warnings: Optional[list[str]] = None) -> dict:
        """The list as one object, every item decoded (controllers, deletecollection); a corrupt
        stored object is skipped (and named in ``warnings``)."""
        return (await self.list_stored(namespace, opts, warnings)).to_dict()

    async def list_stored(self, namespace: str, opts: ListOptions,
                          warnings: Optional[builtins.list[str]] = None) -> "StoredList":
        """The list with its items as stored: the REST list handler encodes them one by one
        (``StoredList``), so a big list never exists as decoded objects all at once. A corrupt
        stored object is skipped (and named in ``warnings``) before the answer starts."""
        if self.rtype.namespaced and not namespace:  # the namespace a field selector pins, if any
            namespace = self.field_selector(opts).requires_exact_match("metadata.namespace") or ""
        prefix = self.rtype.storage_prefix(namespace)
        matches = self.matcher(opts)
        indexed = self.index_query(opts) if matches is not None else None
        rev = 0
        start = ""
        if opts.continue_token:
            rev, start = decode_continue(opts.continue_token)
            if opts.resource_version and opts.resource_version != "0":  # the etcd store's check, a 400
                raise errors.bad_request("specifying resource version is not allowed when using continue")
            if rev < 0:
                rev = 0
        elif opts.resource_version and opts.resource_version != "0":
            wanted = parse_resource_version(opts.resource_version)
            if opts.resource_version_match == EXACT:
                rev = wanted
            else:
                current = await self.storage.current_revision()
                if wanted > current:
                    raise errors.StatusError(504, "Timeout", f"Too large resource version: {wanted}, "
                                             f"current: {current}", {"causes": [
                                                 {"reason": "ResourceVersionTooLarge",
                                                  "message": "Too large resource version"}],
                                                 "retryAfterSeconds": 1})
        # resourceVersion=0 without a continue token: any recent state (served from memory)
        any_state = opts.resource_version == "0" and not opts.continue_token
        items: list[Any] = []
        list_memo: Optional[dict] = None
        start_key = prefix + start if start else ""
        more = False
        next_key = ""
        remaining: Optional[int] = None
        read_rev = rev
        while True:
            batch = opts.limit if (opts.limit and not matches) else (_LIST_BATCH if opts.limit else 0)
            try:
                page: Optional[st.ListResult] = None
                if indexed is not None:
                    # the candidates from an index, all at once; None: the index cannot answer
                    page = await self.storage.list_indexed(prefix, *indexed, revision=read_rev,
                                                           start_key=start_key, any_state=any_state)
                    indexed = None
                if page is None and any_state:
                    page = await self.storage.list_cached(prefix, limit=batch, start_key=start_key)
                elif page is None:
                    page = await self.storage.list(prefix, revision=read_rev, limit=batch, start_key=start_key)
            except st.CompactedError as e:
                if opts.continue_token:
                    fresh = encode_continue(-1, start)
                    raise errors.expired(
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter, or use the continue token "
                        "in this response to retrieve the remainder of the results. Continuing with the "
                        "provided token results in an inconsistent list - objects that were created, "
                        "modified, or deleted between the time the first chunk was returned and now may "
                        "show up in the list.", fresh)
                raise too_old(read_rev, e.compacted)
            except st.FutureRevisionError as e:
                raise errors.StatusError(504, "Timeout", f"Too large resource version: {e.requested}, "
                                         f"current: {e.current}")
            read_rev = page.revision
            consumed = 0
            whole_page = not opts.limit and not items and not page.more
            if self.rtype.convert_from_storage_async is None and matches is None:
                if whole_page and page.memo is not None and page.memo.get(_EVERY_VALUE_READABLE):
                    # the watch cache's same page as before, every value checked then: the
                    # page is the list, and what was encoded of it whole is reused (list_encoding)
                    items, list_memo = page.items, page.memo
                    break
                # nothing to look at: the values themselves are the items, decoded when (and if)
                # an encoding of them is not already memoized; one never decoded is checked now
                for kv in page.items:
                    consumed += 1
                    if kv.encodings is None and readable(kv, warnings) is None:
                        continue
                    items.append(kv)
                    if opts.limit and len(items) >= opts.limit:
                        break
                    if consumed % _YIELD_EVERY == 0:
                        await cooperate.yield_to_reactor()
                if whole_page and page.memo is not None and len(items) == len(page.items):
                    page.memo[_EVERY_VALUE_READABLE] = True
                    list_memo = page.memo
            else:
                pairs = _readable_pairs(page.items, warnings)
                # one conversion call per storage page when conversion is asynchronous
                converted = (await self.externals([obj for _, obj in pairs])
                             if self.rtype.convert_from_storage_async is not None else None)
                by_key = {kv.key: (converted[i] if converted is not None else obj)
                          for i, (kv, obj) in enumerate(pairs)}
                for kv in page.items:
                    consumed += 1
                    obj = by_key.get(kv.key)
                    if obj is None:
                        continue  # corrupt
                    if converted is None:
                        obj = self.to_external(obj)
                    if matches is None or matches(obj):
                        # a converted object is kept; a decoded one is dropped (memory: the
                        # value is kept instead and decoded again when it is encoded)
                        items.append(obj if converted is not None else kv)
                        if opts.limit and len(items) >= opts.limit:
                            break
                    if consumed % _YIELD_EVERY == 0:
                        await cooperate.yield_to_reactor()
            if opts.limit and len(items) >= opts.limit:
                last_key = page.items[consumed - 1].key
                more = consumed < len(page.items) or page.more
                next_key = last_key[len(prefix):] + "\x00"
                if matches is None:
                    remaining = page.count - consumed
                break
            if not page.more or not page.items:
                break
            start_key = page.items[-1].key + "\x00"
        list_meta: dict[str, Any] = {"resourceVersion": str(read_rev)}
        if more:
            list_meta["continue"] = encode_continue(read_rev, next_key)
            if remaining is not None and remaining > 0:
                list_meta["remainingItemCount"] = remaining
        return StoredList(self.rtype.list_kind, self.rtype.api_version, list_meta, items, self, list_memo)

    # ------------------------------------------------------------ create

    def _validate_create(self, obj: dict) -> "builtins.list[errors.Cause]":
        return self._check_metadata(obj) + self.strategy.validate(self.rtype, obj)

    def _validate_update(self, new: dict, old: dict, subresource: str) -> "builtins.list[errors.Cause]":
        if subresource == "status":
            kind_causes = self.strategy.validate_status_update(self.rtype, new, old)
        elif subresource:
            kind_causes = self.strategy.validate_subresource_update(self.rtype, subresource, new, old)
        else:
            kind_causes = self.strategy.validate_update(self.rtype, new, old)
        return (self._check_metadata(new) + validation.validate_object_meta_update(new["metadata"], old["metadata"])
                + kind_causes)

    def _check_metadata(self, obj: dict) -> "builtins.list[errors.Cause]":  # (``list`` is a method here)
        return validation.validate_object_meta(obj.get("metadata") or {}, self.rtype.namespaced,
                                               self.strategy.name_validation)

    def _check_kind(self, obj: Any) -> dict:
        return self.rtype.check_kind(obj)

    def _check_namespace(self, obj: dict, namespace: str) -> None:
        md = meta.metadata(obj)
        if not self.rtype.namespaced:
            md.pop("namespace", None)  # (upstream's EnsureObjectNamespaceMatchesRequestNamespace clears it)
            return
        body_ns = md.get("namespace")
        if body_ns and namespace and body_ns != namespace:
            raise errors.namespace_mismatch()
        if namespace:
            md["namespace"] = namespace

    async def create(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> dict:
        """The created object (what :meth:`create_result` wrote, for callers in the process)."""
        return (await self.create_result(namespace, obj, ctx)).obj

    async def create_result(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> WriteResult:
        """Create ``obj`` (changed in place: it becomes the result's object).  The method kinds
        with their own create override."""
        ctx = ctx or Context()
        obj = self._check_kind(obj)
        self._check_namespace(obj, namespace)
        self._stamp_type(obj)
        md = meta.metadata(obj)
        requested_managed_fields = md.pop("managedFields", _ABSENT)
        for transient in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "selfLink"):
            md.pop(transient, None)
        if self.strategy.tracks_generation:
            md["generation"] = 1
        # upstream's order: the decoded (defaulted) object is recorded by the field manager and
        # goes through mutating admission, then the strategy prepares and validates it.  The one
        # defaulting of the write: a mutating webhook defaults what it patched (its redecode), and
        # admission plugins and the kind's preparation set complete values themselves, as upstream's
        await _on_thread_if_large(ctx, self.strategy.default, self.rtype, obj)  # (a Pod's every env var)
        managed_fields = await self._managed_fields(None, obj, requested_managed_fields, "", ctx)
        attrs = self._attributes(CREATE, namespace, md.get("name", ""), obj, None, "", ctx, "CreateOptions")
        await self.admission.admit(attrs)
        md = meta.metadata(obj)
        # again, as upstream's BeforeCreate: mutating admission may have changed them
        self._check_namespace(obj, namespace)
        self._stamp_type(obj)
        self.strategy.prepare_for_create(self.rtype, obj)
        self._set_managed_fields(md, managed_fields)
        generated = not md.get("name") and bool(md.get("generateName"))
        for attempt in range(GENERATE_NAME_ATTEMPTS if generated else 1):
            if generated:
                md["name"] = meta.generate_name(md["generateName"])
            causes = await _on_thread_if_large(ctx, self._validate_create, obj)
            causes += await self.strategy.validate_async(self.rtype, obj, None)
            if causes:
                await self._refuse(md.get("name") or md.get("generateName", ""), causes)
            finish = await self.strategy.begin_create(self.rtype, obj, ctx.dry_run)
            stored = False
            try:
                kv = await self._create_once(namespace, obj, attrs, ctx, generated)
                stored = kv is not None and not ctx.dry_run
            finally:
                if finish is not None:
                    await finish(stored)
            if kv is None:  # the generated name was taken: try another
                if attempt + 1 < GENERATE_NAME_ATTEMPTS:
                    continue
                break
            if ctx.dry_run:
                return WriteResult(obj, self)
            return await self._stored_result(obj, kv)
        raise errors.already_exists(self.rtype.plural, self.rtype.group, md.get("name", ""))

    async def _create_once(self, namespace: str, obj: dict, attrs: Attributes, ctx: Context,
                           generated: bool) -> Optional[st.KeyValue]:
        """Admit and store ``obj`` under its name: the new key (for a dry run: a stand-in
        that is not stored), or None when a generated name is taken already."""
        md = obj["metadata"]
        attrs.name = md["name"]
        await self.admission.validate(attrs)
        self._fill_zero_status(obj)
        md["uid"] = md.get("uid") or meta.new_uid()  # a strategy may need it first (Job selectors)
        md["creationTimestamp"] = meta.now_rfc3339()
        if "managedFields" in md:  # last, where ObjectMeta declares it
            md["managedFields"] = md.pop("managedFields")
        key = self.key(namespace, md["name"])
        if ctx.dry_run:
            if await self.storage.get(key) is not None:
                if generated:
                    return None
                raise errors.already_exists(self.rtype.plural, self.rtype.group, md["name"])
            return st.KeyValue(key, b"", 0, 0)
        lease = await self.leases.lease_for(self.rtype.ttl_seconds) if self.rtype.ttl_seconds else 0
        try:
            return await self.storage.create(key, await self._encode_async(obj, ctx.body_size), lease=lease)
        except st.KeyExistsError:
            if generated:
                return None
            raise errors.already_exists(self.rtype.plural, self.rtype.group, md["name"])

    async def _stored_result(self, obj: dict, kv: st.KeyValue) -> WriteResult:
        """The result of a write that stored ``obj`` as ``kv``: ``obj`` as a read of ``kv`` shows it.
        The value is stored without its resourceVersion and a read adds it last: so here too."""
        md = obj["metadata"]
        md.pop("resourceVersion", None)
        md["resourceVersion"] = str(kv.mod_revision)
        rtype = self.rtype
        # without a storage conversion the object in hand is what the stored bytes decode to
        read_back = (rtype.convert_to_storage is None and rtype.convert_to_storage_async is None
                     and rtype.convert_from_storage is None and rtype.convert_from_storage_async is None)
        return WriteResult(await self._external(obj), self, stored=kv, read_back=read_back)

    # ------------------------------------------------------------ update & patch

    async def update(self, namespace: str, name: str, obj: Any, subresource: str = "",
                     ctx: Optional[Context] = None) -> tuple[dict, bool]:
        """PUT: replace the object. Returns (object, created)."""
        result = await self.update_result(namespace, name, obj, subresource, ctx)
        return result.obj, result.created

    async def update_result(self, namespace: str, name: str, obj: Any, subresource: str = "",
                            ctx: Optional[Context] = None) -> WriteResult:
        """PUT: replace the object with ``obj``."""
        obj = self._check_kind(obj)
        md = meta.metadata(obj)
        if md.get("name") and md["name"] != name:
            raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL "
                                     f"({name})")
        md["name"] = name
        self._check_namespace(obj, namespace)
        wanted_rv = md.get("resourceVersion") or ""

        def replace(current: Optional[dict]) -> dict:
            # each attempt changes the object it starts from, and a conflict's retry (or the
            # create of a missing object) starts again from the request's
            return codec.copy_json(obj)
        return await self.guaranteed_update_result(namespace, name, replace, subresource, ctx,
                                                   precondition_rv=wanted_rv, create_if_missing=True,
                                                   mutate_keeps_current=True, precondition_uid=md.get("uid") or "")

    async def _write_base(self, key: str, dry_run: bool) -> "WriteBase":
        """The value an update or delete starts from: the watch cache's copy when there is
        one (see :class:`WriteBase`); a dry run reads the backend, since it writes nothing
        that would catch a stale copy."""
        if not dry_run:
            kv = self.storage.peek(key)
            if kv is not None:
                return WriteBase(self.storage, key, kv, current=False)
        return WriteBase(self.storage, key, await self.storage.get(key), current=True)

    async def guaranteed_update(self, namespace: str, name: str,
                                mutate: Callable[[Optional[dict]], dict | Awaitable[dict]],
                                subresource: str = "", ctx: Optional[Context] = None,
                                precondition_rv: str = "", create_if_missing: bool = False,
                                force_allow_create: bool = False) -> tuple[dict, bool]:
        """(object, created) of :meth:`guaranteed_update_result`, for callers in the process."""
        result = await self.guaranteed_update_result(namespace, name, mutate, subresource, ctx, precondition_rv,
                                                     create_if_missing, force_allow_create)
        return result.obj, result.created

    async def guaranteed_update_result(self, namespace: str, name: str,
                                       mutate: Callable[[Optional[dict]], dict | Awaitable[dict]],
                                       subresource: str = "", ctx: Optional[Context] = None,
                                       precondition_rv: str = "", create_if_missing: bool = False,
                                       force_allow_create: bool = False,
                                       mutate_keeps_current: bool = False,
                                       precondition_uid: str = "") -> WriteResult:
        """Read, mutate, validate, compare-and-swap; retry on conflict.  The method kinds
        with their own update override.

        ``mutate`` gets the current object (with its resourceVersion) and
        returns the desired one.  A resourceVersion in the desired object that
        differs from the current one is a 409 Conflict, never a retry: that
        is how update/patch preconditions work upstream.  ``mutate`` gets a copy
        of the current object, unless ``mutate_keeps_current`` says it neither
        changes it nor returns anything that shares a part with it (the
        request handlers' patchers and PUT).  ``precondition_uid`` (a PUT's
        body's uid) must be the stored object's, checked before anything else:
        a missing object has none, so it is a 409 even where a PUT may create.
        """
        ctx = ctx or Context()
        key = self.key(namespace, name)
        base = await self._write_base(key, ctx.dry_run)
        while True:
            kv = base.kv
            if kv is None:
                if precondition_uid:  # a missing value is always read from the backend: it stands
                    raise self._precondition_failed(key, name, f"UID in precondition: {precondition_uid}, "
                                                                "UID in object meta: ")
                allow_create = self.strategy.allow_create_on_update or force_allow_create
                if not (create_if_missing and allow_create and not subresource):
                    raise self._not_found(name)
                desired = mutate(None)
                if inspect.isawaitable(desired):
                    desired = await desired
                if isinstance(desired, dict):
                    _check_resource_version(meta.metadata(desired).get("resourceVersion"))
                try:
                    created = await self.create_result(namespace, desired, ctx)
                    created.created = True
                    return created
                except errors.StatusError as e:
                    if e.reason == "AlreadyExists":
                        base.replace(await self.storage.get(key))
                        continue
                    raise
            try:
                ctx = _sized_for(ctx, kv)
                current = await self._from_kv_async(kv)
                current_uid = current["metadata"].get("uid") or ""
                if precondition_uid and precondition_uid != current_uid:
                    raise self._precondition_failed(key, name, f"UID in precondition: {precondition_uid}, "
                                                                f"UID in object meta: {current_uid}")
                # the update changes the desired object in place; ``current`` stays as read
                desired = await _on_thread_if_large(ctx, _mutated, mutate, current, mutate_keeps_current)
                if inspect.isawaitable(desired):
                    desired = await desired
                desired = self._check_kind(desired)
                self._stamp_type(desired)
                dmd = meta.metadata(desired)
                _check_resource_version(dmd.get("resourceVersion"))
                rv = precondition_rv or dmd.get("resourceVersion") or ""
                if not rv and not self.strategy.allow_unconditional_update:
                    # upstream names the resource where the kind goes, and prints the uint64 zero as Go's %#v
                    raise errors.invalid(self.rtype.plural, self.rtype.group, name, [errors.Cause(
                        errors.INVALID, "Invalid value: 0x0: must be specified for an update",
                        "metadata.resourceVersion")])
                if rv and rv != current["metadata"]["resourceVersion"]:
                    raise self._conflict(name)
                # a stale value (older encryption key) is rewritten even when nothing changed, as upstream
                new = await self._prepare_update(namespace, name, desired, current, subresource, ctx,
                                                 force=kv.stale)
            except errors.StatusError:
                if await base.decision_stands():
                    raise
                continue
            if new is None:  # nothing changed: no write, as upstream
                if await base.decision_stands():
                    return WriteResult(current, self)
                continue
            finalized = self._finalized(new, current)
            finish = None if finalized else await self.strategy.begin_update(self.rtype, new, current, ctx.dry_run)
            if ctx.dry_run:
                if finish is not None:
                    await finish(True)
                return WriteResult(new, self)
            written: Optional[st.KeyValue] = None
            try:
                if finalized:
                    deleted = await self.storage.delete(key, expected_mod_revision=kv.mod_revision)
                    new["metadata"]["resourceVersion"] = str(deleted.mod_revision)
                    await self._after_delete(current)
                    return WriteResult(await self._external(new), self)
                value = await self._encode_async(new, ctx.body_size)
                written = await self.storage.update(key, value, expected_mod_revision=kv.mod_revision)
            except st.ConflictError as e:
                if precondition_rv and base.current:
                    raise self._conflict(name)
                # someone wrote in between (or the watch cache's copy was behind): re-apply the
                # change to the new state; a resourceVersion the change carries is checked again there
                base.replace(e.current)
                continue
            except st.KeyNotFoundError:
                base.replace(None)
                continue
            finally:
                if finish is not None:
                    await finish(written is not None)
            assert written is not None
            return await self._stored_result(new, written)

    async def _after_delete(self, obj: dict) -> None:
        """The strategy's after_delete; the delete happened, so a failure here is only logged."""
        try:
            await self.strategy.after_delete(self.rtype, obj)
        except Exception as e:
            md = obj.get("metadata") or {}
            log.warn("after deleting {resource} {namespace}/{name}: {err}", resource=self.rtype.plural,
                     namespace=md.get("namespace", ""), name=md.get("name", ""), err=e)

    def _finalized(self, new: dict, old: dict) -> bool:
        """The update that empties the finalizers of a deleting object removes it."""
        md = new["metadata"]
        return (bool(old["metadata"].get("deletionTimestamp")) and not md.get("finalizers")
                and not self.strategy.delete_pending(self.rtype, copy.deepcopy(new)))

    def _keep_identity(self, md: dict, namespace: str, name: str, old_md: dict) -> None:
        """Name, namespace and the fields an update cannot change, reset to the stored values as
        upstream's BeforeUpdate does (another namespace than the request's is its 400); a uid only when the update has none (another is refused
        as immutable, where a PUT's was already a precondition conflict).  A
        deletion timestamp or grace period is kept only once there is one: an update that sets one
        on an object not being deleted, or changes the period, is refused as immutable (422)."""
        md["name"] = name
        if self.rtype.namespaced:  # BeforeUpdate's EnsureObjectNamespaceMatchesRequestNamespace
            if md.get("namespace") and md["namespace"] != namespace:
                raise errors.namespace_mismatch()
            md["namespace"] = namespace
        else:  # a patch may have set one: cleared, as BeforeUpdate does for a cluster-scoped kind
            md.pop("namespace", None)
        if not md.get("uid") and "uid" in old_md:
            md["uid"] = old_md["uid"]  # a different one is refused as immutable
        for fixed in ("creationTimestamp", "generation", "selfLink"):
            if fixed in old_md:
                md[fixed] = old_md[fixed]
            else:
                md.pop(fixed, None)
        if old_md.get("deletionTimestamp"):
            md["deletionTimestamp"] = old_md["deletionTimestamp"]
        if old_md.get("deletionGracePeriodSeconds") is not None and md.get("deletionGracePeriodSeconds") is None:
            md["deletionGracePeriodSeconds"] = old_md["deletionGracePeriodSeconds"]

    async def _prepare_update(self, namespace: str, name: str, new: dict, old: dict, subresource: str,
                              ctx: Context, force: bool = False) -> Optional[dict]:
        """Apply upstream's update rules; None if the result equals the old object."""
        md, old_md = new["metadata"], old["metadata"]
        requested_managed_fields = md.get("managedFields", _ABSENT)
        self._keep_identity(md, namespace, name, old_md)
        md.pop("managedFields", None)
        # upstream's order: the decoded (defaulted) object is recorded by the field manager and
        # goes through mutating admission, then the strategy prepares and validates it (defaulted
        # only here: see create_result)
        await _on_thread_if_large(ctx, self.strategy.default, self.rtype, new)
        managed_fields = await self._managed_fields(old, new, requested_managed_fields, subresource, ctx)
        attrs = self._update_attributes(namespace, name, new, old, subresource, ctx)
        await self.admission.admit(attrs)
        if ctx.admission_view is not None:
            assert attrs.obj is not None
            ctx.admission_view.from_view(attrs.obj, new)
        self._stamp_type(new)
        md = meta.metadata(new)
        self._keep_identity(md, namespace, name, old_md)  # again: mutating admission may have changed them
        if subresource == "status":
            self.strategy.prepare_for_status_update(self.rtype, new, old)
            md = new["metadata"]
        elif subresource:
            self.strategy.prepare_for_subresource_update(self.rtype, subresource, new, old)
            md = new["metadata"]
        else:
            self.strategy.prepare_for_update(self.rtype, new, old)
        md.pop("managedFields", None)  # a status update starts from the old object
        if not subresource and self.strategy.generation_changes(self.rtype, new, old):
            md["generation"] = (old_md.get("generation") or 0) + 1
        self._set_managed_fields(md, managed_fields)
        causes = await _on_thread_if_large(ctx, self._validate_update, new, old, subresource)
        causes += await self.strategy.validate_async(self.rtype, new, old)
        if causes:
            await self._refuse(name, causes)
        if ctx.admission_view is not None:
            attrs.obj = ctx.admission_view.to_view(new)
        else:
            attrs.obj = new
        await self.admission.validate(attrs)
        self._fill_zero_status(new)
        md["resourceVersion"] = old_md["resourceVersion"]
        unchanged = new == old
        if not unchanged and _only_times_differ(new, old):
            md["managedFields"] = old_md["managedFields"]  # upstream does not write a timestamp-only change
            unchanged = True
        if unchanged and not force:
            return None
        return new

    def _update_attributes(self, namespace: str, name: str, new: dict, old: dict, subresource: str,
                           ctx: Context) -> Attributes:
        view = ctx.admission_view
        if view is None:
            return self._attributes(UPDATE, namespace, name, new, old, subresource, ctx, "UpdateOptions")
        attrs = self._attributes(UPDATE, namespace, name, view.to_view(new), view.to_view(old), view.subresource,
                                 ctx, "UpdateOptions")
        attrs.kind = view.kind
        return attrs

    # ------------------------------------------------------------ delete

    async def delete(self, namespace: str, name: str, opts: DeleteOptions,
                     ctx: Optional[Context] = None, admission_name: Optional[str] = None) -> tuple[dict, bool]:
        """Returns (object, deleted_now).  An object with finalizers is only
        marked (deletionTimestamp) and stays readable until they are gone."""
        ctx = ctx or Context()
        key = self.key(namespace, name)
        base = await self._write_base(key, ctx.dry_run or opts.dry_run)
        while True:
            kv = base.kv
            if kv is None:
                raise self._not_found(name)
            ctx = _sized_for(ctx, kv)
            try:
                current = await self._from_kv_async(kv)
            except CorruptObjectError:
                if not base.current:
                    base.replace(await self.storage.get(key))
                    continue
                if not opts.ignore_store_read_error:
                    raise
                # upstream's unsafe deletion of a corrupt object: no admission, finalizers or preconditions
                if ctx.dry_run or opts.dry_run:
                    return {"metadata": {"name": name, "namespace": namespace}}, True
                try:
                    deleted = await self.storage.delete(key, expected_mod_revision=kv.mod_revision)
                except st.ConflictError as e:
                    base.replace(e.current)
                    continue
                except st.KeyNotFoundError:
                    raise self._not_found(name)
                log.warn("deleted the corrupt object at {key} (ignoreStoreReadErrorWithClusterBreakingPotential)",
                         key=key)
                return {"metadata": {"name": name, "namespace": namespace,
                                     "resourceVersion": str(deleted.mod_revision)}}, True
            cmd = current["metadata"]
            try:
                opts.check_preconditions(self.rtype.kind, self.rtype.group, name, cmd)
                # admission's old object is the one read (upstream's too): it is read, never changed
                attrs = self._attributes(DELETE, namespace, admission_name if admission_name is not None else name,
                                         None, current, "", ctx)
                attrs.dry_run = ctx.dry_run or opts.dry_run
                attrs.options = _delete_options(opts, ctx)
                await self.admission.admit(attrs)
                await self.admission.validate(attrs)
            except errors.StatusError:
                if await base.decision_stands():
                    raise
                continue
            graceful = self._graceful_deletion(current, opts)
            if graceful is GRACE_PENDING:  # a graceful deletion under way, not shortened: nothing to write
                if not await base.decision_stands():
                    continue
                return current, False
            if graceful is not None:
                # the object read is marked: a conflict's retry decodes the stored value again
                marked, was_deleting = current, bool(cmd.get("deletionTimestamp"))
                deadline, period = graceful
                marked["metadata"]["deletionTimestamp"] = deadline
                marked["metadata"]["deletionGracePeriodSeconds"] = period
                if not was_deleting and marked["metadata"].get("generation"):
                    marked["metadata"]["generation"] += 1
                finalizers = opts.gc_finalizers(cmd.get("finalizers") or [])
                if finalizers:
                    marked["metadata"]["finalizers"] = finalizers
                if ctx.dry_run or opts.dry_run:
                    return marked, False
                written = await self._mark(key, marked, kv, base)
                if written is None:
                    continue
                if finalizers or period > 0:  # the kubelet (or a finalizer's owner) finishes the deletion
                    return await self._external(marked), False
                # a period of 0: marked, then removed at once (upstream's two writes; watchers see both)
                try:
                    deleted = await self.storage.delete(key, expected_mod_revision=written.mod_revision)
                except (st.ConflictError, st.KeyNotFoundError):  # another writer won: upstream ignores NotFound
                    return await self._external(marked), True
                await self._after_delete(marked)
                marked["metadata"]["resourceVersion"] = str(deleted.mod_revision)
                return marked, True
            # delete_pending marks the object only when it answers True (a namespace with
            # spec.finalizers: phase Terminating, which one already being deleted has)
            pending = self.strategy.delete_pending(self.rtype, current)
            # the propagation policy becomes a finalizer (orphan, foregroundDeletion)
            # that the garbage collector removes once it has handled the dependents
            finalizers = opts.gc_finalizers(cmd.get("finalizers") or [])
            finalizers_changed = set(finalizers) != set(cmd.get("finalizers") or [])
            if finalizers or pending:
                if cmd.get("deletionTimestamp") and not finalizers_changed:
                    if not await base.decision_stands():
                        continue
                    return current, False
                # the object read is marked: a conflict's retry decodes the stored value again
                marked, mmd = current, cmd
                if finalizers:
                    mmd["finalizers"] = finalizers
                else:
                    mmd.pop("finalizers", None)
                if not cmd.get("deletionTimestamp"):
                    mmd["deletionTimestamp"] = meta.now_rfc3339()
                    if mmd.get("generation") and not pending:
                        mmd["generation"] += 1  # as upstream's generic markAsDeleting
                mmd["deletionGracePeriodSeconds"] = 0
                if ctx.dry_run or opts.dry_run:
                    return marked, False
                if await self._mark(key, marked, kv, base) is None:
                    continue
                return await self._external(marked), False
            if ctx.dry_run or opts.dry_run:
                return current, True
            try:
                deleted = await self.storage.delete(key, expected_mod_revision=kv.mod_revision)
            except st.ConflictError as e:
                base.replace(e.current)
                continue
            except st.KeyNotFoundError:
                raise self._not_found(name)
            await self._after_delete(current)
            current["metadata"]["resourceVersion"] = str(deleted.mod_revision)
            return current, True

    async def _mark(self, key: str, marked: dict, kv: st.KeyValue, base: "WriteBase") -> Optional[st.KeyValue]:
        """Write a delete's mark (deletionTimestamp, finalizers) over ``kv``; the written kv, or
        None when another write came first (``base`` then holds what is stored: try again)."""
        try:
            written = await self.storage.update(key, await self._encode_async(marked, len(kv.value)),
                                                expected_mod_revision=kv.mod_revision)
        except st.ConflictError as e:
            base.replace(e.current)
            return None
        except st.KeyNotFoundError:
            base.replace(None)
            return None
        marked["metadata"]["resourceVersion"] = str(written.mod_revision)
        return written

    def _graceful_deletion(self, current: dict, opts: DeleteOptions) -> Any:
        """upstream's rest.BeforeDelete for kinds deleted gracefully: None (not graceful: delete,
        or mark for finalizers), GRACE_PENDING (already being deleted, not shortened), or the new
        (deletionTimestamp, deletionGracePeriodSeconds)."""
        cmd = current["metadata"]
        requested = opts.grace_period_seconds
        period = self.strategy.graceful_delete_period(current, requested)
        if period is None:
            return None
        existing_period = cmd.get("deletionGracePeriodSeconds")
        if cmd.get("deletionTimestamp"):
            if not existing_period:
                return None  # marked with no period left: delete now
            existing_period = max(int(existing_period), 1)
            if requested is None or requested >= existing_period:
                return GRACE_PENDING  # only a shorter grace period may be given
            return meta.rfc3339_moved(cmd["deletionTimestamp"], requested - existing_period), requested
        return meta.rfc3339_in(period), period

    async def delete_collection(self, namespace: str, list_opts: ListOptions, opts: DeleteOptions,
                                ctx: Optional[Context] = None) -> dict:
        listed = await self.list(namespace, ListOptions(list_opts.label_selector, list_opts.field_selector))
        deleted = []
        for obj in listed["items"]:
            md = obj["metadata"]
            try:
                # admission sees each item without a name, as upstream's collection delete shows it
                result, _ = await self.delete(md.get("namespace", ""), md["name"], opts, ctx, admission_name="")
            except errors.StatusError as e:
                if e.code == 404:
                    continue
                raise
            deleted.append(result)
        return {"kind": self.rtype.list_kind, "apiVersion": self.rtype.api_version,
                "metadata": {"resourceVersion": listed["metadata"]["resourceVersion"]}, "items": deleted}
