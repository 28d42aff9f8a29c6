"""The CEL ``authorizer`` of admission expressions (upstream's library/authz.go).

``authorizer.group('apps').resource('deployments').namespace('ns').name('x')
.check('update').allowed()``, ``authorizer.path('/healthz').check('get')``,
``authorizer.serviceAccount('ns', 'sa')``, ``authorizer.requestResource``
(the request's own resource) and the decision's ``allowed()``, ``reason()``,
``errored()``, ``error()``.

The engine evaluates synchronously while the authorizer may answer later (a
webhook, storage), so an evaluation is run in rounds: a ``check`` whose
decision is not known yet records the question and fails; the session then
asks the authorizer (on the reactor) and the expression is evaluated again,
now answered from the session's decisions.  Expressions are pure, so the
rerun sees the same inputs; decisions are cached per session, as upstream's
caching authorizer does for one admission request.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from kapiserver.auth.authorizer import Attributes as AuthzAttributes, Authorizer, decide
from kapiserver.machinery.user import AUTHENTICATED_GROUP, UserInfo

_T = "__kapiserver_authz__"
MAX_ROUNDS = 16


class PendingDecision(Exception):
    """A check whose decision the session has to fetch first."""


def service_account_user(namespace: str, name: str) -> UserInfo:
    return UserInfo(name=f"system:serviceaccount:{namespace}:{name}",
                    groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED_GROUP))


def authorizer_value(group: str, resource: str, subresource: str, namespace: str, name: str) -> dict:
    """The ``authorizer`` variable: an Authorizer whose ``requestResource`` is the request's resource."""
    return {_T: "authorizer", "sa": None,
            "requestResource": {_T: "resource", "sa": None, "group": group, "resource": resource,
                                "subresource": subresource, "namespace": namespace, "name": name,
                                "fieldSelector": "", "labelSelector": ""}}


def _kind(value: Any, *kinds: str) -> dict:
    if isinstance(value, dict) and value.get(_T) in kinds:
        return value
    raise TypeError("no such overload")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return value


class AuthzSession:
    """The decisions of one admission request, and the questions still open."""

    def __init__(self, authorizer: Authorizer, user: Optional[UserInfo]) -> None:
        self.authorizer = authorizer
        self.user = user
        self.decisions: dict[tuple, dict] = {}
        self.pending: dict[tuple, tuple[Optional[UserInfo], AuthzAttributes]] = {}

    def functions(self, base: dict[str, Callable]) -> dict[str, Callable]:
        """``base`` plus the authorizer's functions, bound to this session."""
        out = dict(base)
        out.update({
            "path": self._path, "group": self._group, "serviceAccount": self._service_account,
            "resource": self._resource, "subresource": self._with("subresource"),
            "namespace": self._with("namespace"), "name": self._with("name"),
            "fieldSelector": self._with("fieldSelector"), "labelSelector": self._with("labelSelector"),
            "check": self._check, "allowed": lambda d: bool(_kind(d, "decision")["allowed"]),
            "reason": lambda d: _kind(d, "decision")["reason"],
            "errored": lambda d: bool(_kind(d, "decision")["error"]),
            "error": lambda d: _kind(d, "decision")["error"],
        })
        return out

    # ------------------------------------------------------------ builders

    @staticmethod
    def _path(a: Any, path: Any) -> dict:
        _kind(a, "authorizer")
        if not _text(path).strip():
            raise ValueError("path must not be empty")
        return {_T: "path", "sa": a["sa"], "path": path}

    @staticmethod
    def _group(a: Any, group: Any) -> dict:
        _kind(a, "authorizer")
        return {_T: "group", "sa": a["sa"], "group": _text(group)}

    @staticmethod
    def _service_account(a: Any, namespace: Any, name: Any) -> dict:
        _kind(a, "authorizer")
        if not _text(name):
            raise ValueError("Invalid service account name")
        if not _text(namespace):
            raise ValueError("Invalid service account namespace")
        return {_T: "authorizer", "sa": [namespace, name]}

    @staticmethod
    def _resource(g: Any, resource: Any) -> dict:
        g = _kind(g, "group")
        if not _text(resource).strip():
            raise ValueError("resource must not be empty")
        return {_T: "resource", "sa": g["sa"], "group": g["group"], "resource": resource, "subresource": "",
                "namespace": "", "name": "", "fieldSelector": "", "labelSelector": ""}

    @staticmethod
    def _with(key: str) -> Callable[[Any, Any], dict]:
        def setter(r: Any, value: Any) -> dict:
            return dict(_kind(r, "resource"), **{key: _text(value)})
        return setter

    # ------------------------------------------------------------ checks

    def _user_of(self, marker: dict) -> Optional[UserInfo]:
        sa = marker.get("sa")
        return service_account_user(sa[0], sa[1]) if sa else self.user

    def _check(self, target: Any, verb: Any) -> dict:
        marker = _kind(target, "path", "resource")
        verb = _text(verb)
        if marker[_T] == "path":
            attrs = AuthzAttributes(verb=verb, resource_request=False, path=marker["path"])
        else:
            attrs = AuthzAttributes(verb=verb, api_group=marker["group"], api_version="*",
                                    resource=marker["resource"], subresource=marker["subresource"],
                                    namespace=marker["namespace"], name=marker["name"])
        key = (repr(marker.get("sa")), attrs)
        found = self.decisions.get(key)
        if found is not None:
            return found
        self.pending[key] = (self._user_of(marker), attrs)
        raise PendingDecision("authorization decision pending")

    async def resolve(self) -> None:
        """Ask the authorizer every open question."""
        pending, self.pending = self.pending, {}
        for key, (user, attrs) in pending.items():
            try:
                decision = await decide(self.authorizer, user, attrs)
                self.decisions[key] = {_T: "decision", "allowed": bool(decision.allowed),
                                       "reason": decision.reason or "", "error": ""}
            except Exception as e:  # an authorizer failure is the decision's error, as upstream
                self.decisions[key] = {_T: "decision", "allowed": False, "reason": "", "error": str(e)}
