"""The one description of a resource type, for built-in kinds and CRDs alike.

Everything that serves a resource (the generic Store, the REST handlers,
discovery, OpenAPI, Table output, the watch cache) is driven by a
:class:`ResourceType`.  Built-in groups declare theirs in ``kapiserver.apis``;
the CRD controllers build them from Established CRDs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Optional

from kapiserver.machinery.fields import METAV1_FIELD_LABELS, FieldLabelConversion
from kapiserver.registry.strategy import Strategy
from kapiserver.registry.subresources import Subresource

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class TableColumn:
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


@dataclass(frozen=True)
class ScaleSubresource:
    """Paths (``.spec.replicas`` style) of the scale subresource (CRDs)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str = ""


@dataclass
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
