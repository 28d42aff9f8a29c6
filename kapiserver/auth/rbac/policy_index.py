"""The RBAC objects in memory, indexed for the question "which rules apply to this user here?".

Upstream's rule resolver walks every ClusterRoleBinding, then every
RoleBinding of the request's namespace, keeps those with a subject matching
the user and visits the rules of the roles they reference.  Here the same
walk is answered from indexes kept current by informers
(``policy_informers.py``): bindings are indexed by subject (a user name, a
service account's user name, a group), so only the bindings that name the
user or one of its groups are looked at, and the outcome for one
(user, groups, namespace) is cached until any RBAC object changes.

Bindings are visited in name order (cluster-wide ones first), and for each
the first subject that applies is the one named in the "allowed by" reason,
as upstream describes it.  A binding whose role does not exist contributes
an error (``clusterrole.rbac.authorization.k8s.io "x" not found``) that ends
up in a denial's reason.
"""
from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple, Optional

from kapiserver.auth.authorizer import Attributes
from kapiserver.auth.rbac.policy_rules import CompiledRule, compile_rules
from kapiserver.machinery.user import UserInfo

SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
# distinct (user, groups, namespace) resolutions kept between RBAC changes
CACHE_ENTRIES = 10_000

SubjectKey = tuple[str, str]  # ("user", name) or ("group", name); service accounts are users


class Subject(NamedTuple):
    kind: str
    name: str
    namespace: str  # service accounts: the subject's namespace, defaulted to a RoleBinding's own

    def key(self) -> Optional[SubjectKey]:
        if self.kind == "User":
            return ("user", self.name)
        if self.kind == "Group":
            return ("group", self.name)
        if self.kind == "ServiceAccount" and self.namespace:
            return ("user", f"{SERVICE_ACCOUNT_PREFIX}{self.namespace}:{self.name}")
        return None

    def describe(self) -> str:
        if self.kind == "ServiceAccount":
            return f'ServiceAccount "{self.name}/{self.namespace}"'
        return f'{self.kind} "{self.name}"'


class Binding(NamedTuple):
    namespace: str  # "" for a ClusterRoleBinding
    name: str
    role_kind: str
    role_name: str
    subjects: tuple[Subject, ...]

    @staticmethod
    def from_object(obj: dict) -> "Binding":
        md = obj.get("metadata") or {}
        namespace = md.get("namespace") or ""
        ref: dict = obj["roleRef"] if isinstance(obj.get("roleRef"), dict) else {}
        subjects = []
        for s in obj.get("subjects") or []:
            if isinstance(s, dict):
                # upstream: a service account of a RoleBinding defaults to the binding's namespace
                subjects.append(Subject(s.get("kind") or "", s.get("name") or "",
                                        s.get("namespace") or (namespace if s.get("kind") == "ServiceAccount" else "")))
        return Binding(namespace, md.get("name") or "", ref.get("kind") or "", ref.get("name") or "",
                       tuple(subjects))

    def first_subject_for(self, keys: frozenset[SubjectKey]) -> Optional[Subject]:
        for subject in self.subjects:
            if subject.key() in keys:
                return subject
        return None

    def describe(self, subject: Subject) -> str:
        if self.namespace:
            return f'RoleBinding "{self.name}/{self.namespace}" of {self.role_kind} "{self.role_name}" to ' \
                   f"{subject.describe()}"
        return f'ClusterRoleBinding "{self.name}" of {self.role_kind} "{self.role_name}" to {subject.describe()}'


class Resolved(NamedTuple):
    """What applies to one user in one namespace: (where it comes from, its rules), and resolution errors."""

    sources: tuple[tuple[str, tuple[CompiledRule, ...]], ...]
    errors: tuple[str, ...]


def subject_keys(user: Optional[UserInfo]) -> frozenset[SubjectKey]:
    if user is None:
        return frozenset()
    return frozenset([("user", user.name), *(("group", g) for g in user.groups)])


