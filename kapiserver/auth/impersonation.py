"""Impersonation (``kubectl --as``, ``--as-group``): acting as another user.

The authenticated user asks, through ``Impersonate-User``,
``Impersonate-Group``, ``Impersonate-Uid`` and ``Impersonate-Extra-<key>``
headers, to be treated as someone else.  Each requested attribute is an
``impersonate`` request the authorizer must allow, as upstream does; the
request then continues as the impersonated user (who gets the groups
upstream adds: ``system:authenticated``, and, when no group was asked for,
the service-account groups for ``system:serviceaccount:<ns>:<name>``).
"""
from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from kapiserver.auth.authorizer import Attributes, Authorizer, decide, forbidden
from kapiserver.auth.serviceaccount import split_username
from kapiserver.machinery.user import ANONYMOUS_USER, AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP, UserInfo
from kapiserver.machinery import errors

USER_HEADER = b"impersonate-user"
GROUP_HEADER = b"impersonate-group"
UID_HEADER = b"impersonate-uid"
EXTRA_PREFIX = b"impersonate-extra-"


def requested(request: Any) -> bool:
    """Whether the request carries any ``Impersonate-*`` header."""
    return any(key.lower().startswith(b"impersonate-") for key, _ in request.requestHeaders.getAllRawHeaders())


async def impersonate(request: Any, user: UserInfo, authorizer: Authorizer) -> UserInfo:
    """The user the request acts as: ``user`` itself, or whom it may impersonate (else 403)."""
    headers = request.requestHeaders
    name = _one(headers.getRawHeaders(USER_HEADER))
    groups = [g.decode("utf-8", "replace") for g in headers.getRawHeaders(GROUP_HEADER) or ()]
    uid = _one(headers.getRawHeaders(UID_HEADER))
    extra: dict[str, tuple[str, ...]] = {}
    for key, values in headers.getAllRawHeaders():
        if key.lower().startswith(EXTRA_PREFIX):
            extra_key = unquote(key[len(EXTRA_PREFIX):].decode("latin-1").lower())
            extra[extra_key] = tuple(v.decode("utf-8", "replace") for v in values)
    if name is None:
        if groups or extra or uid is not None:
            raise errors.bad_request("requested impersonation of groups, extra or uid without impersonating a user")
        return user

    async def check(resource: str, value: str, group: str = "", subresource: str = "", namespace: str = "") -> None:
        attributes = Attributes(verb="impersonate", api_group=group, resource=resource, subresource=subresource,
                                name=value, namespace=namespace)
        decision = await decide(authorizer, user, attributes)
        if not decision.allowed:
            raise forbidden(user, attributes, decision.reason)

    # checked in upstream's order: the user (or service account), groups, extras, uid
    explicit_groups = list(groups)
    # a service account only when its namespace and name are valid (upstream's SplitUsername):
    # system:serviceaccount:ns:Not_A_Name is a user name, whose impersonation is "impersonate users"
    service_account = split_username(name)
    if service_account is not None:
        namespace, account = service_account
        await check("serviceaccounts", account, namespace=namespace)
    else:
        await check("users", name)
    for group in explicit_groups:
        await check("groups", group)
    for key, values in extra.items():
        for value in values:
            await check("userextras", value, "authentication.k8s.io", key)
    if uid is not None:
        await check("uids", uid, "authentication.k8s.io")
    if service_account is not None and not explicit_groups:  # a service account's groups, unless groups were asked for
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    if name == ANONYMOUS_USER:
        if UNAUTHENTICATED_GROUP not in groups:
            groups.append(UNAUTHENTICATED_GROUP)
    elif AUTHENTICATED_GROUP not in groups and UNAUTHENTICATED_GROUP not in groups:
        groups.append(AUTHENTICATED_GROUP)
    return UserInfo(name=name, groups=tuple(groups), uid=uid or "", extra=extra)


def _one(values: Any) -> Any:
    return values[0].decode("utf-8", "replace") if values else None
