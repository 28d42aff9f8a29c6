"""The rest of core/v1: ConfigMaps, Secrets, ServiceAccounts, Namespaces,
volumes and claims, Nodes, quotas, limit ranges, Events, ReplicationControllers
(kubernetes v1.32 pkg/apis/core/validation, expectations from its source)."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis.harness import REMOVE, KindCases
from tests.apis.test_validation_pods import LABEL_MSG, LABEL_VALUE_MSG, QUALIFIED_MSG, SUBDOMAIN_MSG

KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or "
           "'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
def _quantity(value: int, scale: int, cached: str) -> str:
    """A resource.Quantity parsed on upstream's fast path, as %#v prints it."""
    return (f'resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, '
            f'd:resource.infDecAmount{{Dec:(*inf.Dec)(nil)}}, s:"{cached}", Format:"DecimalSI"}}')


IMMUTABLE_WHEN_SET = "Forbidden: field is immutable when `immutable` is set"
ACCESS_MODES = '"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"'
CIDR_MSG = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"


class ConfigMapCases(KindCases, unittest.TestCase):
    kind = "ConfigMap"
    cases = [
        ({"data": {"a b": "x"}}, [f'data[a b]: Invalid value: "a b": {KEY_MSG}']),
        ({"data": {"..": "x"}}, ["data[..]: Invalid value: \"..\": must not be '..'"]),
        ({"data": {"..x": "x"}}, ["data[..x]: Invalid value: \"..x\": must not start with '..'"]),
        ({"data": {"k" * 254: "x"}}, [f'data[{"k" * 254}]: Invalid value: "{"k" * 254}": must be no more than 253 '
                                      f'characters']),
        ({"data": {"b.bin": "x"}}, ['data[b.bin]: Invalid value: "b.bin": duplicate of key present in binaryData']),
        ({"binaryData": {"a/b": "AAE="}}, [f'binaryData[a/b]: Invalid value: "a/b": {KEY_MSG}']),
        # upstream reports the whole object at field.NewPath(""), which prints as "[]"
        ({"data": {"big": "x" * (1 << 20)}}, ["[]: Too long: may not be more than 1048576 bytes"]),
        ({"metadata.name": "Web"}, [f'metadata.name: Invalid value: "Web": {SUBDOMAIN_MSG}']),
    ]
    update_cases = [
        ({"data": {"a.conf": "y"}, "immutable": True}, []),
    ]

    def test_immutable_config_maps_keep_their_data(self) -> None:
        from tests.apis.harness import changed, resource_type, stored, update
        from tests.apis.samples import sample
        rt = resource_type("", "ConfigMap")
        frozen = stored(rt, changed(sample("", "ConfigMap"), {"immutable": True}))
        self.assertEqual(update(rt, changed(frozen, {"data": {"a.conf": "y"}, "binaryData": {}, "immutable": False}),
                                frozen)[1],
                         [f"immutable: {IMMUTABLE_WHEN_SET}", f"data: {IMMUTABLE_WHEN_SET}",
                          f"binaryData: {IMMUTABLE_WHEN_SET}"])
        self.assertEqual(update(rt, changed(frozen, {"metadata.labels": {"x": "y"}}), frozen)[1], [])


class SecretCases(KindCases, unittest.TestCase):
    kind = "Secret"
    cases = [
        ({"data": {"tls.crt": "YQ==", "tls.key": "Yg==", "a b": "YQ=="}},
         [f'data[a b]: Invalid value: "a b": {KEY_MSG}']),
        ({"data": {"tls.crt": "YQ=="}}, ["data[tls.key]: Required value"]),
        ({"data": {}}, ["data[tls.crt]: Required value", "data[tls.key]: Required value"]),
        ({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}}, []),
        ({"type": "kubernetes.io/dockerconfigjson", "data": {}}, ["data[.dockerconfigjson]: Required value"]),
        ({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "eA=="}}, [
            'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character \'x\' looking '
            'for beginning of value']),
        ({"type": "kubernetes.io/basic-auth", "data": {}}, ["data[username]: Required value",
                                                           "data[password]: Required value"]),
        ({"type": "kubernetes.io/ssh-auth", "data": {}}, ["data[ssh-privatekey]: Required value"]),
        ({"type": "kubernetes.io/service-account-token", "data": {}}, [
            "metadata.annotations[kubernetes.io/service-account.name]: Required value"]),
        ({"type": "Opaque", "data": {"x": "A" * 1400000}}, ["data: Too long: may not be more than 1048576 bytes"]),
        ({"type": "example.com/custom", "data": {}}, []),  # any other type is accepted as is
    ]
    update_cases = [
        ({"data": {"tls.crt": "Yw==", "tls.key": "ZA=="}}, []),
        ({"type": "Opaque"}, ['type: Invalid value: "Opaque": field is immutable']),
    ]


