"""RBAC, networking, policy, storage, scheduling, discovery and autoscaling kinds
on a real kapiserver process: ``kubectl apply -f -`` of a realistic manifest,
``kubectl get`` columns, and the official Python client's typed APIs."""
from __future__ import annotations

import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

MANIFEST = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: app-reader}
rules:
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-reader}
subjects:
- {kind: ServiceAccount, name: app, namespace: NS}
- {kind: User, name: alice}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: nginx
  tls: [{hosts: [web.example.com], secretName: web-tls}]
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{ports: [{port: 8080}]}]
  egress: [{}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 25%
  selector: {matchLabels: {app: web}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-x1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.1.0.5]}]
ports: [{name: http, port: 8080}]
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 10
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
"""


class MiscKindsKubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = "misc-" + uuid.uuid4().hex[:8]
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def rows(self, *args: str) -> list[list[str]]:
        out = self.kubectl("get", *args, "-n", self.ns).stdout
        return [line.split() for line in out.splitlines()]

    def test_apply_manifest_and_get_columns(self):
        out = self.kubectl("apply", "-n", self.ns, "-f", "-", input=MANIFEST.replace("NS", self.ns)).stdout
        self.assertIn("horizontalpodautoscaler.autoscaling/web created", out)
        self.assertIn("rolebinding.rbac.authorization.k8s.io/app-reader created", out)
        rb = self.rows("rolebinding", "-o", "wide")
        self.assertEqual(rb[0], ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"])
        self.assertEqual([rb[1][0], rb[1][1], rb[1][3], rb[1][4]], ["app-reader", "Role/app-reader", "alice",
                                                                    f"{self.ns}/app"])
        self.assertEqual(self.rows("roles")[0], ["NAME", "CREATED", "AT"])
        ing = self.rows("ing")
        self.assertEqual(ing[0], ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"])
        self.assertEqual(ing[1][:3] + ing[1][3:5], ["web", "nginx", "web.example.com", "80,", "443"])
        self.assertEqual(self.rows("netpol")[1][:2], ["web", "app=web"])
        pdb = self.rows("pdb")
        self.assertEqual(pdb[0], ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"])
        self.assertEqual(pdb[1][:4], ["web", "N/A", "25%", "0"])
        self.assertEqual(self.rows("endpointslices")[1][:4], ["web-x1", "IPv4", "8080", "10.1.0.5"])
        hpa = self.rows("hpa")
        self.assertEqual(hpa[0], ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"])
        self.assertEqual(hpa[1][:7], ["web", "Deployment/web", "cpu:", "<unknown>/70%", "2", "10", "0"])
        self.assertIn("horizontalpodautoscaler.autoscaling/web",
                      self.kubectl("get", "all", "-n", self.ns, "-o", "name").stdout.split())
        # a second apply is a no-op, and an edit of roleRef is refused with upstream's message
        again = self.kubectl("apply", "-n", self.ns, "-f", "-", input=MANIFEST.replace("NS", self.ns)).stdout
        self.assertIn("horizontalpodautoscaler.autoscaling/web unchanged", again)
        bad = self.kubectl("patch", "rolebinding", "app-reader", "-n", self.ns, "--type=merge",
                           "-p", '{"roleRef":{"name":"other"}}', check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("cannot change roleRef", bad.stderr)

    def test_cluster_scoped_kinds_with_kubectl(self):
        name = self.ns
        manifest = f"""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: {name}-sc}}
