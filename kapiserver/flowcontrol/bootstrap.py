"""Upstream's bootstrap configuration of API Priority and Fairness (apis/flowcontrol/bootstrap).

The *mandatory* objects (``exempt`` and ``catch-all``, each a FlowSchema and a
PriorityLevelConfiguration) always exist: the filter imagines them until they
are stored, their specs are kept as they are here, and they cannot be given
another spec.  The *suggested* ones are created when missing and kept up to
date while their ``apf.kubernetes.io/autoupdate-spec`` annotation says
``true``.  Every object carries that annotation when created.
"""
from __future__ import annotations

import copy

GROUP = "flowcontrol.apiserver.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
AUTO_UPDATE_ANNOTATION = "apf.kubernetes.io/autoupdate-spec"

EXEMPT = "exempt"
CATCH_ALL = "catch-all"
# the flow schema and priority level of a request header response (k8s.io/api/flowcontrol/v1)
FLOW_SCHEMA_UID_HEADER = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID_HEADER = "X-Kubernetes-PF-PriorityLevel-UID"

SYSTEM_MASTERS = "system:masters"
ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
NODES = "system:nodes"
ALL_SERVICE_ACCOUNTS = "system:serviceaccounts"
KUBE_CONTROLLER_MANAGER = "system:kube-controller-manager"
KUBE_SCHEDULER = "system:kube-scheduler"


def _meta(name: str) -> dict:
    return {"name": name, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}}


def _priority_level(name: str, spec: dict) -> dict:
    return {"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": _meta(name), "spec": spec}


def _limited(shares: int, lendable: int, queues: int = 0, hand_size: int = 0, queue_length: int = 0) -> dict:
    response: dict = {"type": "Reject"}
    if queues:
        response = {"type": "Queue", "queuing": {"queues": queues, "handSize": hand_size,
                                                 "queueLengthLimit": queue_length}}
    return {"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable,
                                           "limitResponse": response}}


def _flow_schema(name: str, level: str, precedence: int, distinguisher: str, subjects: list,
                 resource_rules: list = (), non_resource_rules: list = ()) -> dict:  # type: ignore[assignment]
    rule: dict = {"subjects": subjects}
    if resource_rules:
        rule["resourceRules"] = list(resource_rules)
    if non_resource_rules:
        rule["nonResourceRules"] = list(non_resource_rules)
    spec: dict = {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence}
    if distinguisher:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = [rule]
    return {"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": _meta(name), "spec": spec}


def _groups(*names: str) -> list:
    return [{"kind": "Group", "group": {"name": n}} for n in names]


def _users(*names: str) -> list:
    return [{"kind": "User", "user": {"name": n}} for n in names]


def _kube_system_service_accounts(*names: str) -> list:
    return [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": n}} for n in names]


def _resources(verbs: list, groups: list, resources: list, cluster_scope: bool) -> dict:
    rule: dict = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if cluster_scope:
        rule["clusterScope"] = True
    rule["namespaces"] = ["*"]
    return rule


def _non_resources(verbs: list, urls: list) -> dict:
    return {"verbs": verbs, "nonResourceURLs": urls}


_EVERYTHING = _resources(["*"], ["*"], ["*"], True)
_EVERY_PATH = _non_resources(["*"], ["*"])
BY_USER, BY_NAMESPACE = "ByUser", "ByNamespace"

MANDATORY_PRIORITY_LEVELS = [
    _priority_level(CATCH_ALL, _limited(5, 0)),
    _priority_level(EXEMPT, {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
]
MANDATORY_FLOW_SCHEMAS = [
    _flow_schema(EXEMPT, EXEMPT, 1, "", _groups(SYSTEM_MASTERS), [_EVERYTHING], [_EVERY_PATH]),
    _flow_schema(CATCH_ALL, CATCH_ALL, 10000, BY_USER, _groups(ALL_UNAUTHENTICATED, ALL_AUTHENTICATED),
                 [_EVERYTHING], [_EVERY_PATH]),
]
SUGGESTED_PRIORITY_LEVELS = [
    _priority_level("system", _limited(30, 33, 64, 6, 50)),
    _priority_level("node-high", _limited(40, 25, 64, 6, 50)),
    _priority_level("leader-election", _limited(10, 0, 16, 4, 50)),
    _priority_level("workload-high", _limited(40, 50, 128, 6, 50)),
    _priority_level("workload-low", _limited(100, 90, 128, 6, 50)),
    _priority_level("global-default", _limited(20, 50, 128, 6, 50)),
]
_LEASES = _resources(["get", "create", "update"], ["coordination.k8s.io"], ["leases"], False)
SUGGESTED_FLOW_SCHEMAS = [
    _flow_schema("system-nodes", "system", 500, BY_USER, _groups(NODES), [_EVERYTHING], [_EVERY_PATH]),
    _flow_schema("system-node-high", "node-high", 400, BY_USER, _groups(NODES),
                 [_resources(["*"], [""], ["nodes", "nodes/status"], True),
                  _resources(["*"], ["coordination.k8s.io"], ["leases"], False)]),
    _flow_schema("probes", EXEMPT, 2, "", _groups(ALL_UNAUTHENTICATED, ALL_AUTHENTICATED), [],
                 [_non_resources(["get"], ["/healthz", "/readyz", "/livez"])]),
    _flow_schema("system-leader-election", "leader-election", 100, BY_USER,
                 _users(KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER) + _kube_system_service_accounts("*"), [_LEASES]),
    _flow_schema("workload-leader-election", "leader-election", 200, BY_USER, _kube_system_service_accounts("*"),
                 [_resources(["get", "create", "update"], [""], ["endpoints", "configmaps"], False), _LEASES]),
    _flow_schema("endpoint-controller", "workload-high", 150, BY_USER,
                 _users(KUBE_CONTROLLER_MANAGER)
                 + _kube_system_service_accounts("endpoint-controller", "endpointslicemirroring-controller"),
                 [_resources(["get", "create", "update"], [""], ["endpoints"], False)]),
    _flow_schema("kube-controller-manager", "workload-high", 800, BY_NAMESPACE, _users(KUBE_CONTROLLER_MANAGER),
                 [_EVERYTHING], [_EVERY_PATH]),
    _flow_schema("kube-scheduler", "workload-high", 800, BY_NAMESPACE, _users(KUBE_SCHEDULER),
                 [_EVERYTHING], [_EVERY_PATH]),
    _flow_schema("kube-system-service-accounts", "workload-high", 900, BY_NAMESPACE,
                 _kube_system_service_accounts("*"), [_EVERYTHING], [_EVERY_PATH]),
    _flow_schema("service-accounts", "workload-low", 9000, BY_USER, _groups(ALL_SERVICE_ACCOUNTS),
                 [_EVERYTHING], [_EVERY_PATH]),
    _flow_schema("global-default", "global-default", 9900, BY_USER, _groups(ALL_UNAUTHENTICATED, ALL_AUTHENTICATED),
                 [_EVERYTHING], [_EVERY_PATH]),
]


def mandatory_priority_level(name: str) -> dict:
    """A copy of the mandatory PriorityLevelConfiguration ``name``."""
    return copy.deepcopy(next(p for p in MANDATORY_PRIORITY_LEVELS if p["metadata"]["name"] == name))


def mandatory_flow_schema(name: str) -> dict:
    return copy.deepcopy(next(f for f in MANDATORY_FLOW_SCHEMAS if f["metadata"]["name"] == name))