class ServiceAccountCases(KindCases, unittest.TestCase):
    kind = "ServiceAccount"
    cases = [
        ({"metadata.name": "App"}, [f'metadata.name: Invalid value: "App": {SUBDOMAIN_MSG}']),
        ({"metadata.labels": {"a": "b c"}}, [
            'metadata.labels: Invalid value: "b c": ' + LABEL_VALUE_MSG]),
    ]


class NamespaceCases(KindCases, unittest.TestCase):
    kind = "Namespace"
    cases = [
        ({"metadata.name": "team.a"}, ['metadata.name: Invalid value: "team.a": must not contain dots']),
        ({"metadata.name": "Team"}, [f'metadata.name: Invalid value: "Team": {LABEL_MSG}']),
        ({"spec.finalizers": ["custom"]}, [
            'spec.finalizers: Invalid value: "custom": name is neither a standard finalizer name nor is it fully '
            'qualified']),
        ({"spec.finalizers": ["example.com/a b"]}, [
            f'spec.finalizers: Invalid value: "example.com/a b": {QUALIFIED_MSG}']),
    ]
    status_cases = [
        ({"status.phase": "Terminating"}, [
            "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"]),
    ]


class PersistentVolumeClaimCases(KindCases, unittest.TestCase):
    kind = "PersistentVolumeClaim"
    cases = [
        ({"spec.accessModes": []}, ["spec.accessModes: Required value: at least 1 access mode is required"]),
        ({"spec.accessModes": ["ReadMany"]}, [
            f'spec.accessModes: Unsupported value: "ReadMany": supported values: {ACCESS_MODES}']),
        ({"spec.accessModes": ["ReadWriteOncePod", "ReadWriteOnce"]}, [
            "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes"]),
        ({"spec.resources.requests": {}}, ["spec.resources[storage]: Required value"]),
        ({"spec.resources.requests.storage": "0"}, [
            'spec.resources[storage]: Invalid value: "0": must be greater than zero']),
        ({"spec.storageClassName": "Fast"}, [f'spec.storageClassName: Invalid value: "Fast": {SUBDOMAIN_MSG}']),
        ({"spec.volumeMode": "Raw"}, [
            'spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"']),
        ({"spec.selector.matchExpressions[0].operator": "Maybe"}, [
            'spec.selector.matchExpressions[0].operator: Invalid value: "Maybe": not a valid selector operator']),
        # an old client's dataSource that is neither a claim nor a snapshot is dropped, not refused
        ({"spec.dataSource.kind": "Snapshot"}, []),
        ({"spec.dataSourceRef": {"kind": "Snapshot", "name": "s"}, "spec.dataSource": REMOVE}, [
            "spec.dataSource: Invalid value: \"Snapshot\": must be 'PersistentVolumeClaim' when referencing the "
            "default apiGroup",
            "spec.dataSourceRef: Invalid value: \"Snapshot\": must be 'PersistentVolumeClaim' when referencing the "
            "default apiGroup"]),
        ({"spec.dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "other"}}, [
            'spec: Invalid value: field.Path{name:"dataSource", index:"", parent:(*field.Path)(0xc000000000)}: '
            'must match dataSourceRef']),
    ]
    update_cases = [
        ({"metadata.labels": {"x": "y"}}, []),
    ]
    status_cases = [
        ({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}}, []),
    ]

    def test_the_spec_of_a_claim_is_frozen(self) -> None:
        from tests.apis.harness import invalid_update_causes
        [cause] = invalid_update_causes("", "PersistentVolumeClaim", {"spec.storageClassName": "slow"})
        self.assertTrue(cause.startswith(
            "spec: Forbidden: spec is immutable after creation except resources.requests and "
            "volumeAttributesClassName for bound claims\n"), cause)