class PolicyIndex:
    """Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, and what they grant whom."""

    def __init__(self) -> None:
        self.roles: dict[tuple[str, str], tuple[CompiledRule, ...]] = {}
        self.cluster_roles: dict[str, tuple[CompiledRule, ...]] = {}
        self.role_bindings: dict[tuple[str, str], Binding] = {}
        self.cluster_role_bindings: dict[str, Binding] = {}
        self._cluster_by_subject: dict[SubjectKey, set[str]] = defaultdict(set)
        self._namespaced_by_subject: dict[str, dict[SubjectKey, set[str]]] = defaultdict(lambda: defaultdict(set))
        self._cache: dict[tuple, Resolved] = {}
        self.generation = 0

    def _changed(self) -> None:
        self.generation += 1
        self._cache = {}

    # ------------------------------------------------------------ updates (from informers)

    def set_role(self, obj: dict) -> None:
        md = obj.get("metadata") or {}
        self.roles[(md.get("namespace") or "", md.get("name") or "")] = compile_rules(obj.get("rules"))
        self._changed()

    def delete_role(self, namespace: str, name: str) -> None:
        if self.roles.pop((namespace, name), None) is not None:
            self._changed()

    def set_cluster_role(self, obj: dict) -> None:
        self.cluster_roles[(obj.get("metadata") or {}).get("name") or ""] = compile_rules(obj.get("rules"))
        self._changed()

    def delete_cluster_role(self, name: str) -> None:
        if self.cluster_roles.pop(name, None) is not None:
            self._changed()

    def set_role_binding(self, obj: dict) -> None:
        binding = Binding.from_object(obj)
        self.delete_role_binding(binding.namespace, binding.name)
        self.role_bindings[(binding.namespace, binding.name)] = binding
        by_subject = self._namespaced_by_subject[binding.namespace]
        for subject in binding.subjects:
            key = subject.key()
            if key is not None:
                by_subject[key].add(binding.name)
        self._changed()

    def delete_role_binding(self, namespace: str, name: str) -> None:
        old = self.role_bindings.pop((namespace, name), None)
        if old is None:
            return
        by_subject = self._namespaced_by_subject[namespace]
        for subject in old.subjects:
            key = subject.key()
            if key is not None and key in by_subject:
                by_subject[key].discard(name)
                if not by_subject[key]:
                    del by_subject[key]
        if not by_subject:
            del self._namespaced_by_subject[namespace]
        self._changed()

    def set_cluster_role_binding(self, obj: dict) -> None:
        binding = Binding.from_object(obj)
        self.delete_cluster_role_binding(binding.name)
        self.cluster_role_bindings[binding.name] = binding
        for subject in binding.subjects:
            key = subject.key()
            if key is not None:
                self._cluster_by_subject[key].add(binding.name)
        self._changed()

    def delete_cluster_role_binding(self, name: str) -> None:
        old = self.cluster_role_bindings.pop(name, None)
        if old is None:
            return
        for subject in old.subjects:
            key = subject.key()
            if key is not None and key in self._cluster_by_subject:
                self._cluster_by_subject[key].discard(name)
                if not self._cluster_by_subject[key]:
                    del self._cluster_by_subject[key]
        self._changed()

    # ------------------------------------------------------------ resolution

    def _role_rules(self, binding: Binding) -> tuple[Optional[tuple[CompiledRule, ...]], str]:
        if binding.role_kind == "ClusterRole":
            rules = self.cluster_roles.get(binding.role_name)
            return rules, "" if rules is not None else \
                f'clusterrole.rbac.authorization.k8s.io "{binding.role_name}" not found'
        if binding.role_kind == "Role":
            rules = self.roles.get((binding.namespace, binding.role_name)) if binding.namespace else None
            return rules, "" if rules is not None else \
                f'role.rbac.authorization.k8s.io "{binding.role_name}" not found'
        return None, f'unsupported role reference kind: "{binding.role_kind}"'

    def resolve(self, user: Optional[UserInfo], namespace: str) -> Resolved:
        """The rules that apply to ``user`` in ``namespace`` ("" = cluster-wide only), cached."""
        cache_key = (user.name, user.groups, namespace) if user is not None else ("", (), namespace)
        found = self._cache.get(cache_key)
        if found is not None:
            return found
        keys = subject_keys(user)
        sources: list[tuple[str, tuple[CompiledRule, ...]]] = []
        errors: list[str] = []
        walks: list[tuple[dict[SubjectKey, set[str]], dict, str]] = [
            (self._cluster_by_subject, self.cluster_role_bindings, "")]
        if namespace and namespace in self._namespaced_by_subject:
            walks.append((self._namespaced_by_subject[namespace], self.role_bindings, namespace))
        for by_subject, bindings, ns in walks:
            names: set[str] = set()
            for key in keys:
                names.update(by_subject.get(key, ()))
            for name in sorted(names):
                binding = bindings[(ns, name) if ns else name]
                subject = binding.first_subject_for(keys)
                if subject is None:
                    continue
                rules, error = self._role_rules(binding)
                if rules is None:
                    errors.append(error)
                    continue
                sources.append((binding.describe(subject), rules))
        resolved = Resolved(tuple(sources), tuple(errors))
        if len(self._cache) >= CACHE_ENTRIES:
            self._cache = {}
        self._cache[cache_key] = resolved
        return resolved

    def allowed_by(self, user: Optional[UserInfo], attributes: Attributes) -> tuple[Optional[str], tuple[str, ...]]:
        """The binding that allows the request (described as upstream does), or None; and resolution errors."""
        resolved = self.resolve(user, attributes.namespace)
        for source, rules in resolved.sources:
            for compiled in rules:
                if compiled.allows(attributes):
                    return source, ()
        return None, resolved.errors

    def rules_for(self, user: Optional[UserInfo], namespace: str) -> tuple[list[dict], tuple[str, ...]]:
        """Every rule that applies (the PolicyRule dicts), cluster-wide ones first; and resolution errors."""
        resolved = self.resolve(user, namespace)
        return [compiled.raw for _, rules in resolved.sources for compiled in rules], resolved.errors
