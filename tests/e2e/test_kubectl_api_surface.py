"""kubectl 1.32 against a real kapiserver process: the resources kube-apiserver 1.32
serves that kapiserver added (api-resources, debug, drain with eviction and
PodDisruptionBudgets, componentstatuses, bindings, RuntimeClasses, CSI kinds,
TokenReviews) and the kubelet subresources answering, without a node, what upstream answers."""
from __future__ import annotations

import json
import os
import tempfile
import textwrap

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

# `kubectl api-resources` against kube-apiserver v1.32.13 (NAME, APIVERSION, NAMESPACED, KIND), without the
# groups other work adds (admissionregistration, apiregistration, flowcontrol, certificates).
UPSTREAM_API_RESOURCES = """
bindings v1 true Binding
componentstatuses v1 false ComponentStatus
configmaps v1 true ConfigMap
endpoints v1 true Endpoints
events v1 true Event
limitranges v1 true LimitRange
namespaces v1 false Namespace
nodes v1 false Node
persistentvolumeclaims v1 true PersistentVolumeClaim
persistentvolumes v1 false PersistentVolume
pods v1 true Pod
podtemplates v1 true PodTemplate
replicationcontrollers v1 true ReplicationController
resourcequotas v1 true ResourceQuota
secrets v1 true Secret
serviceaccounts v1 true ServiceAccount
services v1 true Service
customresourcedefinitions apiextensions.k8s.io/v1 false CustomResourceDefinition
controllerrevisions apps/v1 true ControllerRevision
daemonsets apps/v1 true DaemonSet
deployments apps/v1 true Deployment
replicasets apps/v1 true ReplicaSet
statefulsets apps/v1 true StatefulSet
selfsubjectreviews authentication.k8s.io/v1 false SelfSubjectReview
tokenreviews authentication.k8s.io/v1 false TokenReview
localsubjectaccessreviews authorization.k8s.io/v1 true LocalSubjectAccessReview
selfsubjectaccessreviews authorization.k8s.io/v1 false SelfSubjectAccessReview
selfsubjectrulesreviews authorization.k8s.io/v1 false SelfSubjectRulesReview
subjectaccessreviews authorization.k8s.io/v1 false SubjectAccessReview
horizontalpodautoscalers autoscaling/v2 true HorizontalPodAutoscaler
cronjobs batch/v1 true CronJob
jobs batch/v1 true Job
leases coordination.k8s.io/v1 true Lease
endpointslices discovery.k8s.io/v1 true EndpointSlice
events events.k8s.io/v1 true Event
ingressclasses networking.k8s.io/v1 false IngressClass
ingresses networking.k8s.io/v1 true Ingress
networkpolicies networking.k8s.io/v1 true NetworkPolicy
runtimeclasses node.k8s.io/v1 false RuntimeClass
poddisruptionbudgets policy/v1 true PodDisruptionBudget
clusterrolebindings rbac.authorization.k8s.io/v1 false ClusterRoleBinding
clusterroles rbac.authorization.k8s.io/v1 false ClusterRole
rolebindings rbac.authorization.k8s.io/v1 true RoleBinding
roles rbac.authorization.k8s.io/v1 true Role
priorityclasses scheduling.k8s.io/v1 false PriorityClass
csidrivers storage.k8s.io/v1 false CSIDriver
csinodes storage.k8s.io/v1 false CSINode
csistoragecapacities storage.k8s.io/v1 true CSIStorageCapacity
storageclasses storage.k8s.io/v1 false StorageClass
volumeattachments storage.k8s.io/v1 false VolumeAttachment
"""
OTHER_WORK = {"admissionregistration.k8s.io", "apiregistration.k8s.io", "flowcontrol.apiserver.k8s.io",
              "certificates.k8s.io"}


class APISurfaceKubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.kubectl = self.server.kubectl
        self.ns = f"as-{self._testMethodName.replace('_', '-')[5:30].strip('-')}"
        self.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def write(self, text: str) -> str:
        fd, path = tempfile.mkstemp(suffix=".yaml", dir=self.server.workdir)
        with os.fdopen(fd, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def k(self, *args: str, **kw):
        return self.kubectl("-n", self.ns, *args, **kw)

    def test_api_resources_lists_what_kube_apiserver_lists(self):
        out = self.kubectl("api-resources", "--no-headers", "-o", "wide").stdout
        served = set()
        for line in out.splitlines():
            cols = line.split()
            # NAME [SHORTNAMES] APIVERSION NAMESPACED KIND VERBS [CATEGORIES]
            idx = next(i for i, c in enumerate(cols) if c in ("true", "false"))
            served.add(f"{cols[0]} {cols[idx - 1]} {cols[idx]} {cols[idx + 1]}")
        # custom resources other tests of the shared server define are not kube-apiserver's
        crd_groups = set(self.kubectl("get", "crd", "-o", "jsonpath={.items[*].spec.group}").stdout.split())
        served = {s for s in served if s.split()[1].split("/")[0] not in OTHER_WORK | crd_groups}
        self.assertEqual(served, set(UPSTREAM_API_RESOURCES.split("\n")) - {""})

    def test_debug_adds_an_ephemeral_container(self):
        self.k("run", "web", "--image=nginx")
        out = self.k("debug", "web", "--image=busybox", "--container=dbg", "--profile=general").stdout
        self.assertIn("dbg", out + self.k("get", "pod", "web", "-o", "jsonpath={.spec.ephemeralContainers[*].name}")
                      .stdout)
        containers = json.loads(self.k("get", "pod", "web", "-o", "json").stdout)["spec"]["ephemeralContainers"]
        self.assertEqual([(c["name"], c["image"]) for c in containers], [("dbg", "busybox")])
        again = self.k("debug", "web", "--image=busybox", "--container=dbg", "--profile=general", check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("may not be changed", again.stderr)

    def test_drain_blocked_by_a_budget_then_allowed_without(self):
        node = f"node-{self.ns}"
        self.kubectl("apply", "-f", self.write(f"""
            apiVersion: v1
            kind: Node
            metadata: {{name: {node}}}
            """))
        self.addCleanup(lambda: self.kubectl("delete", "node", node, check=False))
        self.k("apply", "-f", self.write(f"""
            apiVersion: v1
            kind: Pod
            metadata: {{name: web, labels: {{app: web}}}}
            spec:
              nodeName: {node}
              containers: [{{name: c, image: nginx}}]
            """))
        self.k("patch", "pod", "web", "--subresource=status", "--type=merge", "-p",
               '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}')
        self.k("create", "pdb", "web", "--selector=app=web", "--min-available=1")
        # no disruption controller runs: the budget's status is written as the controller would
        self.k("patch", "pdb", "web", "--subresource=status", "--type=merge", "-p",
               '{"status":{"observedGeneration":1,"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,'
               '"expectedPods":1}}')
        blocked = self.kubectl("drain", node, "--force", "--timeout=3s", check=False)
        self.assertNotEqual(blocked.returncode, 0)
        self.assertIn("Cannot evict pod as it would violate the pod's disruption budget.", blocked.stderr)
        self.assertIn("web", self.k("get", "pods", "-o", "name").stdout)
        self.assertIn("SchedulingDisabled", self.kubectl("get", "node", node).stdout)
        self.k("delete", "pdb", "web")
        # no kubelet runs here to end the evicted pod's graceful deletion: evict with none
        drained = self.kubectl("drain", node, "--force", "--grace-period=0", "--timeout=20s")
        self.assertIn(f'evicting pod {self.ns}/web', drained.stderr + drained.stdout)
        self.assertIn(f"node/{node} drained", drained.stdout)
        self.assertEqual(self.k("get", "pods", "-o", "name").stdout.strip(), "")

    def test_get_componentstatuses(self):
        result = self.kubectl("get", "componentstatuses")
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "STATUS", "MESSAGE", "ERROR"])
        self.assertEqual(lines[1].split(), ["sqlite-0", "Healthy", "ok"])
        self.assertIn("v1 ComponentStatus is deprecated in v1.19+", result.stderr)
        self.assertEqual(self.kubectl("get", "cs", "sqlite-0", "-o", "jsonpath={.conditions[0].status}").stdout, "True")

    def test_new_kinds_created_and_listed(self):
        manifest = self.write(f"""
            apiVersion: node.k8s.io/v1
            kind: RuntimeClass
            metadata: {{name: gvisor-{self.ns}}}
            handler: runsc
            overhead: {{podFixed: {{memory: 120Mi, cpu: 250m}}}}
            ---
            apiVersion: storage.k8s.io/v1
            kind: CSINode
            metadata: {{name: csinode-{self.ns}}}
            spec:
              drivers:
              - {{name: ebs.csi.aws.com, nodeID: i-0123, topologyKeys: [topology.ebs.csi.aws.com/zone]}}
            ---
            apiVersion: storage.k8s.io/v1
            kind: CSIStorageCapacity
            metadata: {{name: fast-zone-a, namespace: {self.ns}}}
            storageClassName: fast
            capacity: 100Gi
            nodeTopology: {{matchLabels: {{topology.kubernetes.io/zone: a}}}}
            ---
            apiVersion: storage.k8s.io/v1
            kind: VolumeAttachment
            metadata: {{name: va-{self.ns}}}
            spec:
              attacher: ebs.csi.aws.com
              nodeName: node-1
              source: {{persistentVolumeName: pv-1}}
            """)
        out = self.kubectl("apply", "-f", manifest).stdout
        for created in (f"runtimeclass.node.k8s.io/gvisor-{self.ns} created",
                        f"csinode.storage.k8s.io/csinode-{self.ns} created",
                        "csistoragecapacity.storage.k8s.io/fast-zone-a created",
                        f"volumeattachment.storage.k8s.io/va-{self.ns} created"):
            self.assertIn(created, out)
        self.addCleanup(lambda: self.kubectl("delete", "-f", manifest, "--wait=false", check=False))
        self.assertIn("unchanged", self.kubectl("apply", "-f", manifest).stdout)

        def row(*args: str) -> tuple[list[str], list[str]]:
            lines = self.kubectl(*args).stdout.splitlines()
            return lines[0].split(), next(line.split() for line in lines[1:] if self.ns in line)
        header, cells = row("get", "runtimeclasses")
        self.assertEqual((header, cells[:2]), (["NAME", "HANDLER", "AGE"], [f"gvisor-{self.ns}", "runsc"]))
        header, cells = row("get", "csinodes")
        self.assertEqual((header, cells[:2]), (["NAME", "DRIVERS", "AGE"], [f"csinode-{self.ns}", "1"]))
        lines = self.k("get", "csistoragecapacities").stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "STORAGECLASSNAME", "CAPACITY"])
        self.assertEqual(lines[1].split(), ["fast-zone-a", "fast", "100Gi"])
        header, cells = row("get", "volumeattachments")
        self.assertEqual(header, ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"])
        self.assertEqual(cells[:5], [f"va-{self.ns}", "ebs.csi.aws.com", "pv-1", "node-1", "false"])
        self.kubectl("patch", "volumeattachment", f"va-{self.ns}", "--subresource=status", "--type=merge",
                     "-p", '{"status":{"attached":true}}')
        self.assertEqual(row("get", "volumeattachments")[1][4], "true")
        self.assertIn("handler", self.kubectl("explain", "runtimeclass").stdout)

    def test_binding_and_token_review_with_create_f(self):
        self.k("run", "web", "--image=nginx")
        binding = self.write(f"""
            apiVersion: v1
            kind: Binding
            metadata: {{name: web, namespace: {self.ns}}}
            target: {{apiVersion: v1, kind: Node, name: node-1}}
            """)
        self.kubectl("create", "-f", binding)
        self.assertEqual(self.k("get", "pod", "web", "-o", "jsonpath={.spec.nodeName}").stdout, "node-1")
        again = self.kubectl("create", "-f", binding, check=False)
        self.assertIn('pod web is already assigned to node "node-1"', again.stderr)
        review = self.write("""
            apiVersion: authentication.k8s.io/v1
            kind: TokenReview
            spec: {token: not-a-token}
            """)
        out = json.loads(self.kubectl("create", "-f", review, "-o", "json").stdout)
        self.assertEqual(out["status"], {"user": {}, "error": "invalid bearer token"})

    def test_kubelet_subresources_need_a_node(self):
        self.k("run", "web", "--image=nginx")
        self.assertEqual(self.k("logs", "web").stdout, "")  # no node runs it: no log yet, as upstream
        unscheduled = self.k("exec", "web", "--", "ls", check=False)
        self.assertIn("pod web does not have a host assigned", unscheduled.stderr)
        self.k("run", "bound", "--image=nginx", "--overrides", '{"spec":{"nodeName":"node-1"}}')
        for args in (("logs", "bound"), ("exec", "bound", "--", "ls")):  # upstream's answers (tests/node: a node)
            result = self.k(*args, check=False)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn('Error from server (NotFound): nodes "node-1" not found', result.stderr)