class PersistentVolumeCases(KindCases, unittest.TestCase):
    kind = "PersistentVolume"
    cases = [
        ({"metadata.name": "PV"}, [f'metadata.name: Invalid value: "PV": {SUBDOMAIN_MSG}']),
        ({"spec.accessModes": []}, ["spec.accessModes: Required value"]),
        ({"spec.capacity.storage": "0"}, ['spec.capacity[storage]: Invalid value: "0": must be greater than zero']),
        ({"spec.persistentVolumeReclaimPolicy": "Keep"}, [
            'spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: "Delete", "Recycle", '
            '"Retain"']),
        ({"spec.csi.driver": ""}, ["spec.csi.driver: Required value",
                                   f'spec.csi.driver: Invalid value: "": {SUBDOMAIN_MSG}']),
        ({"spec.csi.volumeHandle": ""}, ["spec.csi.volumeHandle: Required value"]),
        ({"spec.csi.nodePublishSecretRef.namespace": "Kube"}, [
            f'spec.csi.nodePublishSecretRef.namespace: Invalid value: "Kube": {LABEL_MSG}']),
        ({"spec.hostPath": {"path": "/x"}}, ["spec.csi: Forbidden: may not specify more than 1 volume type"]),
        ({"spec.csi": REMOVE}, ["spec: Required value: must specify a volume type"]),
        ({"spec.nodeAffinity.required.nodeSelectorTerms": []}, [
            "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector "
            "term"]),
    ]
    update_cases = [
        ({"spec.capacity.storage": "20Gi", "spec.persistentVolumeReclaimPolicy": "Delete"}, []),
    ]


