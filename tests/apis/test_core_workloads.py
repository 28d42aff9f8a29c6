"""core/v1 workloads and friends through the in-process server: defaults,
validation, allocation, subresources, generation and kubectl's columns."""
from __future__ import annotations

import ipaddress

from kapiserver.machinery import protobuf
from kapiserver.testing.cases import ServerTestCase, run

NS = "/api/v1/namespaces/default"


def pod(name: str = "web", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}],
                                     "readinessProbe": {"httpGet": {"port": 80}}}], **spec}}


def service(name: str = "web", **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], **spec}}


def messages(reply) -> list[str]:
    return [f"{c.get('field')}: {c['message']}" for c in reply.body["details"]["causes"]]


class PodTests(ServerTestCase):
    @run
    async def test_create_fills_upstream_defaults_and_pending_status(self) -> None:
        r = await self.client.post(NS + "/pods", pod())
        self.assertEqual(r.code, 201, r.body)
        spec, c = r.body["spec"], r.body["spec"]["containers"][0]
        self.assertEqual((spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"],
                          spec["terminationGracePeriodSeconds"], spec["securityContext"],
                          spec["serviceAccountName"], spec["serviceAccount"], spec["enableServiceLinks"],
                          spec["priority"]),
                         ("Always", "ClusterFirst", "default-scheduler", 30, {}, "default", "default", True, 0))
        self.assertEqual((c["imagePullPolicy"], c["terminationMessagePath"], c["terminationMessagePolicy"],
                          c["ports"][0]["protocol"], c["resources"]),
                         ("IfNotPresent", "/dev/termination-log", "File", "TCP", {}))
        self.assertEqual(c["readinessProbe"], {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                                               "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                               "failureThreshold": 3})
        self.assertEqual(r.body["status"], {"phase": "Pending", "qosClass": "BestEffort"})
        self.assertEqual([t["key"] for t in spec["tolerations"]],
                         ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"])

    @run
    async def test_latest_image_is_always_pulled_and_limits_default_requests(self) -> None:
        p = pod()
        p["spec"]["containers"][0].update(image="busybox", resources={"limits": {"cpu": "1", "memory": "1Gi"}})
        r = await self.client.post(NS + "/pods", p)
        c = r.body["spec"]["containers"][0]
        self.assertEqual(c["imagePullPolicy"], "Always")
        self.assertEqual(c["resources"]["requests"], {"cpu": "1", "memory": "1Gi"})
        self.assertEqual(r.body["status"]["qosClass"], "Guaranteed")

    @run
    async def test_invalid_pods_get_upstream_field_errors(self) -> None:
        r = await self.client.post(NS + "/pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                                                  "spec": {"containers": []}})
        self.assertEqual(r.code, 422)
        self.assertEqual(messages(r), ["spec.containers: Required value"])
        bad = pod("bad", restartPolicy="Sometimes")
        bad["spec"]["containers"].append({"name": "app", "ports": [{"containerPort": 70000, "protocol": "ICMP"}],
                                          "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                                          "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}})
        r = await self.client.post(NS + "/pods", bad)
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["reason"], "Invalid")
        self.assertEqual(sorted(messages(r)), sorted([
            "spec.containers[1].name: Duplicate value: \"app\"",
            "spec.containers[1].image: Required value",
            "spec.containers[1].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            "spec.containers[1].ports[0].protocol: Unsupported value: \"ICMP\": supported values: "
            "\"SCTP\", \"TCP\", \"UDP\"",
            "spec.containers[1].resources.requests: Invalid value: \"2\": must be less than or equal to "
            "cpu limit of 1",
            "spec.containers[1].volumeMounts[0].name: Not found: \"data\"",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", "
            "\"Never\"",
        ]))
        self.assertIn("Pod \"bad\" is invalid", r.body["message"])

    @run
    async def test_spec_is_immutable_except_images_and_status_is_separate(self) -> None:
        created = (await self.client.post(NS + "/pods", pod())).body
        r = await self.client.patch(NS + "/pods/web", {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.28"}]}}, content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["spec"]["containers"][0]["image"], "nginx:1.28")
        self.assertNotIn("generation", r.body["metadata"])  # a 1.32 Pod has none
        r = await self.client.patch(NS + "/pods/web", {"spec": {"hostname": "other"}})
        self.assertEqual(r.code, 422)
        self.assertTrue(messages(r)[0].startswith(
            "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"))
        r = await self.client.patch(NS + "/pods/web/status", {"status": {"phase": "Running", "podIP": "10.1.2.3"}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["status"]["phase"], "Running")
        listed = await self.client.get("/api/v1/pods?fieldSelector=status.phase%3DRunning,spec.nodeName%3D")
        self.assertEqual([p["metadata"]["name"] for p in listed.body["items"]], ["web"])
        listed = await self.client.get("/api/v1/pods?fieldSelector=status.phase%3DPending")
        self.assertEqual(listed.body["items"], [])
        self.assertNotIn("generation", created["metadata"])

    @run
    async def test_table_columns_and_log_of_a_pod_no_node_runs(self) -> None:
        await self.client.post(NS + "/pods", pod())
        r = await self.client.get(NS + "/pods", headers={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual([(c["name"], c["priority"]) for c in r.body["columnDefinitions"]],
                         [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1),
                          ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)])
        self.assertEqual(r.body["rows"][0]["cells"][:4], ["web", "0/1", "Pending", "0"])
        self.assertEqual(r.body["rows"][0]["cells"][5:], ["<none>", "<none>", "<none>", "<none>"])
        r = await self.client.get(NS + "/pods/web/log")  # no node yet: no log, as upstream (204)
        self.assertEqual((r.code, r.raw), (204, b""))

    @run
    async def test_protobuf_pod_body(self) -> None:
        # what `kubectl run` sends: a protobuf Pod, defaulted like a JSON one
        body = protobuf.encode_object({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "pb"},
                                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        r = await self.client.post(NS + "/pods", raw=body, content_type="application/vnd.kubernetes.protobuf")
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["dnsPolicy"], r.body["spec"]["containers"][0]["imagePullPolicy"]),
                         ("ClusterFirst", "Always"))


class ServiceTests(ServerTestCase):
    @run
    async def test_defaults_and_cluster_ip_from_the_range(self) -> None:
        r = await self.client.post(NS + "/services", service())
        self.assertEqual(r.code, 201, r.body)
        spec = r.body["spec"]
        self.assertIn(ipaddress.ip_address(spec["clusterIP"]), ipaddress.ip_network("10.0.0.0/24"))
        self.assertEqual(spec["clusterIPs"], [spec["clusterIP"]])
        self.assertEqual((spec["type"], spec["sessionAffinity"], spec["ipFamilies"], spec["ipFamilyPolicy"],
                          spec["internalTrafficPolicy"], spec["ports"]),
                         ("ClusterIP", "None", ["IPv4"], "SingleStack", "Cluster",
                          [{"port": 80, "protocol": "TCP", "targetPort": 80}]))
        # a later update without the allocated fields keeps them; changing them is refused
        current = (await self.client.get(NS + "/services/web")).body
        current["spec"].pop("clusterIP")
        current["spec"].pop("clusterIPs")
        r = await self.client.put(NS + "/services/web", current)
        self.assertEqual((r.code, r.body["spec"]["clusterIP"]), (200, spec["clusterIP"]))
        r = await self.client.patch(NS + "/services/web", {"spec": {"clusterIP": "10.0.0.77",
                                                                    "clusterIPs": ["10.0.0.77"]}})
        self.assertEqual(r.code, 422)
        self.assertIn("spec.clusterIPs[0]: Invalid value: []string{\"10.0.0.77\"}: may not change once set",
                      messages(r))

    @run
    async def test_requested_ip_taken_or_out_of_range_is_invalid(self) -> None:
        r = await self.client.post(NS + "/services", service("a", clusterIP="10.0.0.10"))
        self.assertEqual((r.code, r.body["spec"]["clusterIP"]), (201, "10.0.0.10"))
        r = await self.client.post(NS + "/services", service("b", clusterIP="10.0.0.10"))
        self.assertEqual(r.code, 422)
        self.assertEqual(messages(r), ['spec.clusterIPs: Invalid value: []string{"10.0.0.10"}: failed to allocate '
                                       'IP 10.0.0.10: provided IP is already allocated'])
        r = await self.client.post(NS + "/services", service("c", clusterIP="192.168.0.1"))
        self.assertEqual(r.code, 422)
        self.assertIn("is not in the valid range. The range of valid IPs is 10.0.0.0/24", messages(r)[0])
        await self.client.delete(NS + "/services/a")
        r = await self.client.post(NS + "/services", service("b", clusterIP="10.0.0.10"))
        self.assertEqual(r.code, 201, r.body)
        r = await self.client.post(NS + "/services", service("headless", clusterIP="None"))
        self.assertEqual((r.body["spec"]["clusterIP"], r.body["spec"]["clusterIPs"]), ("None", ["None"]))

    @run
    async def test_node_ports_and_validation(self) -> None:
        r = await self.client.post(NS + "/services", service("np", type="NodePort",
                                                             ports=[{"name": "http", "port": 80, "targetPort": "http"},
                                                                    {"name": "tls", "port": 443, "nodePort": 30443}]))
        self.assertEqual(r.code, 201, r.body)
        ports = r.body["spec"]["ports"]
        self.assertTrue(30000 <= ports[0]["nodePort"] <= 32767)
        self.assertEqual((ports[1]["nodePort"], r.body["spec"]["externalTrafficPolicy"]), (30443, "Cluster"))
        r = await self.client.post(NS + "/services", service("np2", type="NodePort",
                                                             ports=[{"port": 80, "nodePort": 30443}]))
        self.assertEqual(messages(r), ["spec.ports[0].nodePort: Invalid value: 30443: provided port is already "
                                       "allocated"])
        r = await self.client.post(NS + "/services", service("bad", type="Fancy",
                                                             ports=[{"port": 0}, {"port": 81}]))
        self.assertEqual(sorted(messages(r)), sorted([
            "spec.type: Unsupported value: \"Fancy\": supported values: \"ClusterIP\", \"ExternalName\", "
            "\"LoadBalancer\", \"NodePort\"",
            "spec.ports[0].name: Required value", "spec.ports[1].name: Required value",
            "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, inclusive"]))
        r = await self.client.post(NS + "/services", {"apiVersion": "v1", "kind": "Service",
                                                      "metadata": {"name": "noports"}, "spec": {}})
        self.assertEqual(messages(r), ["spec.ports: Required value"])

    @run
    async def test_table(self) -> None:
        await self.client.post(NS + "/services", service("np", type="NodePort",
                                                         ports=[{"port": 80, "nodePort": 30080}]))
        await self.client.post(NS + "/services", service("ext", type="ExternalName", externalName="example.com",
                                                         ports=[]))
        r = await self.client.get(NS + "/services", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual([c["name"] for c in r.body["columnDefinitions"]],
                         ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"])
        rows = {row["cells"][0]: row["cells"] for row in r.body["rows"]}
        self.assertEqual(rows["np"][1], "NodePort")
        self.assertEqual((rows["np"][3], rows["np"][4], rows["np"][6]), ("<none>", "80:30080/TCP", "app=web"))
        self.assertEqual((rows["ext"][2], rows["ext"][3], rows["ext"][4]), ("<none>", "example.com", "<none>"))


class OtherKindsTests(ServerTestCase):
    @run
    async def test_replication_controller_defaults_validation_and_scale(self) -> None:
        rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "rc"},
              "spec": {"template": {"metadata": {"labels": {"app": "rc"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
        r = await self.client.post(NS + "/replicationcontrollers", rc)
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["replicas"], r.body["spec"]["selector"], r.body["metadata"]["labels"]),
                         (1, {"app": "rc"}, {"app": "rc"}))
        self.assertEqual(r.body["spec"]["template"]["spec"]["restartPolicy"], "Always")
        r = await self.client.put(NS + "/replicationcontrollers/rc/scale", {
            "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "rc"}, "spec": {"replicas": 3}})
        self.assertEqual((r.code, r.body["spec"]["replicas"]), (200, 3))
        got = (await self.client.get(NS + "/replicationcontrollers/rc")).body
        self.assertEqual((got["spec"]["replicas"], got["metadata"]["generation"]), (3, 2))
        bad = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "bad"},
               "spec": {"replicas": -1, "selector": {"app": "x"},
                        "template": {"metadata": {"labels": {"app": "y"}},
                                     "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}}
        r = await self.client.post(NS + "/replicationcontrollers", bad)
        self.assertEqual(sorted(messages(r)), sorted([
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"y\"}: `selector` does not "
            "match template `labels`",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]))

    @run
    async def test_claims_volumes_and_nodes(self) -> None:
        r = await self.client.post(NS + "/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": {}})
        self.assertEqual(sorted(messages(r)), ["spec.accessModes: Required value: at least 1 access mode is required",
                                               "spec.resources[storage]: Required value"])
        r = await self.client.post(NS + "/persistentvolumeclaims", {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        self.assertEqual((r.code, r.body["status"], r.body["spec"]["volumeMode"]),
                         (201, {"phase": "Pending"}, "Filesystem"))
        r = await self.client.post("/api/v1/persistentvolumes", {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
            "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/d"}}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual((r.body["spec"]["persistentVolumeReclaimPolicy"], r.body["status"]["phase"]),
                         ("Retain", "Pending"))
        r = await self.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                                     "metadata": {"name": "n1",
                                                                  "labels": {"node-role.kubernetes.io/worker": ""}}})
        self.assertEqual(r.code, 201, r.body)
        await self.client.patch("/api/v1/nodes/n1/status", {"status": {
            "conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}})
        r = await self.client.get("/api/v1/nodes", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        cells = r.body["rows"][0]["cells"]
        self.assertEqual((cells[0], cells[1], cells[2], cells[4]), ("n1", "Ready", "worker", "v1.33.0"))

    @run
    async def test_discovery_lists_the_kinds(self) -> None:
        r = await self.client.get("/api/v1")
        found = {res["name"]: res for res in r.body["resources"]}
        for name, short in [("pods", ["po"]), ("services", ["svc"]), ("endpoints", ["ep"]),
                            ("persistentvolumeclaims", ["pvc"]), ("persistentvolumes", ["pv"]), ("nodes", ["no"]),
                            ("replicationcontrollers", ["rc"]), ("resourcequotas", ["quota"]),
                            ("limitranges", ["limits"])]:
            self.assertEqual(found[name].get("shortNames"), short, name)
        self.assertIn("podtemplates", found)
        self.assertFalse(found["nodes"]["namespaced"])
        self.assertEqual(found["pods"]["categories"], ["all"])
        self.assertIn("replicationcontrollers/scale", found)
        self.assertIn("pods/status", found)
