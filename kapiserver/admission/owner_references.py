"""OwnerReferencesPermissionEnforcement (upstream's opt-in admission plugin of that name).

Setting or changing an object's ``ownerReferences`` asks the authorizer
more than the request's own verb did:

* an update that changes them needs ``delete`` on the object (a user who may
  not delete it must not make the garbage collector delete it);
* a new ``blockOwnerDeletion: true`` reference needs ``update`` of the
  owner's ``finalizers`` subresource (or of every resource's), since it
  holds up the owner's foreground deletion.

Updates of ``pods/status`` are exempt, as upstream.  Writes the server makes
itself (no user) are not checked.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from kapiserver.admission.errors import admission_forbidden
from kapiserver.auth import authorizer as authz
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes

PLUGIN_NAME = "OwnerReferencesPermissionEnforcement"
_EXEMPT = {("", "pods", "status")}


def _owner_refs(obj: Optional[dict]) -> list[dict]:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences")
    return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []


def changes_owner_references(new: Optional[dict], old: Optional[dict]) -> bool:
    if old is None:
        return bool(_owner_refs(new))
    return _owner_refs(new) != _owner_refs(old)


def new_blocking_refs(new: Optional[dict], old: Optional[dict]) -> list[dict]:
    """References that block their owner's deletion now and did not before (by uid)."""
    blocking = [r for r in _owner_refs(new) if r.get("blockOwnerDeletion") is True]
    if old is None:
        return blocking
    before = {r.get("uid"): r for r in _owner_refs(old)}
    return [r for r in blocking if r.get("uid") not in before or before[r.get("uid")].get("blockOwnerDeletion") is not True]


def _go_error(decision: authz.Decision) -> str:
    """``reason, err`` as upstream prints them with %v (a nil error is ``<nil>``)."""
    return f"{decision.reason}, {decision.error or '<nil>'}"


class OwnerReferencesPermissionEnforcement(AdmissionPlugin):
    name = PLUGIN_NAME
    validating = True
    operations = (CREATE, UPDATE)

    def __init__(self, authorizer: authz.Authorizer, served_types: Callable[[], list[Any]]) -> None:
        self.authorizer = authorizer
        self.served_types = served_types

    async def _decide(self, attrs: Attributes, **fields: Any) -> authz.Decision:
        return await authz.decide(self.authorizer, attrs.user, authz.Attributes(resource_request=True, **fields))

    async def validate(self, attrs: Attributes) -> None:
        rtype = attrs.rtype
        if attrs.user is None or (rtype.group, rtype.plural, attrs.subresource) in _EXEMPT:
            return
        if not changes_owner_references(attrs.obj, attrs.old_obj):
            return
        if attrs.operation != CREATE:
            decision = await self._decide(attrs, verb="delete", namespace=attrs.namespace, api_group=rtype.group,
                                          api_version=rtype.version, resource=rtype.plural,
                                          subresource=attrs.subresource, name=attrs.name)
            if not decision.allowed:
                raise admission_forbidden(attrs, "cannot set an ownerRef on a resource you can't delete: "
                                                 + _go_error(decision))
        refs = new_blocking_refs(attrs.obj, attrs.old_obj)
        if not refs:
            return
        anything = await self._decide(attrs, verb="update", api_group="*", api_version="*", resource="*",
                                      subresource="finalizers", name="*")
        if anything.allowed:
            return
        for ref in refs:
            api_version, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
            group, _, version = api_version.rpartition("/")
            owners = [t for t in self.served_types() if (t.group, t.version, t.kind) == (group, version, kind)]
            if not owners:
                raise admission_forbidden(attrs, f"cannot set blockOwnerDeletion in this case because cannot find "
                                                 f"RESTMapping for APIVersion {api_version} Kind {kind}: no matches "
                                                 f'for kind "{kind}" in version "{api_version}"')
            for owner in owners:
                decision = await self._decide(attrs, verb="update", api_group=owner.group, api_version=owner.version,
                                              resource=owner.plural, subresource="finalizers",
                                              name=str(ref.get("name") or ""),
                                              namespace=attrs.namespace if owner.namespaced else "")
                if not decision.allowed:
                    raise admission_forbidden(attrs, "cannot set blockOwnerDeletion if an ownerReference refers to "
                                                     "a resource you can't set finalizers on: " + _go_error(decision))


def owner_references_permission_enforcement(config: Optional[bytes], deps: Any) -> OwnerReferencesPermissionEnforcement:
    return OwnerReferencesPermissionEnforcement(deps.authorizer, deps.served.types)