class NodeCases(KindCases, unittest.TestCase):
    kind = "Node"
    cases = [
        ({"metadata.name": "Node_1"}, [f'metadata.name: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
        ({"spec.taints[0].key": "a b"}, [f'metadata.taints[0].key: Invalid value: "a b": {QUALIFIED_MSG}']),
        ({"spec.taints[0].value": "-x"}, [f'metadata.taints[0].value: Invalid value: "-x": {LABEL_VALUE_MSG}']),
        ({"spec.taints[0].effect": ""}, ["metadata.taints[0].effect: Required value"]),
        ({"spec.taints[1]": {"key": "dedicated", "value": "db", "effect": "NoSchedule"}}, [
            'metadata.taints[1]: Duplicate value: core.Taint{Key:"dedicated", Value:"db", Effect:"NoSchedule", '
            'TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair']),
        ({"spec.podCIDRs": ["10.244.1.0/33"], "spec.podCIDR": "10.244.1.0/33"}, [
            f'spec.podCIDRs[0]: Invalid value: "10.244.1.0/33": {CIDR_MSG}']),
        ({"spec.podCIDRs": ["10.244.1.0/24", "10.244.2.0/24"]}, [
            'spec.podCIDRs: Invalid value: []string{"10.244.1.0/24", "10.244.2.0/24"}: may specify no more than one '
            'CIDR for each IP family']),
    ]
    update_cases = [
        ({"spec.unschedulable": True, "spec.taints": []}, []),
        ({"spec.podCIDRs": ["10.244.9.0/24"], "spec.podCIDR": "10.244.9.0/24"}, [
            'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid']),
        ({"spec.providerID": "aws:///i-2"}, [
            'spec.providerID: Forbidden: node updates may not change providerID except from "" to valid']),
    ]


class ResourceQuotaCases(KindCases, unittest.TestCase):
    kind = "ResourceQuota"
    cases = [
        ({"spec.hard.foo": "1"}, ['spec.hard[foo]: Invalid value: "foo": must be a standard resource type or fully '
                                  'qualified',
                                  'spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota']),
        ({"spec.hard.pods": "-1"}, ['spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0']),
        ({"spec.scopes": ["NotTerminating", "Terminating"]}, [
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"NotTerminating", "Terminating"}: conflicting '
            'scopes']),
        ({"spec.scopes": ["Sometimes"]}, [
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"Sometimes"}: unsupported scope']),
        ({"spec.scopes": ["BestEffort"]}, [
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort"}: unsupported scope applied to '
            'resource'] * 2),
    ]
    update_cases = [
        ({"spec.hard.pods": "20"}, []),
        ({"spec.scopes": ["Terminating"]}, [
            'spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating"}: field is immutable']),
    ]


class LimitRangeCases(KindCases, unittest.TestCase):
    kind = "LimitRange"
    cases = [
        # a Container item gets its defaultRequest from min, and storage is no container resource
        ({"spec.limits[1].type": "Container"}, [
            'spec.limits[1].type: Duplicate value: "Container"',
            'spec.limits[1].min[storage]: Invalid value: "storage": must be a standard resource for containers',
            'spec.limits[1].defaultRequest[storage]: Invalid value: "storage": must be a standard resource for '
            'containers']),
        ({"spec.limits[1]": {"type": "Pod", "default": {"cpu": "1"}}}, [
            "spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'"]),
        ({"spec.limits[1].min": {}}, [
            "spec.limits[1].limits: Required value: either minimum or maximum storage value is required, but "
            "neither was provided"]),
        ({"spec.limits[0].max.foo": "1"}, [  # max is copied to default, and default to defaultRequest
            f'spec.limits[0].{where}[foo]: Invalid value: "foo": {msg}'
            for where in ("max", "default", "defaultRequest")
            for msg in ("must be a standard resource type or fully qualified",
                        "must be a standard resource for containers")]),
        ({"spec.limits[0].min.cpu": "3"}, [
            f"spec.limits[0].min[cpu]: Invalid value: {_quantity(3, 0, '3')}: min value 3 is greater than max value 2",
            f"spec.limits[0].defaultRequest[cpu]: Invalid value: {_quantity(200, -3, '200m')}: min value 3 is greater "
            f"than default request value 200m",
            f"spec.limits[0].default[cpu]: Invalid value: {_quantity(3, 0, '3')}: min value 3 is greater than default "
            f"value 500m",
            f"spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: {_quantity(10, 0, '10')}: ratio 10 is greater "
            f"than max/min = 0.666667"]),
        ({"spec.limits[0].maxLimitRequestRatio.cpu": "500m"}, [
            f"spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: {_quantity(500, -3, '500m')}: ratio 500m is "
            f"less than 1"]),
        ({"spec.limits[0].maxLimitRequestRatio.cpu": "1.5"}, []),  # within max/min = 20
    ]



class EventCases(KindCases, unittest.TestCase):
    kind = "Event"
    cases = [
        ({"involvedObject.namespace": "other"}, [
            'involvedObject.namespace: Invalid value: "other": does not match event.namespace']),
        # core/v1 Events without an eventTime keep the legacy rules: no length limits on reason
        ({"reason": "r" * 129}, []),
        ({"eventTime": "2024-01-01T00:00:00.000000Z", "reportingComponent": "kubelet", "reportingInstance": "n1",
          "action": "Start", "reason": "r" * 129}, ['reason: Invalid value: "": can have at most 128 characters']),
    ]


class ReplicationControllerCases(KindCases, unittest.TestCase):
    kind = "ReplicationController"
    cases = [
        ({"spec.replicas": -1}, ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]),
        ({"spec.selector": {"app": "api"}}, [
            'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not '
            'match template `labels`']),
        ({"spec.template.spec.restartPolicy": "Never"}, [
            'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']),
        ({"spec.template.spec.activeDeadlineSeconds": 5}, [
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicationController is "
            "not Supported"]),
        # upstream checks only that the selector is not empty; the template's labels are validated
        ({"spec.selector": {"a b": "c"}, "spec.template.metadata.labels": {"a b": "c"}}, [
            f'spec.template.labels: Invalid value: "a b": {QUALIFIED_MSG}']),
        ({"spec.selector": {}}, []),  # an empty selector defaults to the template's labels
    ]
    update_cases = [({"spec.replicas": 0, "spec.selector": {"app": "web"}}, [])]
    status_cases = [
        ({"status": {"replicas": 1, "readyReplicas": 2}}, [
            "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas"]),
    ]