provisioner: example.com/csi
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: {name}-pc}}
value: 1000
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {{name: {name}-ic}}
spec: {{controller: example.com/ingress}}
"""
        self.kubectl("apply", "-f", "-", input=manifest)
        self.addCleanup(lambda: self.kubectl("delete", "sc", f"{name}-sc", check=False))
        self.addCleanup(lambda: self.kubectl("delete", "pc", f"{name}-pc", check=False))
        self.addCleanup(lambda: self.kubectl("delete", "ingressclass", f"{name}-ic", check=False))
        sc = self.kubectl("get", "sc", f"{name}-sc").stdout.splitlines()
        self.assertEqual(sc[0].split(), ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE",
                                         "ALLOWVOLUMEEXPANSION", "AGE"])
        self.assertEqual(sc[1].split()[:5], [f"{name}-sc", "example.com/csi", "Delete", "Immediate", "false"])
        pc = self.kubectl("get", "pc", f"{name}-pc").stdout.splitlines()
        self.assertEqual(pc[1].split()[:3] + pc[1].split()[4:], [f"{name}-pc", "1000", "false",
                                                                 "PreemptLowerPriority"])
        bad = self.kubectl("patch", "pc", f"{name}-pc", "--type=merge", "-p", '{"value":5}', check=False)
        self.assertIn("value: Forbidden: may not be changed in an update.", bad.stderr)
        self.assertEqual(self.kubectl("get", "ingressclass", f"{name}-ic", "-o",
                                      "jsonpath={.spec.controller}").stdout, "example.com/ingress")


class MiscKindsPythonClientTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.api = self.server.python_client()
        self.client = client
        self.ns = "pymisc-" + uuid.uuid4().hex[:8]
        self.core = client.CoreV1Api(self.api)
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def test_typed_apis(self):
        c = self.client
        rbac = c.RbacAuthorizationV1Api(self.api)
        role = rbac.create_namespaced_role(self.ns, c.V1Role(metadata=c.V1ObjectMeta(name="r"), rules=[
            c.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get"])]))
        self.assertEqual(role.rules[0].verbs, ["get"])
        rb = rbac.create_namespaced_role_binding(self.ns, c.V1RoleBinding(
            metadata=c.V1ObjectMeta(name="rb"), role_ref=c.V1RoleRef(api_group="rbac.authorization.k8s.io",
                                                                     kind="Role", name="r"),
            subjects=[c.RbacV1Subject(kind="Group", name="devs", api_group="rbac.authorization.k8s.io")]))
        self.assertEqual(rb.role_ref.name, "r")
        patched = rbac.patch_namespaced_role_binding("rb", self.ns, {"subjects": [{"kind": "User", "name": "bob",
                                                                                   "apiGroup": "rbac.authorization.k8s.io"}]})
        self.assertEqual([s.name for s in patched.subjects], ["bob"])

        net = c.NetworkingV1Api(self.api)
        ing = net.create_namespaced_ingress(self.ns, c.V1Ingress(metadata=c.V1ObjectMeta(name="i"), spec=c.V1IngressSpec(
            default_backend=c.V1IngressBackend(service=c.V1IngressServiceBackend(
                name="web", port=c.V1ServiceBackendPort(number=80))))))
        self.assertEqual(ing.spec.default_backend.service.port.number, 80)
        netpol = net.create_namespaced_network_policy(self.ns, c.V1NetworkPolicy(
            metadata=c.V1ObjectMeta(name="np"), spec=c.V1NetworkPolicySpec(pod_selector=c.V1LabelSelector())))
        self.assertEqual(netpol.spec.policy_types, ["Ingress"])

        pdb = c.PolicyV1Api(self.api).create_namespaced_pod_disruption_budget(self.ns, c.V1PodDisruptionBudget(
            metadata=c.V1ObjectMeta(name="p"), spec=c.V1PodDisruptionBudgetSpec(min_available=1)))
        self.assertEqual(pdb.spec.min_available, 1)

        hpa_api = c.AutoscalingV2Api(self.api)
        hpa = hpa_api.create_namespaced_horizontal_pod_autoscaler(self.ns, c.V2HorizontalPodAutoscaler(
            metadata=c.V1ObjectMeta(name="h"), spec=c.V2HorizontalPodAutoscalerSpec(
                scale_target_ref=c.V2CrossVersionObjectReference(kind="Deployment", name="web"), max_replicas=3)))
        self.assertEqual((hpa.spec.min_replicas, hpa.spec.metrics[0].resource.target.average_utilization), (1, 80))
        hpa_api.patch_namespaced_horizontal_pod_autoscaler("h", self.ns, {"spec": {"maxReplicas": 4}})
        got = hpa_api.read_namespaced_horizontal_pod_autoscaler("h", self.ns)
        self.assertEqual((got.spec.max_replicas, got.metadata.generation), (4, None))  # upstream keeps none

        eps = c.DiscoveryV1Api(self.api).create_namespaced_endpoint_slice(self.ns, c.V1EndpointSlice(
            metadata=c.V1ObjectMeta(name="e"), address_type="IPv4",
            endpoints=[c.V1Endpoint(addresses=["10.0.0.9"])]))
        self.assertEqual(eps.endpoints[0].addresses, ["10.0.0.9"])

        storage = c.StorageV1Api(self.api)
        sc = storage.create_storage_class(c.V1StorageClass(metadata=c.V1ObjectMeta(name=self.ns + "-sc"),
                                                           provisioner="example.com/csi"))
        # (the typed delete would parse upstream's Success Status as a StorageClass and fail)
        self.addCleanup(lambda: self.server.kubectl("delete", "sc", self.ns + "-sc", check=False))
        self.assertEqual((sc.reclaim_policy, sc.volume_binding_mode), ("Delete", "Immediate"))
        sched = c.SchedulingV1Api(self.api)
        pc = sched.create_priority_class(c.V1PriorityClass(metadata=c.V1ObjectMeta(name=self.ns + "-pc"), value=7))
        self.assertEqual(pc.preemption_policy, "PreemptLowerPriority")
        sched.delete_priority_class(self.ns + "-pc")
        from kubernetes.client.rest import ApiException
        with self.assertRaises(ApiException) as ctx:
            sched.read_priority_class(self.ns + "-pc")
        self.assertEqual(ctx.exception.status, 404)
        rbac.delete_namespaced_role("r", self.ns)
        self.assertEqual(rbac.list_namespaced_role(self.ns).items, [])
