"""Discovery documents (``/api``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``, aggregated).

Pure functions over the served :class:`ResourceType` list; the endpoint layer
serves what they return.  Output is deterministic (groups by upstream's
priority, versions by Kubernetes version priority, resources by name), so the
serialized bytes can be hashed for ETags.
"""
from __future__ import annotations

import base64
import hashlib
import re
from typing import Iterable

from kapiserver.machinery import errors
from kapiserver.registry.resource_type import ResourceType

SUBRESOURCE_VERBS = ["get", "patch", "update"]

# Upstream's group priorities (kube-aggregator), highest first; any other group
# (custom resources, aggregated APIs) comes after these, by name.
_GROUP_ORDER = (
    "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
    "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy",
    "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
    "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io",
    "flowcontrol.apiserver.k8s.io", "internal.apiserver.k8s.io", "resource.k8s.io", "storagemigration.k8s.io",
)
_GROUP_RANK = {g: i for i, g in enumerate(_GROUP_ORDER)}

_KUBE_VERSION = re.compile(r"^v([1-9][0-9]*)(?:(alpha|beta)([1-9][0-9]*))?$")
_STABILITY = {None: 0, "beta": 1, "alpha": 2}


def version_priority_key(version: str) -> tuple:
    """Sort key putting versions in Kubernetes priority order (v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > foo)."""
    m = _KUBE_VERSION.match(version)
    if not m:
        return (3, 0, 0, version)
    major, stability, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    return (_STABILITY[stability], -major, -minor, version)


def group_priority_key(group: str) -> tuple:
    return (_GROUP_RANK.get(group, len(_GROUP_ORDER)), group)


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """Upstream's storageVersionHash: base64 of the first 8 bytes of sha256("group/version/kind")."""
    return base64.b64encode(hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()[:8]).decode()


def _group_versions(types: Iterable[ResourceType]) -> dict[str, list[str]]:
    """group → its versions in priority order."""
    out: dict[str, set[str]] = {}
    for t in types:
        out.setdefault(t.group, set()).add(t.version)
    return {g: sorted(vs, key=version_priority_key) for g, vs in out.items()}


def _gv(group: str, version: str) -> dict:
    return {"groupVersion": f"{group}/{version}" if group else version, "version": version}


def api_versions(server_address: str = "127.0.0.1:6443") -> dict:
    """``/api``: the legacy core group's versions."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _api_group(group: str, versions: list[str]) -> dict:
    return {"name": group, "versions": [_gv(group, v) for v in versions],
            "preferredVersion": _gv(group, versions[0])}


def api_group_list(types: list[ResourceType]) -> dict:
    """``/apis``: every named group with its versions and preferred version."""
    by_group = _group_versions(t for t in types if t.group)
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_api_group(g, by_group[g]) for g in sorted(by_group, key=group_priority_key)]}


def _not_found() -> errors.StatusError:
    return errors.resource_not_found()


def api_group(group: str, types: list[ResourceType]) -> dict:
    """``/apis/<group>``; 404 NotFound when no type of that group is served."""
    versions = _group_versions(t for t in types if t.group == group).get(group)
    if not versions:
        raise _not_found()
    return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(group, versions)}


def _sorted_verbs(verbs: Iterable[str]) -> list[str]:
    return sorted(set(verbs))


# the order apiextensions-apiserver lists a custom resource's verbs in
_CRD_VERB_ORDER = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")


def _verbs(t: ResourceType) -> list[str]:
    if t.is_crd:
        return [v for v in _CRD_VERB_ORDER if v in t.verbs] + sorted(set(t.verbs) - set(_CRD_VERB_ORDER))
    return _sorted_verbs(t.verbs)


def _subresources(t: ResourceType) -> list[tuple[str, str, str, str, list[str]]]:
    """(name, group, version, kind, verbs) of each subresource, by name as upstream lists them;
    group and version are set only for another group's kind (autoscaling/v1 Scale)."""
    subs = []
    if t.has_status:
        subs.append(("status", "", "", t.kind, list(SUBRESOURCE_VERBS)))
    if t.scale is not None:
        subs.append(("scale", "autoscaling", "v1", "Scale", list(SUBRESOURCE_VERBS)))
    for sub in t.extra_subresources:
        subs.append((sub.name, sub.group, sub.version, sub.kind or t.kind, _sorted_verbs(sub.verbs)))
    return sorted(subs)


def _resource_entries(t: ResourceType) -> list[dict]:
    main: dict = {"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
                  "verbs": _verbs(t)}
    if t.short_names:
        main["shortNames"] = list(t.short_names)
    if t.categories:
        main["categories"] = list(t.categories)
    if t.stored:  # upstream gives a hash only to kinds kept in storage
        group, _, version = t.storage_version.rpartition("/") if t.storage_version else (t.group, "", t.version)
        main["storageVersionHash"] = storage_version_hash(group, version, t.kind)
    entries = [main]
    for name, group, version, kind, verbs in _subresources(t):
        entry: dict = {"name": f"{t.plural}/{name}", "singularName": "", "namespaced": t.namespaced}
        if group or version:
            entry.update(group=group, version=version)
        entry.update(kind=kind, verbs=verbs)
        entries.append(entry)
    return entries


def api_resource_list(group: str, version: str, types: list[ResourceType]) -> dict:
    """``/api/v1`` or ``/apis/<group>/<version>``; 404 NotFound when that group-version is not served."""
    mine = [t for t in types if t.group == group and t.version == version]
    if not mine:
        raise _not_found()
    resources = [e for t in sorted(mine, key=lambda t: t.plural) for e in _resource_entries(t)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": _gv(group, version)["groupVersion"],
            "resources": resources}


# ------------------------------------------------------------------ aggregated (apidiscovery.k8s.io)

def _aggregated_resource(t: ResourceType) -> dict:
    # custom resources name their own group and version (apiextensions-apiserver's discovery)
    kind_group, kind_version = (t.group, t.version) if t.is_crd else ("", "")
    out: dict = {"resource": t.plural, "responseKind": {"group": kind_group, "version": kind_version, "kind": t.kind},
                 "scope": "Namespaced" if t.namespaced else "Cluster", "singularResource": t.singular,
                 "verbs": _verbs(t)}
    if t.short_names:
        out["shortNames"] = list(t.short_names)
    if t.categories:
        out["categories"] = list(t.categories)
    subs = [{"subresource": name, "responseKind": {"group": group or kind_group, "version": version or kind_version,
                                                   "kind": kind},
             "verbs": verbs} for name, group, version, kind, verbs in _subresources(t)]
    if subs:
        out["subresources"] = subs
    return out


def aggregated_discovery(types: list[ResourceType], legacy: bool, version: str = "v2") -> dict:
    """``/api`` or ``/apis`` as ``APIGroupDiscoveryList`` (``apidiscovery.k8s.io/<version>``).

    ``legacy`` selects the core group (``/api``); otherwise every named group.
    """
    wanted = [t for t in types if (t.group == "") == legacy]
    by_group = _group_versions(wanted)
    items = []
    for group in sorted(by_group, key=group_priority_key):
        versions = []
        for v in by_group[group]:
            mine = sorted((t for t in wanted if t.group == group and t.version == v), key=lambda t: t.plural)
            versions.append({"version": v, "resources": [_aggregated_resource(t) for t in mine],
                             "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}",
            "metadata": {}, "items": items}
