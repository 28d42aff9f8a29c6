"""Upstream's bootstrap RBAC policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), as of v1.32.

What kube-apiserver creates, and reconciles on every start, with its default
feature gates: the user-facing roles (``cluster-admin``; ``admin``, ``edit``,
``view`` aggregated from the ``system:aggregate-to-*`` roles), the discovery,
basic-user and public-info-viewer roles that every caller gets, the roles of
the control-plane components (kube-controller-manager, kube-scheduler,
kube-proxy, nodes) and of each controller of kube-controller-manager (bound to
its service account in kube-system), and the few namespaced roles of
kube-system and kube-public.  kapiserver's own controllers act in-process,
not as users, so they need no role of their own.

Every object carries the ``kubernetes.io/bootstrapping: rbac-defaults`` label
and the ``rbac.authorization.kubernetes.io/autoupdate: "true"`` annotation;
each call returns fresh objects.
"""
from __future__ import annotations

from typing import Optional, Union

from kapiserver.auth.rbac.policy_rules import rule

GROUP = "rbac.authorization.k8s.io"
API_VERSION = f"{GROUP}/v1"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE_ANNOTATION = "rbac.authorization.kubernetes.io/autoupdate"
CONTROLLER_ROLE_PREFIX = "system:controller:"

Strings = Union[str, tuple[str, ...]]


def _t(value: Strings) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value


def _rule(verbs: Strings, groups: Strings, resources: Strings, names: Strings = ()) -> dict:
    return rule(_t(verbs), _t(groups), _t(resources), names=_t(names))


def _urls(verbs: Strings, urls: Strings) -> dict:
    return rule(_t(verbs), urls=_t(urls))


def _metadata(name: str, namespace: str = "", labels: Optional[dict] = None) -> dict:
    md: dict = {"name": name}
    if namespace:
        md["namespace"] = namespace
    md["labels"] = {**BOOTSTRAP_LABELS, **(labels or {})}
    md["annotations"] = {AUTOUPDATE_ANNOTATION: "true"}
    return md


def _cluster_role(name: str, rules: list[dict], labels: Optional[dict] = None,
                  aggregate: Optional[dict] = None) -> dict:
    obj: dict = {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": _metadata(name, labels=labels)}
    if aggregate is not None:
        # the rules are whatever the aggregation controller gathers from the selected roles
        obj["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": aggregate}]}
    else:
        obj["rules"] = rules
    return obj


def _role(namespace: str, name: str, rules: list[dict]) -> dict:
    return {"apiVersion": API_VERSION, "kind": "Role", "metadata": _metadata(name, namespace), "rules": rules}


def _user(name: str) -> dict:
    return {"kind": "User", "apiGroup": GROUP, "name": name}


def _group(name: str) -> dict:
    return {"kind": "Group", "apiGroup": GROUP, "name": name}


