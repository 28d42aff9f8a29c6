"""The parameter objects a binding hands its policy (upstream's CollectParams).

Parameters are read from the watch cache of the paramKind's resource (memory,
as upstream reads them from an informer).  A namespaced paramKind is looked
up in ``paramRef.namespace``, else in the request's namespace.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from kapiserver.machinery import errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import selector_from_label_selector_dict
from kapiserver.registry.options import ListOptions
from kapiserver.registry.resource_type import ResourceType

# "no parameters": a policy without paramKind (or a binding without paramRef) runs once, with null params
NO_PARAMS: list[Optional[dict]] = [None]


class ParamError(Exception):
    """The binding's parameters cannot be found or read: a configuration error."""


async def collect_params(param_rtype: Optional[ResourceType], param_ref: Optional[dict], namespace: str,
                         store: Callable[[str, str, str], Any]) -> list[Optional[dict]]:
    if param_rtype is None or param_ref is None:
        return NO_PARAMS
    params_store = store(param_rtype.group, param_rtype.version, param_rtype.plural)
    params_namespace = ""
    if param_rtype.namespaced:
        params_namespace = param_ref.get("namespace") or namespace
        if not params_namespace:
            raise ParamError("cannot use namespaced paramRef in policy binding that matches cluster-scoped "
                             "resources")
    elif param_ref.get("namespace"):
        raise ParamError("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
    name, selector = param_ref.get("name") or "", param_ref.get("selector")
    params: list[Optional[dict]]
    if name:
        if selector is not None:
            raise ParamError("paramRef.name and paramRef.selector are mutually exclusive")
        try:
            params = [await params_store.get(params_namespace, name, resource_version="0")]
        except errors.StatusError as e:
            if e.code != 404:
                raise ParamError(e.message) from None
            params = []
    elif selector is not None:
        try:
            opts = ListOptions(selector_from_label_selector_dict(selector), parse_field_selector(""),
                               resource_version="0")
            params = list((await params_store.list(params_namespace, opts)).get("items") or [])
        except errors.StatusError as e:
            raise ParamError(e.message) from None
    else:
        raise ParamError("one of name or selector must be provided")
    if not params and param_ref.get("parameterNotFoundAction") == "Deny":
        raise ParamError("no params found for policy binding with `Deny` parameterNotFoundAction")
    return params
