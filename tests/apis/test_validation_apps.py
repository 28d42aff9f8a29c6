"""apps/v1: upstream's field errors (kubernetes v1.32 pkg/apis/apps/validation
and the apps strategies' selector immutability)."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis.harness import REMOVE, KindCases
from tests.apis.test_validation_pods import LABEL_MSG, LABEL_VALUE_MSG

NEGATIVE = "must be greater than or equal to 0"
MISMATCH = ('spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: `selector` does not '
            'match template `labels`')
EMPTY_SELECTOR = ("spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
                  "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for ")
BAD_OPERATOR = {"spec.selector.matchExpressions": [{"key": "tier", "operator": "Maybe"}]}
BAD_OPERATOR_CAUSES = [
    'spec.selector.matchExpressions[0].operator: Invalid value: "Maybe": not a valid selector operator',
    'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, '
    'MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"tier", Operator:"Maybe", '
    'Values:[]string(nil)}}}: invalid label selector']
SELECTOR_IMMUTABLE = ('spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"api"}, '
                      'MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable')
PERCENT_MSG = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
               "regex used for validation is '[0-9]+%')")


def replica_set_like(kind: str) -> list[tuple[dict, list[str]]]:
    """What Deployments and ReplicaSets share (ValidatePodTemplateSpecForReplicaSet and the selector)."""
    return [
        ({"spec.replicas": -1}, [f"spec.replicas: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.selector.matchLabels": {"app": "api"}}, [MISMATCH]),
        ({"spec.selector": {}}, [EMPTY_SELECTOR + "deployment"]),  # ReplicaSets say "deployment" too
        (BAD_OPERATOR, BAD_OPERATOR_CAUSES),
        # no selector selects nothing, so the template's labels do not match it either
        ({"spec.selector": REMOVE}, ["spec.selector: Required value", MISMATCH]),
        ({"spec.template.spec.restartPolicy": "Never"}, [
            'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']),
        ({"spec.template.spec.activeDeadlineSeconds": 10}, [
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not "
            "Supported"]),
        ({"spec.template.metadata.labels.tier": "-x"}, [
            f'spec.template.labels: Invalid value: "-x": {LABEL_VALUE_MSG}']),
        ({"spec.template.spec.containers[0].name": "App"}, [
            f'spec.template.spec.containers[0].name: Invalid value: "App": {LABEL_MSG}']),
        ({"spec.minReadySeconds": -1}, [f"spec.minReadySeconds: Invalid value: -1: {NEGATIVE}"]),
    ]


class DeploymentCases(KindCases, unittest.TestCase):
    group, kind = "apps", "Deployment"
    cases = replica_set_like("Deployment") + [
        ({"spec.strategy.type": "Recreate"}, [
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]),
        ({"spec.strategy": {"type": "Recreate"}}, []),
        ({"spec.strategy.type": "Canary"}, [
            'spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:"Canary", '
            'RollingUpdate:(*apps.RollingUpdateDeployment)(0xc000000000)}: supported values: "Recreate", '
            '"RollingUpdate"']),
        ({"spec.strategy.rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}, [
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, '
            'StrVal:""}: may not be 0 when `maxSurge` is 0']),
        ({"spec.strategy.rollingUpdate.maxUnavailable": "150%"}, [
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
            'StrVal:"150%"}: must not be greater than 100%']),
        ({"spec.strategy.rollingUpdate.maxSurge": "x"}, [
            f'spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, '
            f'StrVal:"x"}}: {PERCENT_MSG}']),
        ({"spec.strategy.rollingUpdate.maxUnavailable": -1}, [
            f"spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.progressDeadlineSeconds": 5}, [
            "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds"]),
        ({"spec.revisionHistoryLimit": -1}, [f"spec.revisionHistoryLimit: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.revisionHistoryLimit": 0}, []),
    ]
    update_cases = [
        ({"spec.replicas": 10, "spec.template.spec.containers[0].image": "nginx:1.28"}, []),
        ({"spec.selector.matchLabels": {"app": "api"}, "spec.template.metadata.labels": {"app": "api"}},
         [SELECTOR_IMMUTABLE]),
    ]
    status_cases = [
        ({"status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 2, "updatedReplicas": 3}}, []),
        ({"status": {"replicas": 0, "readyReplicas": 5}}, [
            "status.readyReplicas: Invalid value: 5: cannot be greater than status.replicas"]),
        ({"status": {"replicas": 3, "readyReplicas": 1, "availableReplicas": 2}}, [
            "status.availableReplicas: Invalid value: 2: cannot be greater than readyReplicas"]),
        ({"status": {"observedGeneration": -1}}, [f"status.observedGeneration: Invalid value: -1: {NEGATIVE}"]),
    ]


class ReplicaSetCases(KindCases, unittest.TestCase):
    group, kind = "apps", "ReplicaSet"
    cases = replica_set_like("ReplicaSet")
    update_cases = [
        ({"spec.replicas": 0}, []),
        ({"spec.selector.matchLabels": {"app": "api"}, "spec.template.metadata.labels": {"app": "api"}},
         [SELECTOR_IMMUTABLE]),
    ]
    status_cases = [
        ({"status": {"replicas": 1, "fullyLabeledReplicas": 2}}, [
            "status.fullyLabeledReplicas: Invalid value: 2: cannot be greater than status.replicas"]),
    ]


class StatefulSetCases(KindCases, unittest.TestCase):
    group, kind = "apps", "StatefulSet"
    cases = [
        ({"metadata.name": "web.1"}, ['metadata.name: Invalid value: "web.1": must not contain dots']),
        ({"spec.podManagementPolicy": "Random"}, [
            "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"]),
        ({"spec.updateStrategy.type": "OnDelete"}, [
            "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, "
            "MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'"]),
        ({"spec.updateStrategy.rollingUpdate.partition": -1}, [
            f"spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.persistentVolumeClaimRetentionPolicy.whenDeleted": "Keep"}, [
            'spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: '
            '"Retain", "Delete"']),
        ({"spec.ordinals.start": -1}, [f"spec.ordinals.start: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.replicas": -1}, [f"spec.replicas: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.selector.matchLabels": {"app": "api"}}, [MISMATCH]),
        ({"spec.selector": {}}, [EMPTY_SELECTOR + "statefulset"]),
        ({"spec.template.spec.restartPolicy": "OnFailure"}, [
            'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"']),
        ({"spec.template.spec.activeDeadlineSeconds": 10}, [
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not "
            "Supported"]),
        # upstream does not validate a StatefulSet's pod spec (only its labels and annotations)
        ({"spec.template.spec.containers[0].name": "App"}, []),
        ({"spec.template.metadata.labels.tier": "-x"}, [
            f'spec.template.labels: Invalid value: "-x": {LABEL_VALUE_MSG}']),
    ]
    update_cases = [
        ({"spec.replicas": 5, "spec.minReadySeconds": 10, "spec.updateStrategy": {"type": "OnDelete"},
          "spec.template.spec.containers[0].image": "nginx:1.28", "spec.ordinals.start": 0}, []),
        ({"spec.serviceName": "other"}, [
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
            "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
            "forbidden"]),
    ]
    status_cases = [
        ({"status": {"replicas": 0, "readyReplicas": 2, "availableReplicas": 2}}, [
            "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
            "status.availableReplicas: Invalid value: 2: cannot be greater than status.replicas"]),
        ({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2}}, [
            "status.availableReplicas: Invalid value: 2: cannot be greater than status.readyReplicas"]),
    ]


class DaemonSetCases(KindCases, unittest.TestCase):
    group, kind = "apps", "DaemonSet"
    cases = [
        ({"spec.updateStrategy.rollingUpdate.maxSurge": 1}, [
            'spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, '
            'StrVal:""}: may not be set when maxUnavailable is non-zero']),
        ({"spec.updateStrategy.rollingUpdate.maxUnavailable": 0}, [
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"]),
        ({"spec.updateStrategy.rollingUpdate.maxUnavailable": "101%"}, [
            'spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
            'StrVal:"101%"}: must not be greater than 100%']),
        ({"spec.updateStrategy.type": "Random"}, [
            'spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:"Random", '
            'RollingUpdate:(*apps.RollingUpdateDaemonSet)(0xc000000000)}: supported values: "RollingUpdate", '
            '"OnDelete"']),
        ({"spec.updateStrategy": {"type": "OnDelete"}}, []),
        ({"spec.selector": {}}, [EMPTY_SELECTOR + "daemonset"]),
        ({"spec.selector.matchLabels": {"app": "api"}}, [MISMATCH]),
        ({"spec.template.spec.restartPolicy": "OnFailure"}, [
            'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"']),
        ({"spec.template.spec.activeDeadlineSeconds": 10}, [
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not "
            "Supported"]),
        ({"spec.minReadySeconds": -1}, [f"spec.minReadySeconds: Invalid value: -1: {NEGATIVE}"]),
        ({"spec.revisionHistoryLimit": -1}, [f"spec.revisionHistoryLimit: Invalid value: -1: {NEGATIVE}"]),
    ]
    update_cases = [
        ({"spec.template.spec.containers[0].image": "nginx:1.28"}, []),  # the template generation follows
        ({"spec.selector.matchLabels": {"app": "api"}, "spec.template.metadata.labels": {"app": "api"}},
         [SELECTOR_IMMUTABLE]),
    ]
    status_cases = [
        ({"status": {"numberReady": -1, "currentNumberScheduled": 0, "numberMisscheduled": 0,
                     "desiredNumberScheduled": 0}}, [f"status.numberReady: Invalid value: -1: {NEGATIVE}"]),
    ]


class ControllerRevisionCases(KindCases, unittest.TestCase):
    group, kind = "apps", "ControllerRevision"
    cases = [
        ({"revision": -1}, [f"revision: Invalid value: -1: {NEGATIVE}"]),
        ({"data": REMOVE}, ["data: Required value: data is mandatory"]),
        ({"data": [1]}, ["data: Required value: data must be a valid JSON object"]),
    ]
    update_cases = [
        ({"metadata.labels": {"x": "y"}, "revision": 3}, []),
        # Raw holds the bytes the client sent; a client sending compact JSON sees exactly these
        ({"data": {"spec": {"x": 2}}}, [
            "data: Invalid value: runtime.RawExtension{Raw:[]uint8{"
            + ", ".join(f"0x{b:x}" for b in b'{"spec":{"x":2}}')
            + "}, Object:runtime.Object(nil)}: field is immutable"]),
    ]