def _sa(namespace: str, name: str) -> dict:
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def _cluster_binding(name: str, subjects: list[dict], role: str = "") -> dict:
    obj: dict = {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": _metadata(name),
                 "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role or name}}
    if subjects:  # system:node keeps no subjects (the Node authorizer replaced it)
        obj["subjects"] = subjects
    return obj


def _binding(namespace: str, name: str, subjects: list[dict], role: str = "") -> dict:
    return {"apiVersion": API_VERSION, "kind": "RoleBinding", "metadata": _metadata(name, namespace),
            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": role or name}, "subjects": subjects}


def node_rules() -> list[dict]:
    """The ``system:node`` ClusterRole's rules (upstream's NodeRules): what the Node authorizer allows
    every node beyond what it decides itself.  The role is bound to no one: the Node authorizer applies it."""
    return [
        _rule('create', 'authentication.k8s.io', 'tokenreviews'),
        _rule('create', 'authorization.k8s.io', ('localsubjectaccessreviews', 'subjectaccessreviews')),
        _rule(('get', 'list', 'watch'), '', 'services'),
        _rule(('create', 'get', 'list', 'watch'), '', 'nodes'),
        _rule(('patch', 'update'), '', 'nodes/status'),
        _rule(('patch', 'update'), '', 'nodes'),
        _rule(('create', 'patch', 'update'), '', 'events'),
        _rule(('get', 'list', 'watch'), '', 'pods'),
        _rule(('create', 'delete'), '', 'pods'),
        _rule(('patch', 'update'), '', 'pods/status'),
        _rule('create', '', 'pods/eviction'),
        _rule(('get', 'list', 'watch'), '', ('configmaps', 'secrets')),
        _rule('get', '', ('persistentvolumeclaims', 'persistentvolumes')),
        _rule('get', '', 'endpoints'),
        _rule(('create', 'get', 'list', 'watch'), 'certificates.k8s.io', 'certificatesigningrequests'),
        _rule(('create', 'delete', 'get', 'patch', 'update'), 'coordination.k8s.io', 'leases'),
        _rule('get', 'storage.k8s.io', 'volumeattachments'),
        _rule('create', '', 'serviceaccounts/token'),
        _rule(('get', 'patch', 'update'), '', 'persistentvolumeclaims/status'),
        _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'csidrivers'),
        _rule(('create', 'delete', 'get', 'patch', 'update'), 'storage.k8s.io', 'csinodes'),
        _rule(('get', 'list', 'watch'), 'node.k8s.io', 'runtimeclasses')]


def cluster_roles() -> list[dict]:
    """The ClusterRoles, the controllers' included."""
    return [
        _cluster_role('admin', [], aggregate={'rbac.authorization.k8s.io/aggregate-to-admin': 'true'}),
        _cluster_role('cluster-admin', [
            _rule('*', '*', '*'),
            _urls('*', '*')]),
        _cluster_role('edit', [], labels={'rbac.authorization.k8s.io/aggregate-to-admin': 'true'},
                      aggregate={'rbac.authorization.k8s.io/aggregate-to-edit': 'true'}),
        _cluster_role('system:aggregate-to-admin', [
            _rule('create', 'authorization.k8s.io', 'localsubjectaccessreviews'),
            _rule(('create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'),
                  'rbac.authorization.k8s.io',
                  ('rolebindings', 'roles'))], labels={'rbac.authorization.k8s.io/aggregate-to-admin': 'true'}),
        _cluster_role('system:aggregate-to-edit', [
            _rule(('get', 'list', 'watch'), '',
                  ('pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy', 'secrets', 'services/proxy')),
            _rule('impersonate', '', 'serviceaccounts'),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), '',
                  ('pods', 'pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy')),
            _rule('create', '', 'pods/eviction'),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), '',
                  ('configmaps', 'events', 'persistentvolumeclaims', 'replicationcontrollers',
                   'replicationcontrollers/scale', 'secrets', 'serviceaccounts', 'services', 'services/proxy')),
            _rule('create', '', 'serviceaccounts/token'),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), 'apps',
                  ('daemonsets', 'deployments', 'deployments/rollback', 'deployments/scale', 'replicasets',
                   'replicasets/scale', 'statefulsets', 'statefulsets/scale')),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), 'autoscaling',
                  'horizontalpodautoscalers'),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), 'batch', ('cronjobs', 'jobs')),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), 'extensions',
                  ('daemonsets', 'deployments', 'deployments/rollback', 'deployments/scale', 'ingresses',
                   'networkpolicies', 'replicasets', 'replicasets/scale', 'replicationcontrollers/scale')),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), 'policy', 'poddisruptionbudgets'),
            _rule(('create', 'delete', 'deletecollection', 'patch', 'update'), 'networking.k8s.io',
                  ('ingresses', 'networkpolicies')),
            _rule(('create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'),
                  'coordination.k8s.io', 'leases')], labels={'rbac.authorization.k8s.io/aggregate-to-edit': 'true'}),
        _cluster_role('system:aggregate-to-view', [
            _rule(('get', 'list', 'watch'), '',
                  ('configmaps', 'endpoints', 'persistentvolumeclaims', 'persistentvolumeclaims/status', 'pods',
                   'replicationcontrollers', 'replicationcontrollers/scale', 'serviceaccounts', 'services',
                   'services/status')),
            _rule(('get', 'list', 'watch'), '',
                  ('bindings', 'events', 'limitranges', 'namespaces/status', 'pods/log', 'pods/status',
                   'replicationcontrollers/status', 'resourcequotas', 'resourcequotas/status')),
            _rule(('get', 'list', 'watch'), '', 'namespaces'),
            _rule(('get', 'list', 'watch'), 'discovery.k8s.io', 'endpointslices'),
            _rule(('get', 'list', 'watch'), 'apps',
                  ('controllerrevisions', 'daemonsets', 'daemonsets/status', 'deployments', 'deployments/scale',
                   'deployments/status', 'replicasets', 'replicasets/scale', 'replicasets/status', 'statefulsets',
                   'statefulsets/scale', 'statefulsets/status')),
            _rule(('get', 'list', 'watch'), 'autoscaling',
                  ('horizontalpodautoscalers', 'horizontalpodautoscalers/status')),
            _rule(('get', 'list', 'watch'), 'batch', ('cronjobs', 'cronjobs/status', 'jobs', 'jobs/status')),
            _rule(('get', 'list', 'watch'), 'extensions',
                  ('daemonsets', 'daemonsets/status', 'deployments', 'deployments/scale', 'deployments/status',
                   'ingresses', 'ingresses/status', 'networkpolicies', 'replicasets', 'replicasets/scale',
                   'replicasets/status', 'replicationcontrollers/scale')),
            _rule(('get', 'list', 'watch'), 'policy', ('poddisruptionbudgets', 'poddisruptionbudgets/status')),
            _rule(('get', 'list', 'watch'), 'networking.k8s.io',
                  ('ingresses', 'ingresses/status',
                   'networkpolicies'))], labels={'rbac.authorization.k8s.io/aggregate-to-view': 'true'}),
        _cluster_role('system:auth-delegator', [
            _rule('create', 'authentication.k8s.io', 'tokenreviews'),
            _rule('create', 'authorization.k8s.io', 'subjectaccessreviews')]),
        _cluster_role('system:basic-user', [
            _rule('create', 'authorization.k8s.io', ('selfsubjectaccessreviews', 'selfsubjectrulesreviews')),
            _rule('create', 'authentication.k8s.io', 'selfsubjectreviews')]),
        _cluster_role('system:certificates.k8s.io:certificatesigningrequests:nodeclient', [
            _rule('create', 'certificates.k8s.io', 'certificatesigningrequests/nodeclient')]),
        _cluster_role('system:certificates.k8s.io:certificatesigningrequests:selfnodeclient', [
            _rule('create', 'certificates.k8s.io', 'certificatesigningrequests/selfnodeclient')]),
        _cluster_role('system:certificates.k8s.io:kube-apiserver-client-approver', [
            _rule('approve', 'certificates.k8s.io', 'signers', names='kubernetes.io/kube-apiserver-client')]),
        _cluster_role('system:certificates.k8s.io:kube-apiserver-client-kubelet-approver', [
            _rule('approve', 'certificates.k8s.io', 'signers', names='kubernetes.io/kube-apiserver-client-kubelet')]),
        _cluster_role('system:certificates.k8s.io:kubelet-serving-approver', [
            _rule('approve', 'certificates.k8s.io', 'signers', names='kubernetes.io/kubelet-serving')]),
        _cluster_role('system:certificates.k8s.io:legacy-unknown-approver', [
            _rule('approve', 'certificates.k8s.io', 'signers', names='kubernetes.io/legacy-unknown')]),
        _cluster_role('system:discovery', [
            _urls('get', ('/api', '/api/*', '/apis', '/apis/*', '/healthz', '/livez', '/openapi', '/openapi/*',
                          '/readyz', '/version', '/version/'))]),
        _cluster_role('system:heapster', [
            _rule(('get', 'list', 'watch'), '', ('events', 'namespaces', 'nodes', 'pods')),
            _rule(('get', 'list', 'watch'), 'extensions', 'deployments')]),
        _cluster_role('system:kube-aggregator', [
            _rule(('get', 'list', 'watch'), '', ('endpoints', 'services'))]),
        _cluster_role('system:kube-controller-manager', [
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule('create', 'coordination.k8s.io', 'leases'),
            _rule(('get', 'update'), 'coordination.k8s.io', 'leases', names='kube-controller-manager'),
            _rule('create', '', ('secrets', 'serviceaccounts')),
            _rule('delete', '', 'secrets'),
            _rule('get', '', ('configmaps', 'namespaces', 'secrets', 'serviceaccounts')),
            _rule('update', '', ('secrets', 'serviceaccounts')),
            _rule('create', 'authentication.k8s.io', 'tokenreviews'),
            _rule('create', 'authorization.k8s.io', 'subjectaccessreviews'),
            _rule(('list', 'watch'), '*', '*'),
            _rule('create', '', 'serviceaccounts/token')]),
        _cluster_role('system:kube-dns', [
            _rule(('list', 'watch'), '', ('endpoints', 'services'))]),
        _cluster_role('system:kube-scheduler', [
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule('create', 'coordination.k8s.io', 'leases'),
            _rule(('get', 'list', 'update', 'watch'), 'coordination.k8s.io', 'leases', names='kube-scheduler'),
            _rule(('create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'),
                  'coordination.k8s.io', 'leasecandidates'),
            _rule(('get', 'list', 'watch'), '', 'nodes'),
            _rule(('delete', 'get', 'list', 'watch'), '', 'pods'),
            _rule('create', '', ('bindings', 'pods/binding')),
            _rule(('patch', 'update'), '', 'pods/status'),
            _rule(('get', 'list', 'watch'), '', ('replicationcontrollers', 'services')),
            _rule(('get', 'list', 'watch'), ('apps', 'extensions'), 'replicasets'),
            _rule(('get', 'list', 'watch'), 'apps', 'statefulsets'),
            _rule(('get', 'list', 'watch'), 'policy', 'poddisruptionbudgets'),
            _rule(('get', 'list', 'watch'), '', ('persistentvolumeclaims', 'persistentvolumes')),
            _rule('create', 'authentication.k8s.io', 'tokenreviews'),
            _rule('create', 'authorization.k8s.io', 'subjectaccessreviews'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'csinodes'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'volumeattachments'),
            _rule(('get', 'list', 'watch'), '', 'namespaces'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'csidrivers'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'csistoragecapacities')]),
        _cluster_role('system:kubelet-api-admin', [
            _rule(('get', 'list', 'watch'), '', 'nodes'),
            _rule('proxy', '', 'nodes'),
            _rule('*', '', ('nodes/log', 'nodes/metrics', 'nodes/proxy', 'nodes/stats'))]),
        _cluster_role('system:monitoring', [
            _urls('get', ('/healthz', '/healthz/*', '/livez', '/livez/*', '/metrics', '/metrics/slis', '/readyz',
                          '/readyz/*'))]),
        _cluster_role('system:node', node_rules()),
        _cluster_role('system:node-bootstrapper', [
            _rule(('create', 'get', 'list', 'watch'), 'certificates.k8s.io', 'certificatesigningrequests')]),
        _cluster_role('system:node-problem-detector', [
            _rule('get', '', 'nodes'),
            _rule('patch', '', 'nodes/status'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:node-proxier', [
            _rule(('list', 'watch'), '', ('endpoints', 'services')),
            _rule(('get', 'list', 'watch'), '', 'nodes'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule(('list', 'watch'), 'discovery.k8s.io', 'endpointslices')]),
        _cluster_role('system:persistent-volume-provisioner', [
            _rule(('create', 'delete', 'get', 'list', 'watch'), '', 'persistentvolumes'),
            _rule(('get', 'list', 'update', 'watch'), '', 'persistentvolumeclaims'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'storageclasses'),
            _rule('watch', '', 'events'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:public-info-viewer', [
            _urls('get', ('/healthz', '/livez', '/readyz', '/version', '/version/'))]),
        _cluster_role('system:service-account-issuer-discovery', [
            _urls('get', ('/.well-known/openid-configuration', '/.well-known/openid-configuration/',
                          '/openid/v1/jwks', '/openid/v1/jwks/'))]),
        _cluster_role('system:volume-scheduler', [
            _rule(('get', 'list', 'patch', 'update', 'watch'), '', 'persistentvolumes'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'storageclasses'),
            _rule(('get', 'list', 'patch', 'update', 'watch'), '', 'persistentvolumeclaims')]),
        _cluster_role('view', [], labels={'rbac.authorization.k8s.io/aggregate-to-edit': 'true'},
                      aggregate={'rbac.authorization.k8s.io/aggregate-to-view': 'true'}),
    ] + controller_roles()


def controller_roles() -> list[dict]:
    """One ClusterRole per kube-controller-manager controller (``system:controller:<name>``)."""
    return [
        _cluster_role('system:controller:attachdetach-controller', [
            _rule(('list', 'watch'), '', ('persistentvolumeclaims', 'persistentvolumes')),
            _rule(('get', 'list', 'watch'), '', 'nodes'),
            _rule(('patch', 'update'), '', 'nodes/status'),
            _rule(('list', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule(('create', 'delete', 'get', 'list', 'watch'), 'storage.k8s.io', 'volumeattachments'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'csidrivers'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'csinodes')]),
        _cluster_role('system:controller:certificate-controller', [
            _rule(('delete', 'get', 'list', 'watch'), 'certificates.k8s.io', 'certificatesigningrequests'),
            _rule('update', 'certificates.k8s.io',
                  ('certificatesigningrequests/approval', 'certificatesigningrequests/status')),
            _rule('approve', 'certificates.k8s.io', 'signers', names='kubernetes.io/kube-apiserver-client-kubelet'),
            _rule('sign', 'certificates.k8s.io', 'signers',
                  names=('kubernetes.io/kube-apiserver-client', 'kubernetes.io/kube-apiserver-client-kubelet',
                         'kubernetes.io/kubelet-serving', 'kubernetes.io/legacy-unknown')),
            _rule('create', 'authorization.k8s.io', 'subjectaccessreviews'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:clusterrole-aggregation-controller', [
            _rule(('escalate', 'get', 'list', 'patch', 'update', 'watch'), 'rbac.authorization.k8s.io',
                  'clusterroles')]),
        _cluster_role('system:controller:cronjob-controller', [
            _rule(('get', 'list', 'update', 'watch'), 'batch', 'cronjobs'),
            _rule(('create', 'delete', 'get', 'list', 'patch', 'update', 'watch'), 'batch', 'jobs'),
            _rule('update', 'batch', 'cronjobs/status'),
            _rule('update', 'batch', 'cronjobs/finalizers'),
            _rule(('delete', 'list', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:daemon-set-controller', [
            _rule(('get', 'list', 'watch'), ('apps', 'extensions'), 'daemonsets'),
            _rule('update', ('apps', 'extensions'), 'daemonsets/status'),
            _rule('update', ('apps', 'extensions'), 'daemonsets/finalizers'),
            _rule(('list', 'watch'), '', 'nodes'),
            _rule(('create', 'delete', 'list', 'patch', 'watch'), '', 'pods'),
            _rule('create', '', 'pods/binding'),
            _rule(('create', 'delete', 'get', 'list', 'patch', 'update', 'watch'), 'apps', 'controllerrevisions'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:deployment-controller', [
            _rule(('get', 'list', 'update', 'watch'), ('apps', 'extensions'), 'deployments'),
            _rule('update', ('apps', 'extensions'), 'deployments/status'),
            _rule('update', ('apps', 'extensions'), 'deployments/finalizers'),
            _rule(('create', 'delete', 'get', 'list', 'patch', 'update', 'watch'), ('apps', 'extensions'),
                  'replicasets'),
            _rule(('get', 'list', 'update', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:disruption-controller', [
            _rule(('get', 'list', 'watch'), ('apps', 'extensions'), 'deployments'),
            _rule(('get', 'list', 'watch'), ('apps', 'extensions'), 'replicasets'),
            _rule(('get', 'list', 'watch'), '', 'replicationcontrollers'),
            _rule(('get', 'list', 'watch'), 'policy', 'poddisruptionbudgets'),
            _rule(('get', 'list', 'watch'), 'apps', 'statefulsets'),
            _rule('update', 'policy', 'poddisruptionbudgets/status'),
            _rule(('patch', 'update'), '', 'pods/status'),
            _rule('get', '*', '*/scale'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:endpoint-controller', [
            _rule(('get', 'list', 'watch'), '', ('pods', 'services')),
            _rule(('create', 'delete', 'get', 'list', 'update', 'watch'), '', 'endpoints'),
            _rule('create', '', 'endpoints/restricted'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:endpointslice-controller', [
            _rule(('get', 'list', 'watch'), '', ('nodes', 'pods', 'services')),
            _rule('update', '', 'services/finalizers'),
            _rule(('create', 'delete', 'get', 'list', 'update', 'watch'), 'discovery.k8s.io', 'endpointslices'),
            _rule('create', 'discovery.k8s.io', 'endpointslices/restricted'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:endpointslicemirroring-controller', [
            _rule(('get', 'list', 'watch'), '', ('endpoints', 'services')),
            _rule('update', '', 'services/finalizers'),
            _rule(('create', 'delete', 'get', 'list', 'update', 'watch'), 'discovery.k8s.io', 'endpointslices'),
            _rule('create', 'discovery.k8s.io', 'endpointslices/restricted'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:ephemeral-volume-controller', [
            _rule(('get', 'list', 'watch'), '', 'pods'),
            _rule('update', '', 'pods/finalizers'),
            _rule(('create', 'get', 'list', 'watch'), '', 'persistentvolumeclaims'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:expand-controller', [
            _rule(('get', 'list', 'patch', 'update', 'watch'), '', 'persistentvolumes'),
            _rule(('patch', 'update'), '', 'persistentvolumeclaims/status'),
            _rule(('get', 'list', 'watch'), '', 'persistentvolumeclaims'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule('get', '', 'services')]),
        _cluster_role('system:controller:generic-garbage-collector', [
            _rule(('delete', 'get', 'list', 'patch', 'update', 'watch'), '*', '*'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:horizontal-pod-autoscaler', [
            _rule(('get', 'list', 'watch'), 'autoscaling', 'horizontalpodautoscalers'),
            _rule('update', 'autoscaling', 'horizontalpodautoscalers/status'),
            _rule(('get', 'update'), '*', '*/scale'),
            _rule(('list', 'watch'), '', 'pods'),
            _rule(('list', 'watch'), 'metrics.k8s.io', 'pods'),
            _rule(('get', 'list', 'watch'), 'custom.metrics.k8s.io', '*'),
            _rule(('get', 'list', 'watch'), 'external.metrics.k8s.io', '*'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:job-controller', [
            _rule(('get', 'list', 'patch', 'update', 'watch'), 'batch', 'jobs'),
            _rule('update', 'batch', 'jobs/status'),
            _rule('update', 'batch', 'jobs/finalizers'),
            _rule(('create', 'delete', 'list', 'patch', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:legacy-service-account-token-cleaner', [
            _rule('get', '', 'configmaps', names='kube-apiserver-legacy-service-account-token-tracking'),
            _rule(('delete', 'patch'), '', 'secrets')]),
        _cluster_role('system:controller:namespace-controller', [
            _rule(('delete', 'get', 'list', 'watch'), '', 'namespaces'),
            _rule('update', '', ('namespaces/finalize', 'namespaces/status')),
            _rule(('delete', 'deletecollection', 'get', 'list', 'watch'), '*', '*')]),
        _cluster_role('system:controller:node-controller', [
            _rule(('delete', 'get', 'list', 'patch', 'update', 'watch'), '', 'nodes'),
            _rule(('patch', 'update'), '', 'nodes/status'),
            _rule(('patch', 'update'), '', 'pods/status'),
            _rule(('delete', 'get', 'list', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:persistent-volume-binder', [
            _rule(('create', 'delete', 'get', 'list', 'update', 'watch'), '', 'persistentvolumes'),
            _rule('update', '', 'persistentvolumes/status'),
            _rule(('get', 'list', 'update', 'watch'), '', 'persistentvolumeclaims'),
            _rule('update', '', 'persistentvolumeclaims/status'),
            _rule(('create', 'delete', 'get', 'list', 'watch'), '', 'pods'),
            _rule(('get', 'list', 'watch'), 'storage.k8s.io', 'storageclasses'),
            _rule(('list', 'watch'), '', 'nodes'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule('watch', '', 'events'),
            _rule('get', '', 'services')]),
        _cluster_role('system:controller:pod-garbage-collector', [
            _rule(('delete', 'list', 'watch'), '', 'pods'),
            _rule(('get', 'list', 'watch'), '', 'nodes'),
            _rule('patch', '', 'pods/status')]),
        _cluster_role('system:controller:pv-protection-controller', [
            _rule(('get', 'list', 'update', 'watch'), '', 'persistentvolumes'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:pvc-protection-controller', [
            _rule(('get', 'list', 'update', 'watch'), '', 'persistentvolumeclaims'),
            _rule(('get', 'list', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:replicaset-controller', [
            _rule(('get', 'list', 'update', 'watch'), ('apps', 'extensions'), 'replicasets'),
            _rule('update', ('apps', 'extensions'), 'replicasets/status'),
            _rule('update', ('apps', 'extensions'), 'replicasets/finalizers'),
            _rule(('create', 'delete', 'list', 'patch', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:replication-controller', [
            _rule(('get', 'list', 'update', 'watch'), '', 'replicationcontrollers'),
            _rule('update', '', 'replicationcontrollers/status'),
            _rule('update', '', 'replicationcontrollers/finalizers'),
            _rule(('create', 'delete', 'list', 'patch', 'watch'), '', 'pods'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:resourcequota-controller', [
            _rule(('list', 'watch'), '*', '*'),
            _rule('update', '', 'resourcequotas/status'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:root-ca-cert-publisher', [
            _rule(('create', 'update'), '', 'configmaps'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:route-controller', [
            _rule(('list', 'watch'), '', 'nodes'),
            _rule('patch', '', 'nodes/status'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:service-ca-cert-publisher', [
            _rule(('create', 'update'), '', 'configmaps'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:service-account-controller', [
            _rule('create', '', 'serviceaccounts'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:service-controller', [
            _rule(('get', 'list', 'watch'), '', 'services'),
            _rule(('patch', 'update'), '', 'services/status'),
            _rule(('list', 'watch'), '', 'nodes'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:statefulset-controller', [
            _rule(('list', 'watch'), '', 'pods'),
            _rule(('get', 'list', 'watch'), 'apps', 'statefulsets'),
            _rule('update', 'apps', 'statefulsets/status'),
            _rule('update', 'apps', 'statefulsets/finalizers'),
            _rule(('create', 'delete', 'get', 'patch', 'update'), '', 'pods'),
            _rule(('create', 'delete', 'get', 'list', 'patch', 'update', 'watch'), 'apps', 'controllerrevisions'),
            _rule(('create', 'get', 'list', 'watch'), '', 'persistentvolumeclaims'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events'),
            _rule(('delete', 'update'), '', 'persistentvolumeclaims'),
            _rule('update', '', 'pods/finalizers')]),
        _cluster_role('system:controller:ttl-after-finished-controller', [
            _rule(('delete', 'get', 'list', 'watch'), 'batch', 'jobs'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:ttl-controller', [
            _rule(('list', 'patch', 'update', 'watch'), '', 'nodes'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _cluster_role('system:controller:validatingadmissionpolicy-status-controller', [
            _rule(('get', 'list', 'watch'), 'admissionregistration.k8s.io', 'validatingadmissionpolicies'),
            _rule(('get', 'patch', 'update'), 'admissionregistration.k8s.io', 'validatingadmissionpolicies/status'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
    ]


def cluster_role_bindings() -> list[dict]:
    """The ClusterRoleBindings; each controller role is bound to its service account in kube-system."""
    controllers = [_cluster_binding(r["metadata"]["name"],
                                    [_sa("kube-system", r["metadata"]["name"][len(CONTROLLER_ROLE_PREFIX):])])
                   for r in controller_roles()]
    return [
        _cluster_binding('cluster-admin', [_group('system:masters')]),
        _cluster_binding('system:basic-user', [_group('system:authenticated')]),
        _cluster_binding('system:discovery', [_group('system:authenticated')]),
        _cluster_binding('system:kube-controller-manager', [_user('system:kube-controller-manager')]),
        _cluster_binding('system:kube-dns', [_sa('kube-system', 'kube-dns')]),
        _cluster_binding('system:kube-scheduler', [_user('system:kube-scheduler')]),
        _cluster_binding('system:monitoring', [_group('system:monitoring')]),
        _cluster_binding('system:node', []),
        _cluster_binding('system:node-proxier', [_user('system:kube-proxy')]),
        _cluster_binding('system:public-info-viewer',
                         [_group('system:authenticated'), _group('system:unauthenticated')]),
        _cluster_binding('system:service-account-issuer-discovery', [_group('system:serviceaccounts')]),
        _cluster_binding('system:volume-scheduler', [_user('system:kube-scheduler')]),
    ] + controllers


def namespace_roles() -> list[dict]:
    """Roles in kube-system and kube-public."""
    return [
        _role('kube-public', 'system:controller:bootstrap-signer', [
            _rule(('get', 'list', 'watch'), '', 'configmaps'),
            _rule('update', '', 'configmaps', names='cluster-info'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
        _role('kube-system', 'extension-apiserver-authentication-reader', [
            _rule(('get', 'list', 'watch'), '', 'configmaps', names='extension-apiserver-authentication')]),
        _role('kube-system', 'system::leader-locking-kube-controller-manager', [
            _rule('watch', '', 'configmaps'),
            _rule(('get', 'update'), '', 'configmaps', names='kube-controller-manager'),
            _rule(('create', 'get', 'list', 'update', 'watch'), 'coordination.k8s.io', 'leases'),
            _rule(('create', 'get', 'list', 'update', 'watch'), 'coordination.k8s.io', 'leasecandidates')]),
        _role('kube-system', 'system::leader-locking-kube-scheduler', [
            _rule('watch', '', 'configmaps'),
            _rule(('get', 'update'), '', 'configmaps', names='kube-scheduler'),
            _rule(('create', 'get', 'list', 'update', 'watch'), 'coordination.k8s.io', 'leases'),
            _rule(('create', 'get', 'list', 'update', 'watch'), 'coordination.k8s.io', 'leasecandidates')]),
        _role('kube-system', 'system:controller:bootstrap-signer', [
            _rule(('get', 'list', 'watch'), '', 'secrets')]),
        _role('kube-system', 'system:controller:cloud-provider', [
            _rule(('create', 'get', 'list', 'watch'), '', 'configmaps')]),
        _role('kube-system', 'system:controller:token-cleaner', [
            _rule(('delete', 'get', 'list', 'watch'), '', 'secrets'),
            _rule(('create', 'patch', 'update'), ('', 'events.k8s.io'), 'events')]),
    ]


def namespace_role_bindings() -> list[dict]:
    """RoleBindings in kube-system and kube-public."""
    return [
        _binding('kube-public', 'system:controller:bootstrap-signer', [_sa('kube-system', 'bootstrap-signer')]),
        _binding('kube-system', 'system::extension-apiserver-authentication-reader',
                 [_user('system:kube-controller-manager'), _user('system:kube-scheduler')],
                 role='extension-apiserver-authentication-reader'),
        _binding('kube-system', 'system::leader-locking-kube-controller-manager',
                 [_user('system:kube-controller-manager'), _sa('kube-system', 'kube-controller-manager'),
                  _sa('kube-system', 'leader-election-controller')]),
        _binding('kube-system', 'system::leader-locking-kube-scheduler',
                 [_user('system:kube-scheduler'), _sa('kube-system', 'kube-scheduler')]),
        _binding('kube-system', 'system:controller:bootstrap-signer', [_sa('kube-system', 'bootstrap-signer')]),
        _binding('kube-system', 'system:controller:cloud-provider', [_sa('kube-system', 'cloud-provider')]),
        _binding('kube-system', 'system:controller:token-cleaner', [_sa('kube-system', 'token-cleaner')]),
    ]
