"""Admission's contract with the Store: plugins that see (and may change or refuse) every write.

This is upstream's ``k8s.io/apiserver/pkg/admission`` (interfaces, attributes,
the chain): the generic registry calls it, as upstream passes admission into
the Store, and ``kapiserver/admission/`` implements it (the plugins, and
``admission/plugins.py`` building the chain from the configuration).

As upstream, the chain runs in two phases around the object's validation:
mutating plugins (``admit``) first, in order, then the strategy's validation
of the object, then validating plugins (``validate``), in order.  A mutating
phase that changed the object after a plugin which asked to be called again
(mutating webhooks with ``reinvocationPolicy: IfNeeded``) runs once more
(upstream's reinvocation handler).

Plugins see create, update, delete and connect operations on every resource
type, built-in or custom, with the request's user, dry-run flag, options and
(for updates and deletes) the old object.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from kapiserver.machinery.groupversion import GroupVersionKind, GroupVersionResource
from kapiserver.machinery.user import UserInfo
from kapiserver.registry.context import SubresourceView

if TYPE_CHECKING:  # pragma: no cover
    from kapiserver.registry.resource_type import ResourceType

CREATE = "CREATE"
UPDATE = "UPDATE"
DELETE = "DELETE"
CONNECT = "CONNECT"
OPERATIONS = (CREATE, UPDATE, DELETE, CONNECT)


class ReinvocationContext:
    """Upstream's admission.ReinvocationContext: whether the mutating phase runs again,
    and what each plugin remembers between the two runs."""

    def __init__(self) -> None:
        self.is_reinvoke = False
        self.should_reinvoke = False
        self._values: dict[str, Any] = {}

    def value(self, key: str) -> Any:
        return self._values.get(key)

    def set_value(self, key: str, value: Any) -> None:
        self._values[key] = value


@dataclass
class Attributes:
    """What admission sees of one request (upstream's admission.Attributes).

    ``obj`` is the object being written (None for deletes), ``old_obj`` the
    stored one (updates, deletes).  Mutating plugins change ``obj`` in place,
    so the caller's reference stays valid.  ``kind`` is the kind of ``obj``
    when it is not the resource's own (subresources: ``autoscaling/v1 Scale``
    for ``deployments/scale``, ``policy/v1 Eviction``, ``v1 PodExecOptions``).
    """

    operation: str
    rtype: "ResourceType"
    namespace: str
    name: str
    obj: Optional[dict]
    old_obj: Optional[dict] = None
    subresource: str = ""
    user: Optional[UserInfo] = None
    dry_run: bool = False
    # CreateOptions / UpdateOptions / DeleteOptions (kind and apiVersion set), or the
    # connect options; None when the operation has none
    options: Optional[dict] = None
    kind: Optional[GroupVersionKind] = None
    # Warning headers for the response (shared with the request: appended in place)
    warnings: list[str] = field(default_factory=list)
    # audit annotations admission adds to the request's audit event (key -> value)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    reinvocation: ReinvocationContext = field(default_factory=ReinvocationContext)

    @property
    def resource(self) -> GroupVersionResource:
        return GroupVersionResource(self.rtype.group, self.rtype.version, self.rtype.plural)

    @property
    def gvk(self) -> GroupVersionKind:
        if self.kind is not None:
            return self.kind
        return GroupVersionKind(self.rtype.group, self.rtype.version, self.rtype.kind)

    def add_annotation(self, key: str, value: str) -> None:
        """An audit annotation; a key keeps its first value, as upstream refuses to overwrite one."""
        self.audit_annotations.setdefault(key, value)


class AdmissionPlugin:
    """One plugin of the chain.  Override ``admit`` (mutating) and/or ``validate``;
    both may raise a StatusError to refuse the request."""

    name: str = ""
    # which phases the plugin takes part in
    mutating: bool = False
    validating: bool = False
    # the operations it cares about (upstream's admission.Handler)
    operations: tuple[str, ...] = OPERATIONS
    # the resources, (group, plural), whose writes (and their subresources') it looks at; None:
    # any resource.  The chain asks once per resource and operation, not on every write.
    resources: Optional[frozenset[tuple[str, str]]] = None

    def handles(self, operation: str) -> bool:
        return operation in self.operations

    def looks_at(self, group: str, plural: str) -> bool:
        """Whether writes of this resource may concern the plugin (``resources``)."""
        return self.resources is None or (group, plural) in self.resources

    async def admit(self, attrs: Attributes) -> None:
        """Mutating admission."""

    async def validate(self, attrs: Attributes) -> None:
        """Validating admission."""

    async def start(self) -> None:
        """Begin whatever runs in the background (informers), once the server's stores exist."""

    async def stop(self) -> None:
        """Stop what ``start`` began, and close what it holds (connections: the server waits)."""


class AdmissionChain:
    """The enabled plugins in upstream's order (``admission/plugins.py`` builds it)."""

    def __init__(self, plugins: Sequence[AdmissionPlugin] = ()) -> None:
        self.plugins = list(plugins)
        # by (group, plural, operation): the mutating and the validating plugins such a write goes
        # through (a ConfigMap's skips the dozen that look only at pods, nodes, claims...)
        self._phases: dict[tuple[str, str, str], tuple[tuple[AdmissionPlugin, ...], tuple[AdmissionPlugin, ...]]] = {}

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.plugins]

    def plugin(self, name: str) -> Optional[AdmissionPlugin]:
        return next((p for p in self.plugins if p.name == name), None)

    async def admit(self, attrs: Attributes) -> None:
        """The mutating phase; run a second time when a plugin asked for it (reinvocation)."""
        await self._admit_once(attrs)
        if attrs.reinvocation.should_reinvoke:
            attrs.reinvocation.is_reinvoke = True
            await self._admit_once(attrs)

    def _plugins_for(self, attrs: Attributes) -> tuple[tuple[AdmissionPlugin, ...], tuple[AdmissionPlugin, ...]]:
        rtype, operation = attrs.rtype, attrs.operation
        key = (rtype.group, rtype.plural, operation)
        found = self._phases.get(key)
        if found is None:
            wanted = [p for p in self.plugins if p.handles(operation) and p.looks_at(rtype.group, rtype.plural)]
            found = self._phases[key] = (tuple(p for p in wanted if p.mutating),
                                         tuple(p for p in wanted if p.validating))
        return found

    async def _admit_once(self, attrs: Attributes) -> None:
        for plugin in self._plugins_for(attrs)[0]:
            await plugin.admit(attrs)

    async def validate(self, attrs: Attributes) -> None:
        for plugin in self._plugins_for(attrs)[1]:
            await plugin.validate(attrs)

    async def start(self) -> None:
        for plugin in self.plugins:
            await plugin.start()

    async def stop(self) -> None:
        for plugin in self.plugins:
            await plugin.stop()
