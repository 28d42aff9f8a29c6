"""Pods and pod templates: upstream's field errors, one broken field at a time.

Each expectation is written from kubernetes v1.32's pkg/apis/core/validation
(validateContainerCommon, ValidateVolumes, ValidateTolerations, ...) and
apimachinery's message helpers, not from kapiserver's output."""
from __future__ import annotations

from twisted.trial import unittest

from tests.apis.harness import REMOVE, KindCases, invalid_update_causes

LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
                 "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                 "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                   "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
PORT_RANGE = "must be between 1 and 65535, inclusive"
IP_MSG = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
C = "spec.containers[0]"


def pod_spec_cases(spec: str, pod: bool) -> list[tuple[dict, list[str]]]:
    """Cases shared by Pods and every kind embedding a pod template (``spec`` is the PodSpec's path)."""
    c = f"{spec}.containers[0]"
    cases: list[tuple[dict, list[str]]] = [
        # container names: DNS-1123 labels, unique across containers and init containers
        ({f"{c}.name": "App_1"}, [f'{c}.name: Invalid value: "App_1": {LABEL_MSG}']),
        ({f"{spec}.initContainers[0].name": "app"}, [f'{spec}.initContainers[0].name: Duplicate value: "app"']),
        ({f"{c}.image": ""}, [f"{c}.image: Required value"]),
        # ports
        ({f"{c}.ports[0].containerPort": 0}, [f"{c}.ports[0].containerPort: Required value"]),
        ({f"{c}.ports[0].containerPort": 70000}, [f"{c}.ports[0].containerPort: Invalid value: 70000: {PORT_RANGE}"]),
        ({f"{c}.ports[0].hostPort": -1}, [f"{c}.ports[0].hostPort: Invalid value: -1: {PORT_RANGE}"]),
        ({f"{c}.ports[0].name": "HTTP"}, [
            f'{c}.ports[0].name: Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), '
            f'and hyphens (-)',
            f'{c}.ports[0].name: Invalid value: "HTTP": must contain at least one letter (a-z)']),
        ({f"{c}.ports[0].name": "a--very-long-port"}, [
            f'{c}.ports[0].name: Invalid value: "a--very-long-port": must be no more than 15 characters',
            f'{c}.ports[0].name: Invalid value: "a--very-long-port": must not contain consecutive hyphens']),
        ({f"{c}.ports[1]": {"name": "http", "containerPort": 81}}, [f'{c}.ports[1].name: Duplicate value: "http"']),
        ({f"{c}.ports[0].protocol": "ICMP"}, [
            f'{c}.ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"']),
        # env
        ({f"{c}.env[0].name": ""}, [f"{c}.env[0].name: Required value"]),
        ({f"{c}.env[0].name": "A=B"}, [
            f'{c}.env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of '
            f"printable ASCII characters other than '='"]),
        ({f"{c}.env[1].value": "x"}, [
            f'{c}.env[1].valueFrom: Invalid value: "": may not be specified when `value` is not empty']),
        ({f"{c}.env[1].valueFrom": {}}, [
            f'{c}.env[1].valueFrom: Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, '
            f'`configMapKeyRef` or `secretKeyRef`']),
        ({f"{c}.env[1].valueFrom.fieldRef.fieldPath": "metadata.foo"}, [
            f'{c}.env[1].valueFrom.fieldRef.fieldPath: Invalid value: "metadata.foo": error converting fieldPath: '
            f'field label not supported: metadata.foo']),
        ({f"{c}.env[3].valueFrom.resourceFieldRef.resource": "limits.gpu"}, [
            f'{c}.env[3].valueFrom.resourceFieldRef.resource: Unsupported value: "limits.gpu": supported values: '
            f'"limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", '
            f'"requests.ephemeral-storage", "requests.memory"']),
        ({f"{c}.envFrom[0].prefix": "A=B"}, [
            f'{c}.envFrom[0].prefix: Invalid value: "A=B": a valid environment variable name must consist only '
            f"of printable ASCII characters other than '='"]),
        # resources: names, non-negative, requests within limits
        ({f"{c}.resources.requests.cpu": "1"}, [
            f'{c}.resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 500m']),
        ({f"{c}.resources.limits.memory": "-1"}, [
            f'{c}.resources.limits[memory]: Invalid value: "-1": must be greater than or equal to 0',
            f'{c}.resources.requests: Invalid value: "64Mi": must be less than or equal to memory limit of -1']),
        ({f"{c}.resources.limits.gpu": "1"}, [
            f'{c}.resources.limits[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified',
            f'{c}.resources.limits[gpu]: Invalid value: "gpu": must be a standard resource for containers']
         + ([  # a Pod's requests default to its limits, a template's do not
            f'{c}.resources.requests[gpu]: Invalid value: "gpu": must be a standard resource type or fully '
            f'qualified',
            f'{c}.resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers']
            if pod else [])),
        # volume mounts
        ({f"{c}.volumeMounts[0].name": "missing"}, [f'{c}.volumeMounts[0].name: Not found: "missing"']),
        ({f"{c}.volumeMounts[1].mountPath": "/data"}, [
            f'{c}.volumeMounts[1].mountPath: Invalid value: "/data": must be unique']),
        ({f"{c}.volumeMounts[0].subPath": "../x"}, [
            f"{c}.volumeMounts.subPath: Invalid value: \"../x\": must not contain '..'"]),
        ({f"{c}.volumeMounts[0].subPath": "/x"}, [
            f'{c}.volumeMounts.subPath: Invalid value: "/x": must be a relative path']),
        ({f"{c}.imagePullPolicy": "Sometimes"}, [
            f'{c}.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", '
            f'"Never"']),
        # probes and lifecycle handlers
        ({f"{c}.livenessProbe.periodSeconds": -1}, [
            f"{c}.livenessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0"]),
        ({f"{c}.livenessProbe.tcpSocket": {"port": 80}}, [
            f"{c}.livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type"]),
        ({f"{c}.livenessProbe.httpGet.port": 0}, [f"{c}.livenessProbe.httpGet.port: Invalid value: 0: {PORT_RANGE}"]),
        ({f"{c}.readinessProbe.tcpSocket.port": "-http"}, [
            f'{c}.readinessProbe.tcpSocket.port: Invalid value: "-http": must not begin or end with a hyphen']),
        ({f"{c}.livenessProbe": {"periodSeconds": 10}}, [
            f"{c}.livenessProbe: Required value: must specify a handler type"]),
        ({f"{c}.livenessProbe.successThreshold": 2}, [
            f"{c}.livenessProbe.successThreshold: Invalid value: 2: must be 1"]),
        ({f"{c}.lifecycle.preStop.sleep.seconds": 60}, [
            f"{c}.lifecycle.preStop.sleep: Invalid value: 60: must be greater than 0 and less than "
            f"terminationGracePeriodSeconds (30). Enable AllowPodLifecycleSleepActionZeroValue feature gate for "
            f"zero sleep."]),
        ({f"{c}.startupProbe.exec.command": []}, [f"{c}.startupProbe.exec.command: Required value"]),
        # security contexts
        ({f"{c}.securityContext.runAsUser": -1}, [
            f"{c}.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive"]),
        ({f"{spec}.securityContext.runAsUser": 1 << 31}, [
            f"{spec}.securityContext.runAsUser: Invalid value: 2147483648: must be between 0 and 2147483647, "
            f"inclusive"]),
        ({f"{spec}.securityContext.supplementalGroups": [-5]}, [
            f"{spec}.securityContext.supplementalGroups[0]: Invalid value: -5: must be between 0 and 2147483647, "
            f"inclusive"]),
        ({f"{c}.securityContext.seccompProfile.type": "Loose"}, [
            f'{c}.securityContext.seccompProfile.type: Unsupported value: "Loose": supported values: "Localhost", '
            f'"RuntimeDefault", "Unconfined"']),
        ({f"{c}.securityContext.privileged": True}, [
            f"{c}.securityContext: Invalid value: core.SecurityContext{{Capabilities:(*core.Capabilities)"
            f"(0xc000000000), Privileged:(*bool)(0xc000000000), SELinuxOptions:(*core.SELinuxOptions)(nil), "
            f"WindowsOptions:(*core.WindowsSecurityContextOptions)(nil), RunAsUser:(*int64)(0xc000000000), "
            f"RunAsGroup:(*int64)(nil), RunAsNonRoot:(*bool)(0xc000000000), ReadOnlyRootFilesystem:(*bool)(nil), "
            f"AllowPrivilegeEscalation:(*bool)(0xc000000000), ProcMount:(*core.ProcMountType)(nil), "
            f"SeccompProfile:(*core.SeccompProfile)(0xc000000000), AppArmorProfile:(*core.AppArmorProfile)(nil)}}: "
            f"cannot set `allowPrivilegeEscalation` to false and `privileged` to true"]),
        # init containers and sidecars
        ({f"{spec}.initContainers[1].restartPolicy": "Never"}, [
            f'{spec}.initContainers[1].restartPolicy: Unsupported value: "Never": supported values: "Always"',
            f"{spec}.initContainers[1].readinessProbe: Forbidden: may not be set for init containers without "
            f"restartPolicy=Always"]),
        ({f"{spec}.initContainers[0].livenessProbe": {"exec": {"command": ["true"]}}}, [
            f"{spec}.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without "
            f"restartPolicy=Always"]),
        ({f"{c}.restartPolicy": "Always"}, [f"{c}.restartPolicy: Forbidden: may not be set for non-init containers"]),
        # volumes: a broken volume is not registered, so its mounts are not found either
        ({f"{spec}.volumes[1].name": "data"}, [
            f'{spec}.volumes[1].name: Duplicate value: "data"',
            f'{c}.volumeMounts[1].name: Not found: "config"']),
        ({f"{spec}.volumes[0]": {"name": "data"}}, []),  # a volume without a source defaults to an emptyDir
        ({f"{spec}.volumes[0].hostPath": {"path": "/x"}}, [
            f"{spec}.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
            f'{c}.volumeMounts[0].name: Not found: "data"']),
        ({f"{spec}.volumes[5].hostPath.path": ""}, [f"{spec}.volumes[5].hostPath.path: Required value"]),
        ({f"{spec}.volumes[5].hostPath.type": "Folder"}, [
            f'{spec}.volumes[5].hostPath.type: Unsupported value: "Folder": supported values: "", "BlockDevice", '
            f'"CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"']),
        ({f"{spec}.volumes[2].secret.defaultMode": 0o1000}, [
            f"{spec}.volumes[2].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 "
            f"(octal), both inclusive"]),
        ({f"{spec}.volumes[1].configMap.items[0].path": "../a"}, [
            f"{spec}.volumes[1].configMap.items[0].path: Invalid value: \"../a\": must not contain '..'",
            f'{c}.volumeMounts[1].name: Not found: "config"']),
        ({f"{spec}.volumes[4].persistentVolumeClaim.claimName": ""}, [
            f"{spec}.volumes[4].persistentVolumeClaim.claimName: Required value"]),
        ({f"{spec}.volumes[0].emptyDir.sizeLimit": "-1Gi"}, [
            f'{spec}.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity',
            f'{c}.volumeMounts[0].name: Not found: "data"']),
        # pod-level fields
        ({f"{spec}.restartPolicy": "Sometimes"}, [
            f'{spec}.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", '
            f'"Never"']),
        ({f"{spec}.dnsPolicy": "Sometimes"}, [
            f'{spec}.dnsPolicy: Unsupported value: "Sometimes": supported values: "ClusterFirstWithHostNet", '
            f'"ClusterFirst", "Default", "None"']),
        ({f"{spec}.dnsConfig": REMOVE}, [f"{spec}.dnsConfig: Required value: must provide `dnsConfig` when "
                                         f"`dnsPolicy` is None"]),
        ({f"{spec}.dnsConfig.nameservers": ["10.96.0.10", "1.1.1.1", "8.8.8.8", "9.9.9.9"]}, [
            f'{spec}.dnsConfig.nameservers: Invalid value: []string{{"10.96.0.10", "1.1.1.1", "8.8.8.8", '
            f'"9.9.9.9"}}: must not have more than 3 nameservers']),
        ({f"{spec}.dnsConfig.nameservers[0]": "10.96.0"}, [
            f'{spec}.dnsConfig.nameservers[0]: Invalid value: "10.96.0": {IP_MSG}']),
        ({f"{spec}.dnsConfig.searches[0]": "Svc.local"}, [
            f'{spec}.dnsConfig.searches[0]: Invalid value: "Svc.local": {SUBDOMAIN_MSG}']),
        ({f"{spec}.dnsConfig.options[0].name": ""}, [
            f"{spec}.dnsConfig.options[0]: Required value: must not be empty"]),
        ({f"{spec}.nodeSelector": {"a b": "x"}}, [f'{spec}.nodeSelector: Invalid value: "a b": {QUALIFIED_MSG}']),
        ({f"{spec}.nodeSelector": {"zone": "-a"}}, [f'{spec}.nodeSelector: Invalid value: "-a": {LABEL_VALUE_MSG}']),
        ({f"{spec}.hostname": "Web"}, [f'{spec}.hostname: Invalid value: "Web": {LABEL_MSG}']),
        ({f"{spec}.subdomain": "a.b"}, [f'{spec}.subdomain: Invalid value: "a.b": must not contain dots']),
        ({f"{spec}.serviceAccountName": "App"}, [f'{spec}.serviceAccountName: Invalid value: "App": {SUBDOMAIN_MSG}']),
        ({f"{spec}.nodeName": "Node_1"}, [f'{spec}.nodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
        # a negative grace period is accepted (deletion treats it as 1), but a sleep cannot fit in it
        ({f"{spec}.terminationGracePeriodSeconds": -5}, [
            f"{c}.lifecycle.preStop.sleep: Invalid value: 5: must be greater than 0 and less than "
            f"terminationGracePeriodSeconds (-5). Enable AllowPodLifecycleSleepActionZeroValue feature gate for "
            f"zero sleep."]),
        ({f"{spec}.terminationGracePeriodSeconds": REMOVE}, []),  # defaulted to 30
        # tolerations (the value is reported at .operator, as upstream does)
        ({f"{spec}.tolerations[0].value": "a b"}, [
            f'{spec}.tolerations[0].operator: Invalid value: "a b": {LABEL_VALUE_MSG}']),
        ({f"{spec}.tolerations[0].key": ""}, [
            f'{spec}.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
            f'which means "match all values and all keys"']),
        ({f"{spec}.tolerations[1].effect": "NoSchedule"}, [
            f"{spec}.tolerations[1].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
            f"`tolerationSeconds` is set"]),
        ({f"{spec}.tolerations[0].operator": "Like"}, [
            f'{spec}.tolerations[0].operator: Unsupported value: "Like": supported values: "Equal", "Exists"']),
        ({f"{spec}.tolerations[0].effect": "Sometimes"}, [
            f'{spec}.tolerations[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
            f'"PreferNoSchedule", "NoExecute"']),
        ({f"{spec}.hostAliases[0].ip": "10.0.0.256"}, [
            f'{spec}.hostAliases[0].ip: Invalid value: "10.0.0.256": {IP_MSG}']),
        ({f"{spec}.hostAliases[0].hostnames[0]": "DB"}, [
            f'{spec}.hostAliases[0].hostnames[0]: Invalid value: "DB": {SUBDOMAIN_MSG}']),
        ({f"{spec}.readinessGates[0].conditionType": "a b"}, [
            f'{spec}.readinessGates[0].conditionType: Invalid value: "a b": {QUALIFIED_MSG}']),
        # affinity and spreading
        ({f"{spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
          f".matchExpressions[0].operator": "Maybe"}, [
            f'{spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]'
            f'.matchExpressions[0].operator: Invalid value: "Maybe": not a valid selector operator']),
        ({f"{spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
          f".matchExpressions[0].values": []}, [
            f'{spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]'
            f'.matchExpressions[0].values: Required value: must be specified when `operator` is \'In\' or '
            f'\'NotIn\'']),
        ({f"{spec}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight": 0}, [
            f"{spec}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
            f"Invalid value: 0: must be in the range 1-100"]),
        ({f"{spec}.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
          f".topologyKey": ""}, [
            f"{spec}.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
            f".topologyKey: Required value: can not be empty",
            f'{spec}.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm'
            f'.topologyKey: Invalid value: "": name part must be non-empty',
            f"{spec}.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
            f".topologyKey: Invalid value: \"\": {QUALIFIED_MSG}"]),
        ({f"{spec}.topologySpreadConstraints[0].maxSkew": 0}, [
            f"{spec}.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"]),
        ({f"{spec}.topologySpreadConstraints[0].whenUnsatisfiable": "Maybe"}, [
            f'{spec}.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": supported values: '
            f'"DoNotSchedule", "ScheduleAnyway"']),
        ({f"{spec}.topologySpreadConstraints[1]": {"maxSkew": 2, "topologyKey": "zone",
                                                   "whenUnsatisfiable": "DoNotSchedule"}}, [
            f'{spec}.topologySpreadConstraints[0].{{topologyKey, whenUnsatisfiable}}: Duplicate value: '
            f'"{{zone, DoNotSchedule}}"']),
        ({f"{spec}.os": {"name": "plan9"}}, [
            f'{spec}.os: Unsupported value: "plan9": supported values: "linux", "windows"']),
        ({f"{spec}.os": {"name": ""}}, [f"{spec}.os.name: Required value: cannot be empty"]),
    ]
    if pod:  # checks only a Pod gets, not a template
        cases += [
            ({f"{c}.image": " nginx"}, [f'{c}.image: Invalid value: " nginx": must not have leading or trailing '
                                        f'whitespace']),
            ({f"{spec}.activeDeadlineSeconds": 0}, [
                f"{spec}.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"]),
        ]
    return cases


class PodCases(KindCases, unittest.TestCase):
    kind = "Pod"
    cases = pod_spec_cases("spec", pod=True) + [
        ({"metadata.name": "Web"}, [f'metadata.name: Invalid value: "Web": {SUBDOMAIN_MSG}']),
        ({"metadata.labels": {"app": "-bad"}}, [f'metadata.labels: Invalid value: "-bad": {LABEL_VALUE_MSG}']),
        ({"metadata.annotations": {"controller.kubernetes.io/pod-deletion-cost": "x"}}, [
            'metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: "x": must be a 32bit '
            'integer']),
    ]
    update_cases = [
        ({f"{C}.image": "nginx:1.28", "spec.activeDeadlineSeconds": 1800,
          "spec.tolerations[2]": {"key": "k", "operator": "Exists"}}, []),
        ({"spec.activeDeadlineSeconds": 7200}, [
            "spec.activeDeadlineSeconds: Invalid value: 7200: must be less than or equal to previous value"]),
        ({"spec.activeDeadlineSeconds": REMOVE}, [
            'spec.activeDeadlineSeconds: Invalid value: "null": must not update from a positive integer to nil value']),
        ({"spec.tolerations[0].value": "db"}, [
            "spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]),
        ({"spec.containers[1]": {"name": "two", "image": "x"}}, [
            "spec.containers: Forbidden: pod updates may not add or remove containers"]),
        # the new spec is validated, and the image is checked again among the updatable fields
        ({f"{C}.image": ""}, [f"{C}.image: Required value"] * 2),
    ]
    status_cases = [
        ({"status.phase": "Running", "status.podIP": "10.1.0.5", "status.podIPs": [{"ip": "10.1.0.5"}]}, []),
        ({"status.podIPs": [{"ip": "10.1.0.500"}]}, [
            f'status.podIPs[0]: Invalid value: "10.1.0.500": {IP_MSG}']),
        ({"status.nominatedNodeName": "Node_1"}, [
            f'status.nominatedNodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}']),
    ]

    def test_other_spec_changes_are_refused_with_the_list_of_mutable_fields(self) -> None:
        # the diff after the list is cmp.Diff's in upstream and only approximated here
        [cause] = invalid_update_causes("", "Pod", {f"{C}.name": "other"})
        self.assertTrue(cause.startswith("spec: Forbidden: pod updates may not change fields other than "), cause)
        self.assertIn('"name":"other"', cause)
        [cause] = invalid_update_causes("", "Pod", {f"{C}.ports[0].containerPort": 8080})
        self.assertTrue(cause.startswith(
            "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
            "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
            "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
            "previously negative)\n"), cause)
        self.assertIn("8080", cause)


class PodTemplateCases(KindCases, unittest.TestCase):
    kind = "PodTemplate"
    cases = pod_spec_cases("template.spec", pod=False) + [
        ({"template.metadata.labels": {"app": "-bad"}}, [
            f'template.labels: Invalid value: "-bad": {LABEL_VALUE_MSG}']),
        ({"template.spec.activeDeadlineSeconds": 10}, []),
    ]
    update_cases = [({"template.spec.containers[0].ports[0].containerPort": 8080}, [])]
