"""The one description of a resource type, for built-in kinds and CRDs alike: the
:class:`ResourceType` and its per-kind behaviour, the :class:`Strategy`.

Everything that serves a resource (the generic Store, the REST handlers,
discovery, OpenAPI, Table output, the watch cache) is driven by a
:class:`ResourceType`.  Built-in groups declare theirs in ``kapiserver.apis``;
the CRD controllers build them from Established CRDs.

The Strategy is upstream's RESTCreateStrategy & co: a kind overrides only what
differs from the defaults.  Hooks mutate the object dicts in place and return
validation problems as lists of :class:`~kapiserver.machinery.errors.Cause`; the
Store turns a non-empty list into a 422 Invalid.  Both live here because each
names the other (a ResourceType has a Strategy, every hook takes the ResourceType).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, NamedTuple, Optional, Protocol

from kapiserver.machinery import errors
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.fields import METAV1_FIELD_LABELS, FieldLabelConversion, FieldSelector
from kapiserver.machinery.validation import DNS1123_SUBDOMAIN
from kapiserver.registry.options import ListOptions
from kapiserver.registry.subresources import Subresource

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


ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


class TableColumn(NamedTuple):
    """A ``TableColumnDefinition``; ``cell(obj)`` computes the cell value.

    ``type``/``format`` are OpenAPI types (``string``, ``integer``,
    ``date``...).  Built-in kinds' AGE columns are ``type="string"`` cells
    the server computes (``5m``), as upstream's printers do; ``type="date"``
    columns (CRD Age, the default table's Created At) hold the RFC 3339 time.
    """

    name: str
    type: str
    cell: Callable[[dict], Any]
    format: str = ""
    description: str = ""
    priority: int = 0


class ScaleSubresource(NamedTuple):
    """Paths (``.spec.replicas`` style) of the scale subresource (CRDs)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str = ""


@dataclass(eq=False, repr=False)
class ResourceType:
    """A served resource: one group/version/kind at one URL.

    ``storage_resource`` is the storage key segment (``configmaps`` or
    ``<group>/<plural>`` for CRDs); several versions of one kind share it.
    ``schema`` is the resolved OpenAPI v3 schema of the kind (``$ref`` kept
    as ``#/components/schemas/<name>``), ``schema_name`` the definition name
    (``io.k8s.api.core.v1.ConfigMap``) when the kind comes from the built-in
    definitions.
    """

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    strategy: Strategy
    list_kind: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    has_status: bool = False
    scale: Optional[ScaleSubresource] = None
    schema_name: str = ""
    schema: Optional[dict] = None
    table_columns: tuple[TableColumn, ...] = ()
    # The kind's field set besides metadata.name and metadata.namespace (upstream's GetAttrs /
    # ToSelectableFields): label (``spec.nodeName``) -> the value of an object, a string computed
    # as upstream computes it; a label a selector names that the set lacks has the value "".
    selectable_fields: dict[str, Callable[[dict], str]] = field(default_factory=dict)
    # Which labels a field selector may use, and what each is in the field set (upstream's
    # field label conversion function of this kind and version).
    field_labels: FieldLabelConversion = METAV1_FIELD_LABELS
    # Selectable fields the watch cache indexes before the server is ready (upstream's pods:
    # ``spec.nodeName``, what every kubelet selects its pods by); others are indexed by the
    # first list that selects on them.
    indexed_fields: tuple[str, ...] = ()
    storage_resource: str = ""
    is_crd: bool = False
    # Events expire: a lease of this many seconds is attached on create (0 = none).
    ttl_seconds: int = 0
    # Kinds that take strategic merge patch (built-ins; CRDs answer 415).
    strategic_merge_patch: bool = True
    # Immediate deletes answer with the deleted object instead of a Success Status
    # (upstream's ReturnDeletedObject: custom resources, pods).
    return_deleted_object: bool = False
    # Versions whose stored form is another version's (events.k8s.io/v1 is kept as
    # core/v1): the Store applies ``convert_to_storage`` to an object just before
    # writing it and ``convert_from_storage`` to every object it reads (get, list,
    # watch) before anything else.  Both return a new dict.
    convert_to_storage: Optional[Callable[[dict], dict]] = None
    convert_from_storage: Optional[Callable[[dict], dict]] = None
    # Conversions that leave the process (CRD conversion webhooks): batch hooks taking
    # a list of objects and returning an awaitable of the converted list, same length
    # and order.  When set they replace the synchronous pair above: the Store awaits
    # ``convert_from_storage_async`` once per read batch (a get, a list page, a run of
    # watch events) and ``convert_to_storage_async`` once per write.  Objects already
    # in the target version come back unchanged.  Failures raise StatusError.
    convert_to_storage_async: Optional[Callable[[list[dict]], Awaitable[list[dict]]]] = None
    convert_from_storage_async: Optional[Callable[[list[dict]], Awaitable[list[dict]]]] = None
    # REST storage other than the generic Store: ``make_store(rtype, server)``
    # (create-only reviews answered from the request, registry/review.py)
    make_store: Optional[Callable[["ResourceType", Any], Any]] = None
    deprecated: bool = False
    deprecation_warning: str = ""
    # The group/version objects are stored as when it is not this one's (events.k8s.io
    # is kept as core v1): discovery's storageVersionHash is computed from it.
    storage_version: str = ""
    # subresources besides status and scale (pods/eviction, pods/log, namespaces/finalize...)
    extra_subresources: tuple[Subresource, ...] = ()
    # Subresources that need the server's dependencies: ``bind_deps(rtype, RegistryDeps)`` is
    # called once the kind's store exists (serviceaccounts/token signs with the server's key).
    bind_deps: Optional[Callable[["ResourceType", Any], None]] = None
    # Whether objects print as a Table (upstream: the REST storage is a TableConvertor).
    # Create-only reviews are not: ``as=Table`` is 406 NotAcceptable for them.
    table_convertor: bool = True
    # The order of a list's Table rows when the printer sorts them (FlowSchemas: in
    # matching order): a sort key of the object; None keeps the list's order.
    table_row_order: Optional[Callable[[dict], Any]] = None

    def __post_init__(self) -> None:
        if not self.list_kind:
            self.list_kind = self.kind + "List"
        if not self.storage_resource:
            self.storage_resource = self.plural if not self.group or not self.is_crd else f"{self.group}/{self.plural}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> tuple[str, str]:
        return (self.group, self.version)

    @property
    def subresources(self) -> tuple[str, ...]:
        subs = []
        if self.has_status:
            subs.append("status")
        if self.scale is not None:
            subs.append("scale")
        subs.extend(s.name for s in self.extra_subresources)
        return tuple(subs)

    def subresource(self, name: str) -> Optional[Subresource]:
        """One of ``extra_subresources`` by name."""
        for sub in self.extra_subresources:
            if sub.name == name:
                return sub
        return None

    @property
    def stored(self) -> bool:
        """Whether objects live in storage (reviews and computed lists do not)."""
        return self.make_store is None

    def storage_key(self, namespace: str, name: str) -> str:
        """``/configmaps/<ns>/<name>`` or ``/namespaces/<name>`` (below the backend prefix)."""
        if self.namespaced:
            return f"/{self.storage_resource}/{namespace}/{name}"
        return f"/{self.storage_resource}/{name}"

    def storage_prefix(self, namespace: str = "") -> str:
        """The key prefix of every object, or of one namespace's objects."""
        if self.namespaced and namespace:
            return f"/{self.storage_resource}/{namespace}/"
        return f"/{self.storage_resource}/"

    # what every REST storage of the kind, stored or not, does alike: the checks of a body's
    # TypeMeta, and the selection of objects by label and field selectors

    def check_kind(self, obj: Any) -> dict:
        """``obj`` as an object of this kind: a 400 for a body that is no object, or names
        another apiVersion or kind (either may be left out)."""
        if not isinstance(obj, dict):
            raise errors.bad_request("the body of the request must be a JSON or YAML object")
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != self.api_version:
            raise errors.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                     f"API version ({self.api_version})")
        if kind and kind != self.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                                     f"({self.kind})")
        return obj

    def stamp_type(self, obj: dict) -> dict:
        """Set the object's kind and apiVersion, first and in that order, as Go encodes a
        typed object's TypeMeta (the list encoder trims them from items by that prefix)."""
        keys = iter(obj)
        if next(keys, None) != "kind" or next(keys, None) != "apiVersion":  # once per object, at most
            rest = [(k, v) for k, v in obj.items() if k != "kind" and k != "apiVersion"]
            obj.clear()
            obj["kind"] = ""
            obj["apiVersion"] = ""
            obj.update(rest)
        obj["kind"] = self.kind
        obj["apiVersion"] = self.api_version
        return obj

    def field_getter(self, obj: dict) -> Callable[[str], Optional[str]]:
        """The values of ``obj``'s selectable fields, by field label (None: not one of them)."""
        md = obj.get("metadata") or {}
        getters = self.selectable_fields

        def get(name: str) -> Optional[str]:
            if name == "metadata.name":
                return md.get("name", "")
            if name == "metadata.namespace":
                return md.get("namespace", "")
            getter = getters.get(name)
            return getter(obj) if getter else None
        return get

    def field_selector(self, opts: ListOptions) -> FieldSelector:
        """The list options' field selector in the labels of the kind's field set, as upstream's
        list, watch and deletecollection handlers convert it: a label this version does not
        accept is a 400 with the kind's own message."""
        return self.field_labels.convert(opts.field_selector)

    def matcher(self, opts: ListOptions) -> Optional[Callable[[dict], bool]]:
        """A predicate for the list options' selectors (None when everything matches)."""
        labels, fields = opts.label_selector, self.field_selector(opts)
        if labels.empty and fields.empty:
            return None

        def matches(obj: dict) -> bool:
            md = obj.get("metadata") or {}
            if not labels.empty and not labels.matches(md.get("labels") or {}):
                return False
            return fields.empty or fields.matches(self.field_getter(obj))
        return matches
