"""policy, storage, scheduling, discovery, autoscaling, coordination and
events.k8s.io: upstream's field errors (kubernetes v1.32 pkg/apis/*/validation)."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis.harness import REMOVE, KindCases, causes_of
from tests.apis.test_validation_pods import LABEL_MSG, LABEL_VALUE_MSG, QUALIFIED_MSG, SUBDOMAIN_MSG

PERCENT_MSG = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
               "regex used for validation is '[0-9]+%')")


class PodDisruptionBudgetCases(KindCases, unittest.TestCase):
    group, kind = "policy", "PodDisruptionBudget"
    cases = [
        ({"spec.maxUnavailable": 1}, [
            "spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0xc000000000), "
            "Selector:(*v1.LabelSelector)(0xc000000000), MaxUnavailable:(*intstr.IntOrString)(0xc000000000), "
            "UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(0xc000000000)}: minAvailable and "
            "maxUnavailable cannot be both set"]),
        ({"spec.minAvailable": "150%"}, [
            'spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: must not be '
            'greater than 100%']),
        ({"spec.minAvailable": "half"}, [
            f'spec.minAvailable: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:"half"}}: {PERCENT_MSG}']),
        ({"spec.minAvailable": -1}, ["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]),
        ({"spec.unhealthyPodEvictionPolicy": "Never"}, [
            'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: "AlwaysAllow", '
            '"IfHealthyBudget"']),
        ({"spec.selector.matchLabels": {"app": "-x"}}, [
            f'spec.selector.matchLabels: Invalid value: "-x": {LABEL_VALUE_MSG}']),
        ({"metadata.name": "Web:1"}, []),  # PDB names are only path segments
    ]
    update_cases = [({"spec.minAvailable": 2, "spec.selector.matchLabels": {"app": "api"}}, [])]
    status_cases = [
        ({"status": {"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 2, "disruptionsAllowed": 0,
                     "observedGeneration": 1}}, []),
        ({"status": {"currentHealthy": -1, "desiredHealthy": 1, "expectedPods": 2, "disruptionsAllowed": 0}}, [
            "status.currentHealthy: Invalid value: -1: must be greater than or equal to 0"]),
    ]


class StorageClassCases(KindCases, unittest.TestCase):
    group, kind = "storage.k8s.io", "StorageClass"
    cases = [
        ({"provisioner": ""}, ["provisioner: Required value"]),
        ({"provisioner": "ebs csi"}, [f'provisioner: Invalid value: "ebs csi": {QUALIFIED_MSG}']),
        ({"parameters": {"": "x"}}, ['parameters: Invalid value: "": field can not be empty.']),
        ({"reclaimPolicy": "Recycle"}, [
            'reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain"']),
        ({"volumeBindingMode": "Later"}, [
            'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"']),
        ({"allowedTopologies[0].matchLabelExpressions[0].values": []}, [
            "allowedTopologies[0].matchLabelExpressions[0].values: Required value"]),
        ({"allowedTopologies[1]": {"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}}, [
            'allowedTopologies[1].matchLabelExpressions: Duplicate value: ""']),
        ({"mountOptions": ["ro"], "provisioner": "kubernetes.io/no-provisioner"}, []),
    ]
    update_cases = [
        ({"allowVolumeExpansion": True, "metadata.labels": {"x": "y"}}, []),
        ({"parameters": {"type": "io2"}}, ["parameters: Forbidden: updates to parameters are forbidden."]),
        ({"provisioner": "other.csi.example.com"}, ["provisioner: Forbidden: updates to provisioner are forbidden."]),
        ({"reclaimPolicy": "Delete"}, ["reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."]),
        ({"volumeBindingMode": "Immediate"}, [
            'volumeBindingMode: Invalid value: "Immediate": field is immutable']),
    ]


class CSIDriverCases(KindCases, unittest.TestCase):
    group, kind = "storage.k8s.io", "CSIDriver"
    cases = [
        ({"metadata.name": "Ebs_Driver"}, [
            f'metadata.name: Invalid value: "Ebs_Driver": {SUBDOMAIN_MSG}']),
        ({"spec.tokenRequests[0].expirationSeconds": 60}, [
            "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 "
            "minutes"]),
        ({"spec.tokenRequests[1]": {"audience": "sts"}}, ['spec.tokenRequests[1].audience: Duplicate value: "sts"']),
        ({"spec.volumeLifecycleModes": ["Sometimes"]}, [
            'spec.volumeLifecycleModes: Unsupported value: "Sometimes": supported values: "Persistent", '
            '"Ephemeral"']),
        ({"spec.fsGroupPolicy": "Maybe"}, [
            'spec.fsGroupPolicy: Unsupported value: "Maybe": supported values: "File", "None", '
            '"ReadWriteOnceWithFSType"']),
    ]
    update_cases = [
        ({"spec.podInfoOnMount": True, "spec.requiresRepublish": True}, []),
        # sic: upstream's path says attachedRequired
        ({"spec.attachRequired": False}, ["spec.attachedRequired: Invalid value: false: field is immutable"]),
    ]


class CSINodeCases(KindCases, unittest.TestCase):
    group, kind = "storage.k8s.io", "CSINode"
    D0 = "spec.drivers[0]"
    cases = [
        ({"metadata.name": "Node_1"}, [f'metadata.name: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
        ({f"{D0}.name": ""}, [f"{D0}.name: Required value", f'{D0}.name: Invalid value: "": {SUBDOMAIN_MSG}']),
        ({f"{D0}.nodeID": ""}, [f"{D0}.nodeID: Required value"]),
        ({f"{D0}.nodeID": "n" * 257}, [f'{D0}.nodeID: Invalid value: "{"n" * 257}": must be 256 characters or less']),
        ({f"{D0}.allocatable.count": -1}, [f"{D0}.allocatable.count: Invalid value: -1: must be greater than or equal "
                                           f"to 0"]),
        ({"spec.drivers[1]": {"name": "ebs.csi.aws.com", "nodeID": "i-2"}}, [
            'spec.drivers[1].name: Duplicate value: "ebs.csi.aws.com"']),
        ({f"{D0}.topologyKeys": ["zone", "zone"]}, [f'{D0}: Duplicate value: "zone"']),
        ({f"{D0}.topologyKeys": ["a b"]}, [f'{D0}: Invalid value: "a b": {QUALIFIED_MSG}']),
    ]
    update_cases = [
        ({"spec.drivers[1]": {"name": "efs.csi.aws.com", "nodeID": "i-1"}}, []),
        ({f"{D0}.nodeID": "i-2"}, [
            'CSINodeDriver: Invalid value: storage.CSINodeDriver{Name:"ebs.csi.aws.com", NodeID:"i-2", '
            'TopologyKeys:[]string{"topology.ebs.csi.aws.com/zone"}, '
            'Allocatable:(*storage.VolumeNodeResources)(0xc000000000)}: field is immutable']),
    ]


class CSIStorageCapacityCases(KindCases, unittest.TestCase):
    group, kind = "storage.k8s.io", "CSIStorageCapacity"
    cases = [
        ({"storageClassName": "Fast"}, [f'storageClassName: Invalid value: "Fast": {SUBDOMAIN_MSG}']),
        ({"capacity": "-1Gi"}, ['capacity: Invalid value: "-1Gi": must be greater than or equal to 0']),
        ({"nodeTopology.matchLabels": {"zone": "-a"}}, [
            f'nodeTopology.matchLabels: Invalid value: "-a": {LABEL_VALUE_MSG}']),
    ]
    update_cases = [
        ({"capacity": "50Gi"}, []),
        ({"storageClassName": "slow"}, ['storageClassName: Invalid value: "slow": field is immutable']),
        ({"nodeTopology.matchLabels": {"zone": "b"}}, [
            'nodeTopology: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"zone":"b"}, '
            'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable']),
    ]


class VolumeAttachmentCases(KindCases, unittest.TestCase):
    group, kind = "storage.k8s.io", "VolumeAttachment"
    EXACTLY_ONE = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
    cases = [
        ({"spec.attacher": ""}, ["spec.attacher: Required value", "spec.attacher: Required value",
                                 f'spec.attacher: Invalid value: "": {SUBDOMAIN_MSG}']),
        ({"spec.nodeName": "Node_1"}, [f'spec.nodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
        ({"spec.source": {}}, [f"spec.source: Required value: {EXACTLY_ONE}"]),
        ({"spec.source.inlineVolumeSpec": {"csi": {"driver": "d", "volumeHandle": "h"}}}, [
            f"spec.source: Forbidden: {EXACTLY_ONE}"]),
        ({"spec.source.persistentVolumeName": "PV"}, [
            f'spec.source.persistentVolumeName: Invalid value: "PV": {SUBDOMAIN_MSG}']),
        ({"spec.source": {"inlineVolumeSpec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                                               "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "h"}}}}, [
            "spec.source.inlineVolumeSpec.capacity: Forbidden: may not be specified in the context of inline "
            "volumes"]),
        ({"spec.source": {"inlineVolumeSpec": {"accessModes": ["ReadWriteOnce"], "nfs": {"server": "s",
                                                                                        "path": "/x"}}}}, [
            "spec.source.inlineVolumeSpec.csi: Required value: has to be specified in the context of inline "
            "volumes"]),
    ]
    update_cases = [
        ({"metadata.labels": {"x": "y"}}, []),
        ({"spec.nodeName": "node-2"}, [
            'spec: Invalid value: storage.VolumeAttachmentSpec{Attacher:"ebs.csi.aws.com", '
            'Source:storage.VolumeAttachmentSource{PersistentVolumeName:(*string)(0xc000000000), '
            'InlineVolumeSpec:(*core.PersistentVolumeSpec)(nil)}, NodeName:"node-2"}: field is immutable']),
    ]
    status_cases = [
        ({"status": {"attached": True, "attachmentMetadata": {"devicePath": "/dev/xvdba"}}}, []),
        ({"status": {"attached": False, "attachError": {"message": "m" * 1025}}}, [
            "status.attachError.message: Too long: may not be more than 262144 bytes"]),
    ]


class RuntimeClassCases(KindCases, unittest.TestCase):
    group, kind = "node.k8s.io", "RuntimeClass"
    T = "scheduling.tolerations"
    cases = [
        ({"metadata.name": "gVisor"}, [f'metadata.name: Invalid value: "gVisor": {SUBDOMAIN_MSG}']),
        ({"handler": "run.sc"}, ['handler: Invalid value: "run.sc": must not contain dots']),
        ({"handler": ""}, [f'handler: Invalid value: "": {LABEL_MSG}']),
        # upstream checks the overhead as container limits, and the tolerations one level too deep
        ({"overhead.podFixed.cpu": "-1"}, [
            'overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0']),
        ({"overhead.podFixed.gpu": "1"}, [
            'overhead.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified',
            'overhead.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers']),
        ({f"{T}[0].operator": "Like"}, [
            f'{T}.tolerations[0].operator: Unsupported value: "Like": supported values: "Equal", "Exists"']),
        ({f"{T}[1]": {"key": "sandbox", "operator": "Equal", "value": "gvisor", "effect": "NoSchedule",
                      "tolerationSeconds": 5}}, [
            f"{T}.tolerations[1].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
            f"`tolerationSeconds` is set",
            f'{T}[1]: Duplicate value: core.Toleration{{Key:"sandbox", Operator:"Equal", Value:"gvisor", '
            f'Effect:"NoSchedule", TolerationSeconds:(*int64)(0xc000000000)}}']),
        ({"scheduling.nodeSelector": {"a b": "c"}}, [
            f'scheduling.nodeSelector: Invalid value: "a b": {QUALIFIED_MSG}']),
    ]
    update_cases = [
        ({"overhead.podFixed.cpu": "200m"}, []),
        ({"handler": "kata"}, ['handler: Invalid value: "kata": field is immutable']),
    ]


class PriorityClassCases(KindCases, unittest.TestCase):
    group, kind = "scheduling.k8s.io", "PriorityClass"
    cases = [
        ({"value": 1000000001}, ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]),
        ({"metadata.name": "system-high"}, [
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
            "only. error: system-high is not a known system priority class"]),
        ({"metadata.name": "system-cluster-critical"}, [
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use "
            "only. error: value of system-cluster-critical PriorityClass must be 2000000000"]),
        ({"preemptionPolicy": "Always"}, [
            'preemptionPolicy: Unsupported value: "Always": supported values: "PreemptLowerPriority", "Never"']),
    ]
    update_cases = [
        ({"description": "now documented"}, []),
        ({"value": 2000}, ["value: Forbidden: may not be changed in an update."]),
        ({"preemptionPolicy": "PreemptLowerPriority"}, [
            'preemptionPolicy: Invalid value: "PreemptLowerPriority": field is immutable']),
    ]


class EndpointSliceCases(KindCases, unittest.TestCase):
    group, kind = "discovery.k8s.io", "EndpointSlice"
    cases = [
        ({"addressType": "IPX"}, [
            'addressType: Unsupported value: "IPX": supported values: "FQDN", "IPv4", "IPv6"']),
        ({"endpoints[0].addresses": []}, ["endpoints[0].addresses: Required value: must contain at least 1 address"]),
        ({"endpoints[0].addresses": ["fd00::1"]}, [
            'endpoints[0].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address']),
        ({"endpoints[0].addresses": ["127.0.0.1"]}, [
            'endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, '
            '::1/128)']),
        ({"endpoints[0].nodeName": "Node_1"}, [f'endpoints[0].nodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
        ({"endpoints[0].hostname": "Web"}, [f'endpoints[0].hostname: Invalid value: "Web": {LABEL_MSG}']),
        ({"endpoints[0].hints.forZones": [{"name": "a"}, {"name": "a"}]}, [
            'endpoints[0].hints.forZones[1].name: Duplicate value: "a"']),
        ({"ports[0].port": 0}, []),  # upstream does not check an EndpointSlice's port numbers
        ({"ports[1]": {"name": "http", "port": 81}}, ['ports[1].name: Duplicate value: "http"']),
        ({"ports[0].protocol": "ICMP"}, [
            'ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"']),
        ({"ports[0].name": "HTTP"}, [f'ports[0].name: Invalid value: "HTTP": {LABEL_MSG}']),
    ]
    update_cases = [
        ({"endpoints[0].addresses": ["10.1.0.9"]}, []),
        ({"addressType": "IPv6", "endpoints[0].addresses": ["fd00::1"]}, [
            'addressType: Invalid value: "IPv6": field is immutable']),
    ]


class HorizontalPodAutoscalerCases(KindCases, unittest.TestCase):
    group, kind = "autoscaling", "HorizontalPodAutoscaler"
    cases = [
        ({"spec.minReplicas": 0}, ["spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
                                   "spec.metrics: Forbidden: must specify at least one Object or External metric to "
                                   "support scaling to zero replicas"]),
        ({"spec.maxReplicas": 1}, [
            "spec.maxReplicas: Invalid value: 1: must be greater than or equal to `minReplicas`"]),
        ({"spec.maxReplicas": 0}, [
            "spec.maxReplicas: Invalid value: 0: must be greater than 0",
            "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"]),
        ({"spec.scaleTargetRef.kind": ""}, ["spec.scaleTargetRef.kind: Required value"]),
        ({"spec.scaleTargetRef.name": "a/b"}, ['spec.scaleTargetRef.name: Invalid value: "a/b": may not contain '
                                               '\'/\'']),
        ({"spec.metrics[0].resource.target.averageUtilization": 0}, [
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"]),
        # reported twice by upstream: by the type check and by the switch's default
        ({"spec.metrics[0].type": "Custom"}, [
            'spec.metrics[0].type: Unsupported value: "Custom": supported values: "ContainerResource", "External", '
            '"Object", "Pods", "Resource"'] * 2),
        ({"spec.metrics[0].type": "Pods"}, [
            "spec.metrics[0].pods: Required value: must populate information for the given metric source"]),
        ({"spec.metrics[1].resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}, [
            "spec.metrics[1].resource: Forbidden: must populate the given metric source only"]),
        ({"spec.metrics[1].pods.target": {"type": "AverageValue"}}, [
            "spec.metrics[1].pods.target.averageValue: Required value: must specify a positive target "
            "averageValue"]),
        ({"spec.metrics[0].resource.target.type": "Percent"}, [
            'spec.metrics[0].resource.target.type: Invalid value: "Percent": must be either Utilization, Value, '
            'or AverageValue']),
        ({"spec.behavior.scaleDown.policies[0].type": "Nodes"}, [
            'spec.behavior.scaleDown.policies[0].type: Unsupported value: "Nodes": supported values: "Percent", '
            '"Pods"']),
        ({"spec.behavior.scaleDown.policies[0].periodSeconds": 3600}, [
            "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 3600: must be less than or equal to "
            "1800"]),
        ({"spec.behavior.scaleDown.stabilizationWindowSeconds": -1}, [
            "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal "
            "to zero"]),
        ({"spec.behavior.scaleDown.policies": []}, [
            "spec.behavior.scaleDown.policies: Required value: must specify at least one Policy"]),
    ]
    update_cases = [({"spec.maxReplicas": 20}, [])]

    def test_autoscaling_v1_reports_the_v2_paths(self) -> None:
        v1 = {"metadata": {"name": "web"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 3, "maxReplicas": 2, "targetCPUUtilizationPercentage": 0}}
        from kapiserver.apis.builtin import builtin_resource_types
        from tests.apis.harness import create
        [rt] = [t for t in builtin_resource_types() if t.kind == "HorizontalPodAutoscaler" and t.version == "v1"]
        self.assertEqual(create(rt, v1)[1], [
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
            "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0"])


class LeaseCases(KindCases, unittest.TestCase):
    group, kind = "coordination.k8s.io", "Lease"
    cases = [
        ({"spec.leaseDurationSeconds": 0}, ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]),
        ({"spec.leaseTransitions": -1}, [
            "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]),
        ({"spec.preferredHolder": "b"}, []),  # dropped: the CoordinatedLeaderElection gate is off in v1.32
        ({"spec.renewTime": "2024-01-01T00:00:00.000000Z", "spec.acquireTime": "2024-01-01T00:00:00.000000Z"}, []),
    ]
    update_cases = [({"spec.holderIdentity": "b", "spec.leaseTransitions": 3}, [])]


class EventsV1Cases(unittest.TestCase):
    """events.k8s.io/v1 Events: the stricter rules for new-style events."""

    def event(self, **extra) -> dict:
        e = {"metadata": {"name": "web.1", "namespace": "default"}, "eventTime": "2024-01-01T00:00:00.000000Z",
             "reportingController": "example.com/ctl", "reportingInstance": "ctl-1", "action": "Scale",
             "reason": "Scaled", "type": "Normal", "regarding": {"kind": "Pod", "name": "web"}}
        e.update(extra)
        return {k: v for k, v in e.items() if v is not REMOVE}

    def test_valid_event(self) -> None:
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event()), [])

    def test_required_and_forbidden_fields(self) -> None:
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event(eventTime=REMOVE)),
                         ["eventTime: Required value"])
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event(type="Info")),
                         ['type: Invalid value: "": has invalid value: Info'])
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event(reportingController=REMOVE)),
                         ["reportingController: Required value",
                          'reportingController: Invalid value: "": name part must be non-empty',
                          f'reportingController: Invalid value: "": {QUALIFIED_MSG}'])
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event(action="a" * 129)),
                         ['action: Invalid value: "": can have at most 128 characters'])
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event(deprecatedCount=2)),
                         ['count: Invalid value: "": needs to be unset'])
        self.assertEqual(causes_of("events.k8s.io", "Event", self.event(series={"count": 1,
                                                                                "lastObservedTime":
                                                                                "2024-01-01T00:00:00.000000Z"})),
                         ['series.count: Invalid value: "": should be at least 2'])
