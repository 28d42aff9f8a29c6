"""The merged discovery documents: local groups and the groups of extension API servers.

Ordering is upstream's: groups by the highest ``groupPriorityMinimum`` of
their APIServices (then by name), versions by ``versionPriority`` (then by
Kubernetes version order), the aggregator's own group first.  A local group
version without an APIService yet (a CRD created a moment ago) gets the
priority its APIService will have.  Extension servers' resources come from
their ``/apis/<group>/<version>`` documents, fetched by the availability
check and cached (``RemoteResources``).
"""
from __future__ import annotations

from typing import Iterable, Optional

from kapiserver.aggregator import priorities
from kapiserver.apis.apiregistration import apiservices as apiservice_kind
from kapiserver.endpoints import discovery
from kapiserver.registry.resource_type import ResourceType

# (group, version) -> the extension server's APIResourceList
RemoteResources = dict[tuple[str, str], dict]


def _local_priority(t: ResourceType) -> tuple[int, int]:
    if t.group == apiservice_kind.GROUP:
        return priorities.APIREGISTRATION_GROUP_PRIORITY, 15
    found = priorities.builtin_priority(t.group, t.version)
    if found is not None and not t.is_crd:
        return found
    return priorities.CRD_GROUP_PRIORITY_MINIMUM, priorities.CRD_VERSION_PRIORITY


def ordered_group_versions(local_types: Iterable[ResourceType], apiservices: Iterable[dict]
                           ) -> list[tuple[str, list[tuple[str, bool]]]]:
    """[(group, [(version, served_remotely)])] of every named group, in upstream's discovery order.

    A remote APIService's group version is listed whether or not it is available (as
    upstream's ``/apis``); a local one only when something here serves it.
    """
    local: dict[tuple[str, str], tuple[int, int]] = {}
    for t in local_types:
        if t.group:
            local.setdefault((t.group, t.version), _local_priority(t))
    entries: dict[tuple[str, str], tuple[int, int, bool]] = {}
    for obj in apiservices:
        spec = obj.get("spec") or {}
        group, version = spec.get("group") or "", spec.get("version") or ""
        if not group:
            continue
        remote = not apiservice_kind.is_local(obj)
        if not remote and (group, version) not in local:
            continue
        if group == apiservice_kind.GROUP:
            continue
        entries[(group, version)] = (int(spec.get("groupPriorityMinimum") or 0),
                                     int(spec.get("versionPriority") or 0), remote)
    for gv, (gp, vp) in local.items():
        entries.setdefault(gv, (gp, vp, False))
    groups: dict[str, list[tuple[int, int, str, bool]]] = {}
    for (group, version), (gp, vp, remote) in entries.items():
        groups.setdefault(group, []).append((gp, vp, version, remote))
    ordered = sorted(groups.items(), key=lambda item: (-max(e[0] for e in item[1]), item[0]))
    out = []
    for group, versions in ordered:
        versions.sort(key=lambda e: (-e[1], discovery.version_priority_key(e[2])))
        out.append((group, [(v, remote) for _, _, v, remote in versions]))
    return out


def _gv(group: str, version: str) -> dict:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_group(group: str, versions: list[str]) -> dict:
    return {"name": group, "versions": [_gv(group, v) for v in versions], "preferredVersion": _gv(group, versions[0])}


def api_group_list(local_types: list[ResourceType], apiservices: list[dict]) -> dict:
    """``/apis``: APIGroupList."""
    groups = [api_group(g, [v for v, _ in vs]) for g, vs in ordered_group_versions(local_types, apiservices)]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group_document(group: str, local_types: list[ResourceType], apiservices: list[dict]) -> Optional[dict]:
    """``/apis/<group>`` for a group with a remote APIService."""
    for name, versions in ordered_group_versions(local_types, apiservices):
        if name == group:
            return {"kind": "APIGroup", "apiVersion": "v1", **api_group(group, [v for v, _ in versions])}
    return None


def _aggregated_from_resource_list(resource_list: dict) -> list[dict]:
    """An extension server's APIResourceList as the resources of an aggregated discovery version."""
    entries = [r for r in resource_list.get("resources") or () if isinstance(r, dict) and r.get("name")]
    parents: dict[str, dict] = {}
    out = []
    for r in entries:
        if "/" in r["name"]:
            continue
        item: dict = {"resource": r["name"],
                      "responseKind": {"group": r.get("group", ""), "version": r.get("version", ""),
                                       "kind": r.get("kind", "")},
                      "scope": "Namespaced" if r.get("namespaced") else "Cluster",
                      "singularResource": r.get("singularName", ""), "verbs": list(r.get("verbs") or ())}
        if r.get("shortNames"):
            item["shortNames"] = list(r["shortNames"])
        if r.get("categories"):
            item["categories"] = list(r["categories"])
        parents[r["name"]] = item
        out.append(item)
    for r in entries:
        parent, _, sub = r["name"].partition("/")
        if sub and parent in parents:
            parents[parent].setdefault("subresources", []).append({
                "subresource": sub,
                "responseKind": {"group": r.get("group", ""), "version": r.get("version", ""),
                                 "kind": r.get("kind", "")},
                "verbs": list(r.get("verbs") or ())})
    return sorted(out, key=lambda item: item["resource"])


def aggregated_discovery(local_types: list[ResourceType], apiservices: list[dict], remote: RemoteResources,
                         version: str = "v2") -> dict:
    """``/apis`` as APIGroupDiscoveryList: local groups as the kube link describes them, extension
    servers' from their cached resource lists (a group version not fetched yet is left out)."""
    local_named = [t for t in local_types if t.group]
    local_doc = discovery.aggregated_discovery(local_named, legacy=False, version=version)
    local_versions = {(item["metadata"]["name"], v["version"]): v
                      for item in local_doc["items"] for v in item["versions"]}
    items = []
    for group, versions in ordered_group_versions(local_named, apiservices):
        entries = []
        for v, is_remote in versions:
            if is_remote:
                resources = remote.get((group, v))
                if resources is None:
                    continue
                entries.append({"version": v, "resources": _aggregated_from_resource_list(resources),
                                "freshness": "Current"})
            elif (group, v) in local_versions:
                entries.append(local_versions[(group, v)])
        if entries:
            items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}", "metadata": {},
            "items": items}
