"""apps/v1 and batch/v1 with real clients: kubectl 1.32 (apply, get, scale, rollout restart,
get all) and the official ``kubernetes`` Python client's typed APIs, on the shared server process."""
from __future__ import annotations

import json
import uuid

from twisted.trial import unittest

from kapiserver.testing.process import E2E_CONFIG, shared_server

MANIFEST = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports:
        - containerPort: 80
          name: http
        resources:
          requests: {cpu: 100m, memory: 64Mi}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: postgres
        image: postgres:16
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests: {storage: 1Gi}
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: backup
spec:
  schedule: "0 3 * * *"
  timeZone: Europe/Berlin
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers:
          - name: backup
            image: busybox
            command: [sh, -c, "echo backup"]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  backoffLimit: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: busybox
"""


class AppsBatchKubectlTests(unittest.TestCase):
    def setUp(self):
        self.server = shared_server(extra_config=E2E_CONFIG)
        self.ns = "ab-" + uuid.uuid4().hex[:8]
        self.server.kubectl("create", "ns", self.ns)
        self.addCleanup(lambda: self.server.kubectl("delete", "ns", self.ns, "--wait=false", check=False))

    def kubectl(self, *args: str, **kw):
        return self.server.kubectl("-n", self.ns, *args, **kw)

    def table(self, *args: str) -> list[list[str]]:
        return [line.split() for line in self.kubectl("get", *args).stdout.splitlines()]

    def test_apply_get_scale_restart(self):
        out = self.kubectl("apply", "-f", "-", input=MANIFEST).stdout
        for line in ("deployment.apps/web created", "statefulset.apps/db created", "cronjob.batch/backup created",
                     "job.batch/migrate created"):
            self.assertIn(line, out)
        self.assertIn("deployment.apps/web unchanged", self.kubectl("apply", "-f", "-", input=MANIFEST).stdout)
        rows = self.table("deploy")
        self.assertEqual(rows[0], ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"])
        self.assertEqual(rows[1][:4], ["web", "0/2", "0", "0"])
        wide = self.table("deploy", "-o", "wide")
        self.assertEqual(wide[0][5:], ["CONTAINERS", "IMAGES", "SELECTOR"])
        self.assertEqual(wide[1][5:], ["nginx", "nginx:1.27", "app=web"])
        self.assertEqual(self.table("sts")[1][:2], ["db", "0/1"])
        self.assertEqual(self.table("cj")[0], ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST",
                                              "SCHEDULE", "AGE"])
        self.assertEqual(self.table("cj")[1][:6], ["backup", "0", "3", "*", "*", "*"])
        self.assertEqual(self.table("jobs")[0], ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"])
        self.assertEqual(self.table("jobs")[1][:3], ["migrate", "Running", "0/1"])
        kinds = {row[0].split("/")[0] for row in self.table("all", "-o", "name") if row}
        self.assertEqual(kinds, {"deployment.apps", "statefulset.apps", "cronjob.batch", "job.batch"})

        self.assertIn("scaled", self.kubectl("scale", "deployment", "web", "--replicas=3").stdout)
        got = json.loads(self.kubectl("get", "deploy", "web", "-o", "json").stdout)
        self.assertEqual((got["spec"]["replicas"], got["metadata"]["generation"]), (3, 2))
        self.assertEqual(got["spec"]["strategy"]["rollingUpdate"], {"maxSurge": "25%", "maxUnavailable": "25%"})
        self.assertIn("restarted", self.kubectl("rollout", "restart", "deployment/web").stdout)
        got = json.loads(self.kubectl("get", "deploy", "web", "-o", "json").stdout)
        self.assertIn("kubectl.kubernetes.io/restartedAt", got["spec"]["template"]["metadata"]["annotations"])
        self.assertEqual(got["spec"]["template"]["spec"]["containers"][0]["ports"][0]["name"], "http")

        bad = self.kubectl("patch", "deploy", "web", "-p", '{"spec":{"selector":{"matchLabels":{"app":"x"}}}}',
                           check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn('The Deployment "web" is invalid', bad.stderr)
        self.assertIn("field is immutable", bad.stderr)
        self.assertIn("deleted", self.kubectl("delete", "deploy", "web").stdout)


class AppsBatchPythonClientTests(unittest.TestCase):
    def setUp(self):
        from kubernetes import client
        self.server = shared_server(extra_config=E2E_CONFIG)
        api = self.server.python_client()
        self.client = client
        self.core, self.apps, self.batch = client.CoreV1Api(api), client.AppsV1Api(api), client.BatchV1Api(api)
        self.ns = "abpy-" + uuid.uuid4().hex[:8]
        self.core.create_namespace({"metadata": {"name": self.ns}})
        self.addCleanup(lambda: self.core.delete_namespace(self.ns))

    def pod_template(self, restart: str = "Always"):
        c = self.client
        return c.V1PodTemplateSpec(metadata=c.V1ObjectMeta(labels={"app": "api"}),
                                   spec=c.V1PodSpec(restart_policy=restart,
                                                    containers=[c.V1Container(name="api", image="api:1")]))

    def test_typed_deployment_and_job(self):
        from kubernetes.client.rest import ApiException
        c = self.client
        dep = c.V1Deployment(metadata=c.V1ObjectMeta(name="api"),
                             spec=c.V1DeploymentSpec(selector=c.V1LabelSelector(match_labels={"app": "api"}),
                                                     template=self.pod_template()))
        created = self.apps.create_namespaced_deployment(self.ns, dep)
        self.assertEqual(created.spec.replicas, 1)
        self.assertEqual(created.spec.strategy.type, "RollingUpdate")
        read = self.apps.read_namespaced_deployment("api", self.ns)
        self.assertEqual(read.spec.template.spec.containers[0].image, "api:1")
        patched = self.apps.patch_namespaced_deployment("api", self.ns, {"spec": {"replicas": 4}})
        self.assertEqual((patched.spec.replicas, patched.metadata.generation), (4, 2))
        scale = self.apps.read_namespaced_deployment_scale("api", self.ns)
        self.assertEqual((scale.spec.replicas, scale.status.selector), (4, "app=api"))
        self.apps.delete_namespaced_deployment("api", self.ns)
        with self.assertRaises(ApiException) as ctx:
            self.apps.read_namespaced_deployment("api", self.ns)
        self.assertEqual(ctx.exception.status, 404)

        job = c.V1Job(metadata=c.V1ObjectMeta(name="once"),
                      spec=c.V1JobSpec(template=c.V1PodTemplateSpec(spec=self.pod_template("Never").spec)))
        created = self.batch.create_namespaced_job(self.ns, job)
        self.assertEqual(created.spec.template.metadata.labels["batch.kubernetes.io/job-name"], "once")
        self.assertEqual(created.spec.backoff_limit, 6)
        with self.assertRaises(ApiException) as ctx:
            self.batch.create_namespaced_job(self.ns, c.V1Job(
                metadata=c.V1ObjectMeta(name="bad"), spec=c.V1JobSpec(template=self.pod_template())))
        self.assertEqual(ctx.exception.status, 422)
        self.assertIn('spec.template.spec.restartPolicy: Required value: valid values: \\"OnFailure\\", \\"Never\\"',
                      ctx.exception.body)
        self.batch.delete_namespaced_job("once", self.ns, propagation_policy="Background")
