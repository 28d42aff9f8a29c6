"""The Stores of the RBAC kinds, refusing privilege escalation (upstream's ``policybased`` storages).

Writes by a user go through the checks of :mod:`kapiserver.auth.rbac.escalation`
before the ordinary Store lifecycle (so, as upstream, an escalation is a 403
even when the object is also invalid); an update's check runs on the object
it would write, inside the compare-and-swap loop.  Writes made by the server
itself (no user: bootstrap reconciliation, the aggregation controller) are
not checked.
"""
from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Optional

from kapiserver.apis.deps import RegistryDeps
from kapiserver.auth.rbac.escalation import (AGGREGATION_NEEDS_ADMIN, FULL_AUTHORITY, GROUP, bind_authorized,
                                             escalate_authorized, escalation_allowed, missing_permissions,
                                             only_gc_fields_changed)
from kapiserver.machinery import errors
from kapiserver.machinery.user import UserInfo
from kapiserver.registry.context import Context
from kapiserver.registry.resource_type import ResourceType
from kapiserver.registry.store import Store, WriteResult


class _EscalationCheckedStore(Store):
    def __init__(self, rtype: ResourceType, deps: RegistryDeps) -> None:
        super().__init__(rtype, deps.storage, deps.admission, deps.leases)
        self.deps = deps
        if deps.rule_resolver is None:
            raise ValueError("the RBAC kinds need the rule resolver (RegistryDeps.rule_resolver)")
        self.rules = deps.rule_resolver

    def _forbidden(self, obj: dict, why: str) -> errors.StatusError:
        return errors.forbidden(self.rtype.plural, GROUP, (obj.get("metadata") or {}).get("name") or "", why)

    async def authorized_outright(self, namespace: str, url_name: str, obj: dict, user: UserInfo) -> bool:
        """The verb that lets ``user`` skip the permission comparison (escalate, bind)."""
        raise NotImplementedError

    async def check(self, namespace: str, obj: dict, old: Optional[dict], user: UserInfo) -> None:
        """Raise 403 when ``obj`` grants what ``user`` does not hold."""
        raise NotImplementedError

    async def create_result(self, namespace: str, obj: Any, ctx: Optional[Context] = None) -> WriteResult:
        user = ctx.user if ctx is not None else None
        if isinstance(obj, dict) and user is not None and not escalation_allowed(user):
            if not await self.authorized_outright(namespace, "", obj, user):
                await self.check(namespace, obj, None, user)
        return await super().create_result(namespace, obj, ctx)

    async def guaranteed_update_result(self, namespace: str, name: str,
                                       mutate: Callable[[Optional[dict]], dict | Awaitable[dict]],
                                       subresource: str = "", ctx: Optional[Context] = None,
                                       precondition_rv: str = "", create_if_missing: bool = False,
                                       force_allow_create: bool = False,
                                       mutate_keeps_current: bool = False,
                                       precondition_uid: str = "") -> WriteResult:
        user = ctx.user if ctx is not None else None
        if user is None or escalation_allowed(user):
            return await super().guaranteed_update_result(namespace, name, mutate, subresource, ctx, precondition_rv,
                                                          create_if_missing, force_allow_create, mutate_keeps_current,
                                                          precondition_uid)

        async def checked(current: Optional[dict]) -> dict:
            desired = mutate(current)
            if inspect.isawaitable(desired):
                desired = await desired
            # a missing object is created through create(), which checks it
            if current is not None and isinstance(desired, dict) and not only_gc_fields_changed(desired, current):
                if not await self.authorized_outright(namespace, name, desired, user):
                    await self.check(namespace, desired, current, user)
            return desired
        return await super().guaranteed_update_result(namespace, name, checked, subresource, ctx, precondition_rv,
                                                      create_if_missing, force_allow_create, mutate_keeps_current,
                                                      precondition_uid)


class RolePolicyStore(_EscalationCheckedStore):
    """Roles and ClusterRoles: hold every permission granted, or ``escalate``."""

    async def authorized_outright(self, namespace: str, url_name: str, obj: dict, user: UserInfo) -> bool:
        return await escalate_authorized(self.deps.authorizer, user, self.rtype.plural, namespace, url_name)

    async def check(self, namespace: str, obj: dict, old: Optional[dict], user: UserInfo) -> None:
        rules: list = obj["rules"] if isinstance(obj.get("rules"), list) else []
        why = missing_permissions(self.rules, user, namespace, rules)
        if why:
            raise self._forbidden(obj, why)
        if not self.rtype.namespaced and (_aggregates(obj) or (old is not None and _aggregates(old))):
            # an aggregation rule can gather anything, so it takes everything to set or change one
            if missing_permissions(self.rules, user, namespace, FULL_AUTHORITY):
                raise self._forbidden(obj, AGGREGATION_NEEDS_ADMIN)


class BindingPolicyStore(_EscalationCheckedStore):
    """RoleBindings and ClusterRoleBindings: hold every permission of the role, or ``bind`` it."""

    async def authorized_outright(self, namespace: str, url_name: str, obj: dict, user: UserInfo) -> bool:
        return await bind_authorized(self.deps.authorizer, user, _role_ref(obj), namespace)

    async def check(self, namespace: str, obj: dict, old: Optional[dict], user: UserInfo) -> None:
        rules = await self._role_rules(_role_ref(obj), namespace)
        why = missing_permissions(self.rules, user, namespace, rules)
        if why:
            raise self._forbidden(obj, why)

    async def _role_rules(self, ref: dict, namespace: str) -> list:
        """The referenced role's rules, read from storage (404 when it does not exist, as upstream)."""
        kind, name = ref.get("kind"), ref.get("name") or ""
        if kind == "ClusterRole":
            role = await self.deps.store(GROUP, "v1", "clusterroles").get("", name)
        elif kind == "Role" and namespace and name:
            role = await self.deps.store(GROUP, "v1", "roles").get(namespace, name)
        else:
            return []  # validation answers the invalid roleRef
        return role["rules"] if isinstance(role.get("rules"), list) else []


def _role_ref(obj: dict) -> dict:
    ref: dict = dict(obj["roleRef"]) if isinstance(obj.get("roleRef"), dict) else {}
    ref.setdefault("apiGroup", GROUP)  # defaulted on decode upstream
    return ref


def _aggregates(obj: dict) -> bool:
    aggregation = obj.get("aggregationRule")
    return isinstance(aggregation, dict) and bool(aggregation.get("clusterRoleSelectors"))


def role_store(rtype: ResourceType, deps: RegistryDeps) -> Store:
    return RolePolicyStore(rtype, deps)


def binding_store(rtype: ResourceType, deps: RegistryDeps) -> Store:
    return BindingPolicyStore(rtype, deps)
