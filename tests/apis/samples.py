"""Rich, valid objects of every built-in kind: the starting points of the
validation tests (each test breaks one thing and checks upstream's message)."""
from __future__ import annotations

import copy
from typing import Any

POD_SPEC: dict = {
    "containers": [{
        "name": "app", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
        "command": ["nginx"], "args": ["-g", "daemon off;"], "workingDir": "/",
        "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
        "env": [{"name": "MODE", "value": "prod"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}}],
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "config", "mountPath": "/etc/app",
                                                                   "readOnly": True}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 10},
        "readinessProbe": {"tcpSocket": {"port": "http"}},
        "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "securityContext": {"runAsUser": 1000, "runAsNonRoot": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}},
    }],
    "initContainers": [{"name": "init", "image": "busybox:1.36", "command": ["sh", "-c", "true"]},
                       {"name": "sidecar", "image": "envoy:1", "restartPolicy": "Always",
                        "readinessProbe": {"grpc": {"port": 9901}}}],
    "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "config", "configMap": {"name": "settings", "items": [{"key": "a", "path": "a.conf"}]}},
                {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o400}},
                {"name": "token", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                    {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}},
                {"name": "claim", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}}],
    "restartPolicy": "Always", "dnsPolicy": "None",
    "dnsConfig": {"nameservers": ["10.96.0.10"], "searches": ["svc.cluster.local"], "options": [{"name": "ndots",
                                                                                                  "value": "2"}]},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "serviceAccountName": "app", "hostname": "web", "subdomain": "web",
    "securityContext": {"runAsUser": 1000, "fsGroup": 2000, "supplementalGroups": [3000],
                        "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]},
    "imagePullSecrets": [{"name": "registry"}],
    "affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {"matchExpressions": [
                {"key": "ssd", "operator": "Exists"}]}}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}}]}},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
                    {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                   "labelSelector": {"matchLabels": {"app": "web"}}}],
    "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}],
    "readinessGates": [{"conditionType": "example.com/ready"}],
    "priorityClassName": "high", "terminationGracePeriodSeconds": 30,
}
TEMPLATE: dict = {"metadata": {"labels": {"app": "web"}, "annotations": {"note": "x"}}, "spec": POD_SPEC}


def template(restart_policy: str = "Always") -> dict:
    t = copy.deepcopy(TEMPLATE)
    t["spec"]["restartPolicy"] = restart_policy
    return t


def meta(name: str = "web", **extra: Any) -> dict:
    return {"name": name, "namespace": "default", "labels": {"app": "web"}, **extra}


