"""Services and Endpoints: upstream's field errors (kubernetes v1.32
ValidateService, validateServicePort, ValidateServiceUpdate,
validateEndpointSubsets, ValidateNonSpecialIP)."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis import samples
from tests.apis.harness import REMOVE, KindCases, causes_of, changed, resource_type, stored, update
from tests.apis.test_validation_pods import IP_MSG, LABEL_MSG, LABEL_VALUE_MSG, PORT_RANGE, QUALIFIED_MSG, SUBDOMAIN_MSG

CIDR_MSG = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


def _service_port(protocol: str, port: int) -> str:
    return (f'core.ServicePort{{Name:"", Protocol:"{protocol}", AppProtocol:(*string)(nil), Port:{port}, '
            f'TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:""}}, NodePort:0}}')


class ServiceCases(KindCases, unittest.TestCase):
    kind = "Service"
    cases = [
        ({"metadata.name": "web.1"}, ['metadata.name: Invalid value: "web.1": a DNS-1035 label must consist of '
                                      "lower case alphanumeric characters or '-', start with an alphabetic "
                                      "character, and end with an alphanumeric character (e.g. 'my-name',  or "
                                      "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"]),
        ({"spec.ports": []}, ["spec.ports: Required value"]),
        ({"spec.ports[0].name": ""}, ["spec.ports[0].name: Required value"]),
        ({"spec.ports[1].name": "http"}, ['spec.ports[1].name: Duplicate value: "http"']),
        ({"spec.ports[0].name": "HTTP"}, [f'spec.ports[0].name: Invalid value: "HTTP": {LABEL_MSG}']),
        ({"spec.ports[0].port": 0}, [f"spec.ports[0].port: Invalid value: 0: {PORT_RANGE}"]),
        ({"spec.ports[0].targetPort": 70000}, [f"spec.ports[0].targetPort: Invalid value: 70000: {PORT_RANGE}"]),
        ({"spec.ports[0].targetPort": "http_1"}, [
            'spec.ports[0].targetPort: Invalid value: "http_1": must contain only alpha-numeric characters (a-z, '
            '0-9), and hyphens (-)']),
        ({"spec.ports[0].protocol": "ICMP"}, [
            'spec.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"']),
        ({"spec.ports[1].appProtocol": "a b"}, [f'spec.ports[1].appProtocol: Invalid value: "a b": {QUALIFIED_MSG}']),
        ({"spec.ports[0].port": 10250}, [
            "spec.ports[0]: Invalid value: 10250: may not expose port 10250 externally since it is used by kubelet"]),
        # ports with one number share a node port (upstream's initNodePorts), so both are reported
        ({"spec.ports[1].port": 80, "spec.ports[0].nodePort": 30080}, [
            "spec.ports[1].nodePort: Duplicate value: 30080",
            f"spec.ports[1]: Duplicate value: {_service_port('TCP', 80)}"]),
        ({"spec.ports[1].port": 80, "spec.ports[1].protocol": "UDP"}, []),
        ({"spec.ports[0].nodePort": 30100, "spec.ports[1].nodePort": 30100}, [
            "spec.ports[1].nodePort: Invalid value: 30100: provided port is already allocated"]),
        ({"spec.ports[0].nodePort": 80}, [
            "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of "
            "valid ports is 30000-32767"]),
        ({"spec.selector": {"app": "-x"}}, [f'spec.selector: Invalid value: "-x": {LABEL_VALUE_MSG}']),
        ({"spec.sessionAffinity": "Sticky"}, [
            'spec.sessionAffinity: Unsupported value: "Sticky": supported values: "ClientIP", "None"']),
        ({"spec.sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 0}}}, [
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds: Invalid value: 0: must be greater than 0 and less "
            "than 86400"]),
        ({"spec.sessionAffinity": "None", "spec.sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}}}, []),
        ({"spec.externalIPs": ["1.2.3"]}, [f'spec.externalIPs[0]: Invalid value: "1.2.3": {IP_MSG}']),
        ({"spec.externalIPs": ["127.0.0.1"]}, [
            'spec.externalIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, '
            '::1/128)']),
        ({"spec.externalIPs": ["0.0.0.0"]}, ['spec.externalIPs[0]: Invalid value: "0.0.0.0": may not be '
                                             'unspecified (0.0.0.0)']),
        ({"spec.loadBalancerSourceRanges": ["10.0.0.0/33"]}, [
            f'spec.LoadBalancerSourceRanges[0]: Invalid value: "10.0.0.0/33": {CIDR_MSG}']),
        ({"spec.loadBalancerSourceRanges": [" 10.0.0.0/8 "]}, []),  # space padding is tolerated
        ({"spec.type": "ClusterIP"}, [
            "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'"]),
        ({"spec.type": "ClusterIP", "spec.loadBalancerSourceRanges": REMOVE, "spec.ports[0].nodePort": 30001}, [
            "spec.ports[0].nodePort: Forbidden: may not be used when `type` is 'ClusterIP'"]),
        ({"spec.type": "ClusterIP", "spec.loadBalancerSourceRanges": REMOVE, "spec.externalIPs": REMOVE}, [
            'spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible '
            'services']),
        ({"spec.type": "Internal"}, [
            'spec.type: Unsupported value: "Internal": supported values: "ClusterIP", "ExternalName", '
            '"LoadBalancer", "NodePort"',
            "spec.LoadBalancerSourceRanges: Forbidden: may only be used when `type` is 'LoadBalancer'",
            'spec.externalTrafficPolicy: Invalid value: "Local": may only be set for externally-accessible '
            'services']),
        ({"spec.externalTrafficPolicy": "Nearby"}, [
            'spec.externalTrafficPolicy: Unsupported value: "Nearby": supported values: "Cluster", "Local"']),
        ({"spec.internalTrafficPolicy": "Nearby"}, [
            'spec.internalTrafficPolicy: Unsupported value: "Nearby": supported values: "Cluster", "Local"']),
        ({"spec.clusterIP": "10.96.0.500"}, [
            f'spec.clusterIPs[0]: Invalid value: "10.96.0.500": {IP_MSG}']),
        ({"spec.clusterIP": "None"}, [
            "spec.clusterIPs[0]: Invalid value: \"None\": may not be set to 'None' for LoadBalancer services"]),
        ({"spec.clusterIP": "192.168.0.1"}, [
            'spec.clusterIPs: Invalid value: []string{"192.168.0.1"}: failed to allocate IP 192.168.0.1: the '
            'provided IP (192.168.0.1) is not in the valid range. The range of valid IPs is 10.0.0.0/24']),
        ({"spec.ipFamilyPolicy": "TripleStack"}, [
            'spec.ipFamilyPolicy: Unsupported value: "TripleStack": supported values: "PreferDualStack", '
            '"RequireDualStack", "SingleStack"']),
        ({"spec.type": "ExternalName", "spec.externalName": "db.example.com", "spec.ipFamilyPolicy": REMOVE,
          "spec.loadBalancerSourceRanges": REMOVE, "spec.externalTrafficPolicy": REMOVE}, []),
        ({"spec.type": "ExternalName", "spec.externalName": "DB_1", "spec.ipFamilyPolicy": REMOVE,
          "spec.loadBalancerSourceRanges": REMOVE, "spec.externalTrafficPolicy": REMOVE}, [
            f'spec.externalName: Invalid value: "DB_1": {SUBDOMAIN_MSG}']),
        ({"spec.type": "ExternalName", "spec.ipFamilyPolicy": REMOVE, "spec.loadBalancerSourceRanges": REMOVE,
          "spec.externalTrafficPolicy": REMOVE}, ["spec.externalName: Required value"]),
        ({"spec.allocateLoadBalancerNodePorts": False, "spec.loadBalancerClass": "example.com/lb"}, []),
        ({"spec.loadBalancerClass": "example.com/lb_"}, [
            f'spec.loadBalancerClass: Invalid value: "example.com/lb_": {QUALIFIED_MSG}']),
        ({"metadata.annotations": {"service.beta.kubernetes.io/load-balancer-source-ranges": "10.0.0.0/8"},
          "spec.loadBalancerSourceRanges": REMOVE, "spec.type": "NodePort"}, [
            "metadata.annotations[service.beta.kubernetes.io/load-balancer-source-ranges]: Forbidden: may only be "
            "used when `type` is 'LoadBalancer'"]),
    ]
    update_cases = [
        ({"spec.ports[0].port": 8080, "spec.selector": {"app": "api"}}, []),
        ({"spec.clusterIP": "10.96.0.99", "spec.clusterIPs": ["10.96.0.99"]}, [
            'spec.clusterIPs[0]: Invalid value: []string{"10.96.0.99"}: may not change once set']),
        ({"spec.healthCheckNodePort": 31000}, ["spec.healthCheckNodePort: Forbidden: field is immutable"]),
    ]
    status_cases = [
        ({"status.loadBalancer.ingress": [{"ip": "203.0.113.5"}, {"hostname": "lb.example.com"}]}, []),
        ({"status.loadBalancer.ingress": [{"ip": "203.0.113"}]}, [
            f'status.loadBalancer.ingress[0].ip: Invalid value: "203.0.113": {IP_MSG}']),
        ({"status.loadBalancer.ingress": [{"hostname": "10.0.0.1"}]}, [
            'status.loadBalancer.ingress[0].hostname: Invalid value: "10.0.0.1": must be a DNS name, not an IP '
            'address']),
    ]

    def test_changing_the_ip_family_is_caught_before_allocation(self) -> None:
        rt = resource_type("", "Service")
        before = stored(rt, samples.sample("", "Service"))
        ip = before["spec"]["clusterIP"]
        after = changed(before, {"spec.ipFamilies": ["IPv6"]})
        self.assertEqual(update(rt, after, before)[1], [
            f'spec.clusterIPs[0]: Invalid value: "{ip}": expected an IPv6 value as indicated by `ipFamilies[0]`'])

    def test_a_headless_service_needs_no_ports(self) -> None:
        svc = {"metadata": {"name": "db"}, "spec": {"clusterIP": "None", "selector": {"app": "db"}}}
        self.assertEqual(causes_of("", "Service", svc), [])


class EndpointsCases(KindCases, unittest.TestCase):
    kind = "Endpoints"
    cases = [
        ({"subsets[0].addresses[0].ip": "10.1.0.500"}, [
            f'subsets[0].addresses[0].ip: Invalid value: "10.1.0.500": {IP_MSG}',
            'subsets[0].addresses[0].ip: Invalid value: "10.1.0.500": must be a valid IP address']),
        ({"subsets[0].addresses[0].ip": "169.254.1.1"}, [
            'subsets[0].addresses[0].ip: Invalid value: "169.254.1.1": may not be in the link-local range '
            '(169.254.0.0/16, fe80::/10)']),
        ({"subsets[0].addresses[0].hostname": "Web"}, [
            f'subsets[0].addresses[0].hostname: Invalid value: "Web": {LABEL_MSG}']),
        ({"subsets[0].addresses[0].nodeName": "Node_1"}, [
            f'subsets[0].addresses[0].nodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
        ({"subsets[0].addresses": [], "subsets[0].notReadyAddresses": []}, [
            "subsets[0]: Required value: must specify `addresses` or `notReadyAddresses`"]),
        ({"subsets[0].ports[0].name": ""}, ["subsets[0].ports[0].name: Required value"]),
        ({"subsets[0].ports[0].port": 0}, [f"subsets[0].ports[0].port: Invalid value: 0: {PORT_RANGE}"]),
        ({"subsets[0].ports[0].protocol": "ICMP"}, [
            'subsets[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"']),
    ]
    update_cases = [({"subsets[0].addresses[0].ip": "10.1.0.7"}, [])]
