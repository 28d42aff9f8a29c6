"""rbac.authorization.k8s.io/v1 and networking.k8s.io/v1: upstream's field
errors (kubernetes v1.32 pkg/apis/rbac/validation, pkg/apis/networking/validation)."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis.harness import REMOVE, KindCases
from tests.apis.test_validation_pods import LABEL_MSG, PORT_RANGE, SUBDOMAIN_MSG
from tests.apis.test_validation_services import CIDR_MSG

RBAC = "rbac.authorization.k8s.io"
NET = "networking.k8s.io"
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex "
               "used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
WILDCARD_MSG = ("a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must "
                "consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                "(e.g. '*.example.com', regex used for validation is "
                "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
P0 = "spec.rules[0].http.paths[0]"


class RoleCases(KindCases, unittest.TestCase):
    group, kind = RBAC, "Role"
    cases = [
        ({"metadata.name": "system:reader"}, []),  # path segment names: colons are fine
        ({"metadata.name": "a/b"}, ['metadata.name: Invalid value: "a/b": may not contain \'/\'']),
        ({"metadata.name": ".."}, ['metadata.name: Invalid value: "..": may not be \'..\'']),
        ({"rules[0].verbs": []}, ["rules[0].verbs: Required value: verbs must contain at least one value"]),
        ({"rules[0].apiGroups": REMOVE}, [
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group"]),
        ({"rules[0].resources": []}, [
            "rules[0].resources: Required value: resource rules must supply at least one resource"]),
        ({"rules[0].nonResourceURLs": ["/healthz"]}, [
            'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to '
            'non-resource URLs',
            'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: rules cannot apply to both regular '
            'resources and non-resource URLs']),
    ]
    update_cases = [({"rules[0].verbs": ["*"]}, [])]


class ClusterRoleCases(KindCases, unittest.TestCase):
    group, kind = RBAC, "ClusterRole"
    cases = [
        ({"rules[0].apiGroups": [""]}, [
            'rules[0].nonResourceURLs: Invalid value: []string{"/healthz"}: rules cannot apply to both regular '
            'resources and non-resource URLs']),
        ({"aggregationRule.clusterRoleSelectors": []}, [
            "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if "
            "aggregationRule is non-nil"]),
        ({"aggregationRule.clusterRoleSelectors[0].matchExpressions": [{"key": "a", "operator": "In"}]}, [
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified "
            "when `operator` is 'In' or 'NotIn'",
            # the value upstream reports is the (nil) labels.Selector the failed conversion returned
            'aggregationRule.clusterRoleSelectors[0]: Invalid value: "null": invalid label selector.']),
    ]


class RoleBindingCases(KindCases, unittest.TestCase):
    group, kind = RBAC, "RoleBinding"
    cases = [
        ({"roleRef.apiGroup": "rbac"}, [
            'roleRef.apiGroup: Unsupported value: "rbac": supported values: "rbac.authorization.k8s.io"']),
        ({"roleRef.kind": "Group"}, ['roleRef.kind: Unsupported value: "Group": supported values: "Role", '
                                     '"ClusterRole"']),
        ({"roleRef.name": ""}, ["roleRef.name: Required value"]),
        ({"roleRef.name": "a%b"}, ['roleRef.name: Invalid value: "a%b": may not contain \'%\'']),
        ({"subjects[0].name": ""}, ["subjects[0].name: Required value"]),
        ({"subjects[0].kind": "Robot"}, [
            'subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"']),
        ({"subjects[0].apiGroup": "example.com"}, [
            'subjects[0].apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"']),
        ({"subjects[1].name": "App"}, [f'subjects[1].name: Invalid value: "App": {SUBDOMAIN_MSG}']),
        ({"subjects[1].apiGroup": RBAC}, [
            'subjects[1].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""']),
    ]
    update_cases = [
        ({"subjects": [{"kind": "Group", "name": "devs"}]}, []),
        ({"roleRef.name": "writer"}, [
            'roleRef: Invalid value: rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", '
            'Name:"writer"}: cannot change roleRef']),
    ]


class ClusterRoleBindingCases(KindCases, unittest.TestCase):
    group, kind = RBAC, "ClusterRoleBinding"
    cases = [
        ({"roleRef.kind": "Role"}, ['roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"']),
        ({"subjects[1].namespace": REMOVE}, ["subjects[1].namespace: Required value"]),
    ]


class IngressCases(KindCases, unittest.TestCase):
    group, kind = NET, "Ingress"
    cases = [
        ({"spec.rules": REMOVE, "spec.defaultBackend": REMOVE}, [
            "spec: Invalid value: []networking.IngressRule(nil): either `defaultBackend` or `rules` must be "
            "specified"]),
        ({"spec.rules": [], "spec.defaultBackend": REMOVE}, [
            "spec: Invalid value: []networking.IngressRule{}: either `defaultBackend` or `rules` must be specified"]),
        ({f"{P0}.path": "api"}, [f'{P0}.path: Invalid value: "api": must be an absolute path']),
        ({f"{P0}.path": "/a//b"}, [f'{P0}.path: Invalid value: "/a//b": must not contain \'//\'']),
        ({f"{P0}.path": "/a/.."}, [f'{P0}.path: Invalid value: "/a/..": cannot end with \'/..\'']),
        ({f"{P0}.path": "/a%2Fb"}, [f'{P0}.path: Invalid value: "/a%2Fb": must not contain \'%2F\'']),
        ({f"{P0}.pathType": REMOVE}, [f"{P0}.pathType: Required value: pathType must be specified"]),
        ({f"{P0}.pathType": "Regex"}, [
            f'{P0}.pathType: Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", '
            f'"Prefix"']),
        ({f"{P0}.pathType": "ImplementationSpecific", f"{P0}.path": ""}, []),
        ({f"{P0}.backend.service.name": "web.1"}, [
            f'{P0}.backend.service.name: Invalid value: "web.1": {DNS1035_MSG}']),
        ({f"{P0}.backend.service.port": {"name": "http", "number": 80}}, [
            f'{P0}.backend: Invalid value: "": cannot set both port name & port number']),
        ({f"{P0}.backend.service.port": {}}, [f"{P0}.backend: Required value: port name or number is required"]),
        ({f"{P0}.backend.service.port": {"number": 70000}}, [
            f"{P0}.backend.service.port.number: Invalid value: 70000: {PORT_RANGE}"]),
        ({f"{P0}.backend.resource": {"kind": "Bucket", "name": "b"}}, [
            f'{P0}.backend: Invalid value: "": cannot set both resource and service backends']),
        ({f"{P0}.backend": {}}, [f'{P0}.backend: Invalid value: "": resource or service backend is required']),
        ({"spec.rules[0].http.paths[1].backend.resource.kind": "a/b"}, [
            'spec.rules[0].http.paths[1].backend.resource.kind: Invalid value: "a/b": may not contain \'/\'']),
        ({"spec.rules[0].http.paths": []}, ["spec.rules[0].http.paths: Required value"]),
        ({"spec.rules[0].host": "10.0.0.1"}, [
            'spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address']),
        ({"spec.rules[0].host": "Www.example.com"}, [
            f'spec.rules[0].host: Invalid value: "Www.example.com": {SUBDOMAIN_MSG}']),
        ({"spec.rules[0].host": "www.*.com"}, [f'spec.rules[0].host: Invalid value: "www.*.com": {WILDCARD_MSG}']),
        ({"spec.tls[0].hosts[0]": "*"}, [f'spec.tls[0].hosts[0]: Invalid value: "*": {WILDCARD_MSG}']),
        ({"spec.tls[0].secretName": "TLS"}, [f'spec.tls[0].secretName: Invalid value: "TLS": {SUBDOMAIN_MSG}']),
        ({"spec.ingressClassName": "Nginx"}, [f'spec.ingressClassName: Invalid value: "Nginx": {SUBDOMAIN_MSG}']),
        ({"metadata.annotations": {"kubernetes.io/ingress.class": "traefik"}}, [
            'annotations.kubernetes.io/ingress.class: Invalid value: "traefik": must match `ingressClassName` when '
            'both are specified']),
    ]
    update_cases = [
        ({"spec.rules[0].host": "api.example.com"}, []),
        ({f"{P0}.path": "api"}, [f'{P0}.path: Invalid value: "api": must be an absolute path']),
    ]
    status_cases = [
        ({"status.loadBalancer.ingress": [{"ip": "203.0.113.9", "ports": [{"port": 443, "protocol": "TCP"}]}]}, []),
        ({"status.loadBalancer.ingress": [{"hostname": "10.0.0.1"}]}, [
            'status.loadBalancer.ingress[0].hostname: Invalid value: "10.0.0.1": must be a DNS name, not an IP '
            'address']),
    ]


class IngressClassCases(KindCases, unittest.TestCase):
    group, kind = NET, "IngressClass"
    cases = [
        ({"spec.controller": "nginx"}, [
            'spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")']),
        ({"spec.parameters.scope": "Planet"}, [
            'spec.parameters.scope: Unsupported value: "Planet": supported values: "Cluster", "Namespace"']),
        ({"spec.parameters.namespace": REMOVE}, [
            "spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'"]),
        ({"spec.parameters.scope": "Cluster"}, [
            "spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'"]),
        ({"spec.parameters.kind": ""}, ["spec.parameters.kind: Required value: kind is required"]),
        ({"spec.parameters.namespace": "Team"}, [f'spec.parameters.namespace: Invalid value: "Team": {LABEL_MSG}']),
    ]
    update_cases = [
        ({"spec.parameters.name": "q"}, []),
        ({"spec.controller": "example.com/other"}, [
            'spec.controller: Invalid value: "example.com/other": field is immutable']),
    ]


class NetworkPolicyCases(KindCases, unittest.TestCase):
    group, kind = NET, "NetworkPolicy"
    I0 = "spec.ingress[0]"
    cases = [
        ({f"{I0}.ports[0].port": 0}, [f"{I0}.ports[0].port: Invalid value: 0: {PORT_RANGE}"]),
        ({f"{I0}.ports[0].protocol": "ICMP"}, [
            f'{I0}.ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"']),
        ({f"{I0}.ports[1].endPort": 7000}, [
            f"{I0}.ports[1].endPort: Invalid value: 8000: must be greater than or equal to `port`"]),
        ({f"{I0}.ports[2].endPort": 90}, [
            f"{I0}.ports[2].endPort: Invalid value: 90: may not be specified when `port` is non-numeric"]),
        ({f"{I0}.ports[2].port": "HTTP"}, [
            f'{I0}.ports[2].port: Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), '
            f'and hyphens (-)',
            f'{I0}.ports[2].port: Invalid value: "HTTP": must contain at least one letter (a-z)']),
        ({f"{I0}.ports[0]": {"endPort": 90}}, [
            f"{I0}.ports[0].endPort: Invalid value: 90: may not be specified when `port` is not specified"]),
        ({f"{I0}.from[0].ipBlock.cidr": "10.0.0.0/33"}, [
            f'{I0}.from[0].ipBlock.cidr: Invalid value: "10.0.0.0/33": {CIDR_MSG}']),
        ({f"{I0}.from[0].ipBlock.cidr": ""}, [f"{I0}.from[0].ipBlock.cidr: Required value"]),
        ({f"{I0}.from[0].ipBlock.except": ["192.168.0.0/16"]}, [
            f'{I0}.from[0].ipBlock.except[0]: Invalid value: "192.168.0.0/16": must be a strict subset of `cidr`']),
        ({f"{I0}.from[0].ipBlock.except": ["10.0.0.0/8"]}, [
            f'{I0}.from[0].ipBlock.except[0]: Invalid value: "10.0.0.0/8": must be a strict subset of `cidr`']),
        ({f"{I0}.from[0].podSelector": {}}, [f"{I0}.from[0]: Forbidden: may not specify both ipBlock and another "
                                             f"peer"]),
        ({f"{I0}.from[1]": {}}, [f"{I0}.from[1]: Required value: must specify a peer"]),
        ({"spec.podSelector.matchLabels": {"app": "-x"}}, [
            'spec.podSelector.matchLabels: Invalid value: "-x": a valid label must be an empty string or consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]),
        ({"spec.policyTypes": ["Ingress", "Sideways"]}, [
            'spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"']),
        ({"spec.policyTypes": ["Ingress", "Egress", "Ingress"]}, [
            'spec.policyTypes: Invalid value: []networking.PolicyType{"Ingress", "Egress", "Ingress"}: may not '
            'specify more than two policyTypes']),
        ({"spec.egress[0].to[0].ipBlock": {"cidr": "::/0"}}, [
            "spec.egress[0].to[0]: Forbidden: may not specify both ipBlock and another peer"]),
    ]
    update_cases = [({"spec.podSelector": {}}, [])]