SAMPLES: dict[tuple[str, str], dict] = {
    ("", "Pod"): {"metadata": meta(), "spec": {**copy.deepcopy(POD_SPEC), "activeDeadlineSeconds": 3600}},
    ("", "PodTemplate"): {"metadata": meta(), "template": template()},
    ("", "ReplicationController"): {"metadata": meta(), "spec": {"replicas": 2, "selector": {"app": "web"},
                                                                   "template": template()}},
    ("", "Service"): {"metadata": meta(), "spec": {
        "type": "LoadBalancer", "selector": {"app": "web"}, "externalTrafficPolicy": "Local",
        "ports": [{"name": "http", "port": 80, "targetPort": "http"}, {"name": "https", "port": 443,
                                                                      "appProtocol": "https"}],
        "sessionAffinity": "ClientIP", "loadBalancerSourceRanges": ["10.0.0.0/8"],
        "externalIPs": ["192.0.2.10"], "ipFamilyPolicy": "SingleStack"}},
    ("", "Endpoints"): {"metadata": meta(), "subsets": [{
        "addresses": [{"ip": "10.1.0.5", "hostname": "web-0", "nodeName": "node-1"}],
        "notReadyAddresses": [{"ip": "10.1.0.6"}],
        "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443, "protocol": "TCP"}]}]},
    ("", "ConfigMap"): {"metadata": meta(), "data": {"a.conf": "x"}, "binaryData": {"b.bin": "AAE="}},
    ("", "Secret"): {"metadata": meta(), "type": "kubernetes.io/tls", "data": {"tls.crt": "YQ==", "tls.key": "Yg=="}},
    ("", "ServiceAccount"): {"metadata": meta(), "secrets": [{"name": "token"}],
                             "imagePullSecrets": [{"name": "registry"}]},
    ("", "Namespace"): {"metadata": {"name": "team", "labels": {"a": "b"}}, "spec": {"finalizers": ["kubernetes"]}},
    ("", "PersistentVolumeClaim"): {"metadata": meta(), "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "fast", "volumeMode": "Filesystem",
        "selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]},
        "dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}},
    ("", "PersistentVolume"): {"metadata": {"name": "pv"}, "spec": {
        "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "fast", "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1",
                                            "nodePublishSecretRef": {"name": "s", "namespace": "kube-system"}},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}},
    ("", "Node"): {"metadata": {"name": "node-1"}, "spec": {
        "podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"], "providerID": "aws:///i-1",
        "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}, "allocatable": {"cpu": "3800m"},
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}},
    ("", "ResourceQuota"): {"metadata": meta(), "spec": {
        "hard": {"pods": "10", "requests.cpu": "4", "limits.memory": "8Gi"}, "scopes": ["NotTerminating"]}},
    ("", "LimitRange"): {"metadata": meta(), "spec": {"limits": [
        {"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "100m"}, "default": {"cpu": "500m"},
         "defaultRequest": {"cpu": "200m"}, "maxLimitRequestRatio": {"cpu": "10"}},
        {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}}]}},
    ("", "Event"): {"metadata": meta("web.1"), "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
                    "reason": "Started", "message": "started", "type": "Normal", "count": 1,
                    "source": {"component": "kubelet"}},
    ("apps", "Deployment"): {"metadata": meta(), "spec": {
        "replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template(),
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        "minReadySeconds": 5, "revisionHistoryLimit": 5, "progressDeadlineSeconds": 60}},
    ("apps", "ReplicaSet"): {"metadata": meta(), "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                                          "template": template()}},
    ("apps", "StatefulSet"): {"metadata": meta(), "spec": {
        "replicas": 3, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}}, "template": template(),
        "podManagementPolicy": "Parallel", "updateStrategy": {"type": "RollingUpdate",
                                                              "rollingUpdate": {"partition": 1}},
        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
        "ordinals": {"start": 1}}},
    ("apps", "DaemonSet"): {"metadata": meta(), "spec": {
        "selector": {"matchLabels": {"app": "web"}}, "template": template(),
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}}}},
    ("apps", "ControllerRevision"): {"metadata": meta("web-1"), "revision": 1, "data": {"spec": {"x": 1}}},
    ("batch", "Job"): {"metadata": meta("work"), "spec": {
        "parallelism": 2, "completions": 4, "completionMode": "Indexed", "backoffLimitPerIndex": 1,
        "maxFailedIndexes": 2, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": 60,
        "template": template("Never"), "podReplacementPolicy": "Failed",
        "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "app", "operator": "In", "values": [1, 2]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
        "successPolicy": {"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]}}},
    ("batch", "CronJob"): {"metadata": meta("nightly"), "spec": {
        "schedule": "0 3 * * *", "timeZone": "Europe/Paris", "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 100, "successfulJobsHistoryLimit": 2,
        "jobTemplate": {"spec": {"backoffLimit": 2, "template": template("OnFailure")}}}},
    ("rbac.authorization.k8s.io", "Role"): {"metadata": meta("reader"), "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"], "resourceNames": ["web"]}]},
    ("rbac.authorization.k8s.io", "ClusterRole"): {"metadata": {"name": "agg"}, "rules": [
        {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate": "true"}}]}},
    ("rbac.authorization.k8s.io", "RoleBinding"): {"metadata": meta("read"), "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "jane"}, {"kind": "ServiceAccount", "name": "app"}]},
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): {"metadata": {"name": "read"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "agg"},
        "subjects": [{"kind": "Group", "name": "devs"}, {"kind": "ServiceAccount", "name": "app",
                                                          "namespace": "default"}]},
    ("networking.k8s.io", "Ingress"): {"metadata": meta(), "spec": {
        "ingressClassName": "nginx", "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
        "tls": [{"hosts": ["*.example.com"], "secretName": "tls"}],
        "rules": [{"host": "www.example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"name": "http"}}}},
            {"path": "/static", "pathType": "Exact", "backend": {"resource": {
                "apiGroup": "storage.example.com", "kind": "Bucket", "name": "assets"}}}]}}]}},
    ("networking.k8s.io", "IngressClass"): {"metadata": {"name": "nginx"}, "spec": {
        "controller": "example.com/ingress-nginx",
        "parameters": {"apiGroup": "example.com", "kind": "Params", "name": "p", "scope": "Namespace",
                       "namespace": "default"}}},
    ("networking.k8s.io", "NetworkPolicy"): {"metadata": meta(), "spec": {
        "podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}},
                              {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": "api"}}}],
                     "ports": [{"port": 80}, {"port": 8000, "endPort": 9000, "protocol": "TCP"}, {"port": "http"}]}],
        "egress": [{"to": [{"podSelector": {}}]}]}},
    ("policy", "PodDisruptionBudget"): {"metadata": meta(), "spec": {
        "minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}},
        "unhealthyPodEvictionPolicy": "AlwaysAllow"}},
    ("storage.k8s.io", "StorageClass"): {"metadata": {"name": "fast"}, "provisioner": "ebs.csi.aws.com",
                                         "parameters": {"type": "gp3"}, "reclaimPolicy": "Retain",
                                         "volumeBindingMode": "WaitForFirstConsumer", "allowedTopologies": [
                                             {"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]},
    ("storage.k8s.io", "CSIDriver"): {"metadata": {"name": "ebs.csi.aws.com"}, "spec": {
        "attachRequired": True, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"],
        "tokenRequests": [{"audience": "sts", "expirationSeconds": 3600}]}},
    ("scheduling.k8s.io", "PriorityClass"): {"metadata": {"name": "high"}, "value": 1000, "globalDefault": False,
                                             "preemptionPolicy": "Never"},
    ("discovery.k8s.io", "EndpointSlice"): {"metadata": meta("web-abc"), "addressType": "IPv4", "endpoints": [
        {"addresses": ["10.1.0.5"], "nodeName": "node-1", "hostname": "web-0", "hints": {"forZones": [
            {"name": "a"}]}}], "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    ("autoscaling", "HorizontalPodAutoscaler"): {"metadata": meta(), "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "minReplicas": 2, "maxReplicas": 10, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                        "averageUtilization": 70}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue",
                                                                         "averageValue": "100"}}}],
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 120, "policies": [
            {"type": "Percent", "value": 10, "periodSeconds": 60}]}}}},
    ("storage.k8s.io", "CSINode"): {"metadata": {"name": "node-1"}, "spec": {"drivers": [
        {"name": "ebs.csi.aws.com", "nodeID": "i-1", "topologyKeys": ["topology.ebs.csi.aws.com/zone"],
         "allocatable": {"count": 25}}]}},
    ("storage.k8s.io", "CSIStorageCapacity"): {"metadata": meta("fast-a"), "storageClassName": "fast",
                                               "nodeTopology": {"matchLabels": {"zone": "a"}}, "capacity": "100Gi",
                                               "maximumVolumeSize": "16Ti"},
    ("storage.k8s.io", "VolumeAttachment"): {"metadata": {"name": "csi-123"}, "spec": {
        "attacher": "ebs.csi.aws.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv"}}},
    ("node.k8s.io", "RuntimeClass"): {"metadata": {"name": "gvisor"}, "handler": "runsc",
                                      "overhead": {"podFixed": {"cpu": "100m", "memory": "64Mi"}},
                                      "scheduling": {"nodeSelector": {"sandbox": "gvisor"}, "tolerations": [
                                          {"key": "sandbox", "operator": "Equal", "value": "gvisor",
                                           "effect": "NoSchedule"}]}},
    ("coordination.k8s.io", "Lease"): {"metadata": meta("leader"), "spec": {
        "holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 2}},
}


def sample(group: str, kind: str) -> dict:
    return copy.deepcopy(SAMPLES[(group, kind)])
