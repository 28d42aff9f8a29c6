"""Networking, policy, storage, scheduling, discovery and autoscaling kinds over
HTTP on an in-process server: defaults, validation, immutable fields,
generation, status subresources, columns and the protobuf 415."""
from __future__ import annotations

from kapiserver.machinery import protobuf
from kapiserver.testing.cases import ServerTestCase, run

NET = "/apis/networking.k8s.io/v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def messages(reply) -> list[str]:
    return [f"{c.get('field', '')}: {c['message']}" for c in reply.body["details"]["causes"]]


def field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (payloads here are shorter than 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def ingress(name: str = "web", **spec) -> dict:
    return {"metadata": {"name": name}, "spec": spec or {"rules": [{"host": "example.com", "http": {"paths": [
        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}


class MiscKindsTests(ServerTestCase):
    async def make_ns(self, name: str = "apps") -> None:
        reply = await self.client.post("/api/v1/namespaces", {"metadata": {"name": name}})
        self.assertEqual(reply.code, 201, reply.body)

    async def table(self, path: str) -> tuple[list, list]:
        reply = await self.client.get(path, headers={"Accept": TABLE})
        self.assertEqual(reply.code, 200, reply.body)
        return [c["name"] for c in reply.body["columnDefinitions"]], [r["cells"] for r in reply.body["rows"]]

    @run
    async def test_ingress_paths_and_backends_are_validated(self):
        await self.make_ns()
        bad = await self.client.post(f"{NET}/namespaces/apps/ingresses", ingress(rules=[{"host": "1.2.3.4", "http": {
            "paths": [{"path": "/a", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                      {"path": "b", "pathType": "Exact", "backend": {"service": {"name": "web", "port": {}}}},
                      {"path": "/c", "pathType": "Regex", "backend": {}}]}}]))
        self.assertEqual(bad.code, 422)
        at = "spec.rules[0].http.paths"
        self.assertEqual(messages(bad), [
            'spec.rules[0].host: Invalid value: "1.2.3.4": must be a DNS name, not an IP address',
            f"{at}[0].pathType: Required value: pathType must be specified",
            f'{at}[1].path: Invalid value: "b": must be an absolute path',
            f"{at}[1].backend: Required value: port name or number is required",
            f'{at}[2].pathType: Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", '
            f'"Prefix"',
            f'{at}[2].backend: Invalid value: "": resource or service backend is required'])

    @run
    async def test_ingress_status_and_generation_and_columns(self):
        await self.make_ns()
        path = f"{NET}/namespaces/apps/ingresses"
        created = await self.client.post(path, dict(ingress(), status={"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}]}}))
        self.assertEqual(created.code, 201, created.body)
        self.assertEqual(created.body["status"], {"loadBalancer": {}})  # the client's status dropped, Go's zero kept
        self.assertEqual(created.body["metadata"]["generation"], 1)
        status = await self.client.patch(f"{path}/web/status", {"status": {"loadBalancer": {"ingress": [
            {"ip": "10.0.0.1"}]}}})
        self.assertEqual(status.code, 200, status.body)
        self.assertEqual(status.body["metadata"]["generation"], 1)
        spec = await self.client.patch(f"{path}/web", {"spec": {"ingressClassName": "nginx"}})
        self.assertEqual(spec.body["metadata"]["generation"], 2)
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "Class", "Hosts", "Address", "Ports", "Age"])
        self.assertEqual(rows[0][:5], ["web", "nginx", "example.com", "10.0.0.1", "80"])

    @run
    async def test_ingressclass_controller_is_immutable(self):
        path = f"{NET}/ingressclasses"
        created = await self.client.post(path, {"metadata": {"name": "nginx"}, "spec": {
            "controller": "k8s.io/ingress-nginx", "parameters": {"kind": "Cfg", "name": "p"}}})
        self.assertEqual(created.code, 201, created.body)
        self.assertEqual(created.body["spec"]["parameters"]["scope"], "Cluster")
        changed = await self.client.patch(f"{path}/nginx", {"spec": {"controller": "example.com/other"}})
        self.assertEqual(messages(changed), ['spec.controller: Invalid value: "example.com/other": field is immutable'])
        bad = await self.client.post(path, {"metadata": {"name": "x"}, "spec": {"controller": "nginx"}})
        self.assertEqual(messages(bad), ['spec.controller: Invalid value: "nginx": must be a domain-prefixed path '
                                         '(such as "acme.io/foo")'])

    @run
    async def test_networkpolicy_policy_types_default(self):
        await self.make_ns()
        path = f"{NET}/namespaces/apps/networkpolicies"
        only_in = await self.client.post(path, {"metadata": {"name": "a"}, "spec": {
            "podSelector": {"matchLabels": {"app": "web"}}, "ingress": [{"ports": [{"port": 80}]}]}})
        self.assertEqual(only_in.code, 201, only_in.body)
        self.assertEqual(only_in.body["spec"]["policyTypes"], ["Ingress"])
        self.assertEqual(only_in.body["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP")
        both = await self.client.post(path, {"metadata": {"name": "b"}, "spec": {"podSelector": {},
                                                                              "egress": [{}]}})
        self.assertEqual(both.body["spec"]["policyTypes"], ["Ingress", "Egress"])
        bad = await self.client.post(path, {"metadata": {"name": "c"}, "spec": {
            "podSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}, "policyTypes": ["Sideways"]}})
        self.assertEqual(messages(bad), [
            "spec.podSelector.matchExpressions[0].values: Required value: must be specified when `operator` is "
            "'In' or 'NotIn'",
            'spec.policyTypes[0]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"'])
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "Pod-Selector", "Age"])
        self.assertEqual([r[:2] for r in rows], [["a", "app=web"], ["b", "<none>"]])

    @run
    async def test_pdb_min_xor_max_and_columns(self):
        await self.make_ns()
        path = "/apis/policy/v1/namespaces/apps/poddisruptionbudgets"
        bad = await self.client.post(path, {"metadata": {"name": "x"}, "spec": {
            "minAvailable": "150%", "maxUnavailable": -1}})
        self.assertEqual(bad.code, 422)
        self.assertEqual(messages(bad)[1:], ['spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
                                             'StrVal:"150%"}: must not be greater than 100%',
                                             "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"])
        self.assertTrue(messages(bad)[0].endswith("minAvailable and maxUnavailable cannot be both set"))
        ok = await self.client.post(path, {"metadata": {"name": "web"}, "spec": {
            "minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        self.assertEqual(ok.code, 201, ok.body)
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"])
        self.assertEqual(rows[0][:4], ["web", "2", "N/A", 0])

    @run
    async def test_storageclass_defaults_and_frozen_fields(self):
        path = "/apis/storage.k8s.io/v1/storageclasses"
        created = await self.client.post(path, {"metadata": {"name": "fast", "annotations": {
            "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "ebs.csi.aws.com",
            "parameters": {"type": "gp3"}})
        self.assertEqual(created.code, 201, created.body)
        self.assertEqual((created.body["reclaimPolicy"], created.body["volumeBindingMode"]), ("Delete", "Immediate"))
        changed = await self.client.patch(f"{path}/fast", {"parameters": {"type": "io2"}, "reclaimPolicy": "Retain"})
        self.assertEqual(messages(changed), ["parameters: Forbidden: updates to parameters are forbidden.",
                                             "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden."])
        missing = await self.client.post(path, {"metadata": {"name": "none"}, "volumeBindingMode": "Later"})
        self.assertEqual(messages(missing), [
            "provisioner: Required value",
            'volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"'])
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion",
                                 "Age"])
        self.assertEqual(rows[0][:5], ["fast (default)", "ebs.csi.aws.com", "Delete", "Immediate", False])

    @run
    async def test_csidriver_defaults(self):
        created = await self.client.post("/apis/storage.k8s.io/v1/csidrivers", {
            "metadata": {"name": "ebs.csi.aws.com"}, "spec": {}})
        self.assertEqual(created.code, 201, created.body)
        spec = created.body["spec"]
        self.assertEqual((spec["attachRequired"], spec["podInfoOnMount"], spec["fsGroupPolicy"],
                          spec["volumeLifecycleModes"]), (True, False, "ReadWriteOnceWithFSType", ["Persistent"]))
        changed = await self.client.patch("/apis/storage.k8s.io/v1/csidrivers/ebs.csi.aws.com",
                                          {"spec": {"attachRequired": False}})
        self.assertEqual(messages(changed), ["spec.attachedRequired: Invalid value: false: field is immutable"])

    @run
    async def test_priorityclass_rules(self):
        path = "/apis/scheduling.k8s.io/v1/priorityclasses"
        created = await self.client.post(path, {"metadata": {"name": "high"}, "value": 1000})
        self.assertEqual(created.code, 201, created.body)
        self.assertEqual(created.body["preemptionPolicy"], "PreemptLowerPriority")
        changed = await self.client.patch(f"{path}/high", {"value": 5})
        self.assertEqual(messages(changed), ["value: Forbidden: may not be changed in an update."])
        reserved = await self.client.post(path, {"metadata": {"name": "system-mine"}, "value": 1})
        self.assertEqual(reserved.code, 422)
        self.assertIn("priority class names with 'system-' prefix are reserved for system use only",
                      messages(reserved)[0])
        too_high = await self.client.post(path, {"metadata": {"name": "huge"}, "value": 2000000000})
        self.assertEqual(messages(too_high), ["value: Forbidden: maximum allowed value of a user defined priority "
                                              "is 1000000000"])
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"])
        self.assertEqual(rows[0][:3] + rows[0][4:], ["high", 1000, False, "PreemptLowerPriority"])

    @run
    async def test_endpointslice_address_type(self):
        await self.make_ns()
        path = "/apis/discovery.k8s.io/v1/namespaces/apps/endpointslices"
        bad = await self.client.post(path, {"metadata": {"name": "x"}, "endpoints": [{"addresses": []}]})
        self.assertEqual(messages(bad), ['addressType: Required value',
                                         'endpoints[0].addresses: Required value: must contain at least 1 address'])
        created = await self.client.post(path, {"metadata": {"name": "web-abc"}, "addressType": "IPv4",
                                                "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}],
                                                "ports": [{"port": 8080}]})
        self.assertEqual(created.code, 201, created.body)
        self.assertEqual(created.body["ports"], [{"name": "", "port": 8080, "protocol": "TCP"}])
        changed = await self.client.patch(f"{path}/web-abc", {"addressType": "IPv6"})
        self.assertIn('addressType: Invalid value: "IPv6": field is immutable', messages(changed))
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "AddressType", "Ports", "Endpoints", "Age"])
        self.assertEqual(rows[0][:4], ["web-abc", "IPv4", "8080", "10.0.0.1,10.0.0.2"])

    @run
    async def test_hpa_defaults_validation_and_columns(self):
        await self.make_ns()
        path = "/apis/autoscaling/v2/namespaces/apps/horizontalpodautoscalers"
        created = await self.client.post(path, {"metadata": {"name": "web"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}})
        self.assertEqual(created.code, 201, created.body)
        spec = created.body["spec"]
        self.assertEqual(spec["minReplicas"], 1)
        self.assertEqual(spec["metrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
        self.assertEqual(spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60)
        self.assertEqual(spec["behavior"]["scaleUp"]["policies"][0], {"type": "Pods", "value": 4, "periodSeconds": 15})
        bad = await self.client.post(path, {"metadata": {"name": "bad"}, "spec": {
            "scaleTargetRef": {"name": "web"}, "minReplicas": 4, "maxReplicas": 2}})
        self.assertEqual(messages(bad), ["spec.maxReplicas: Invalid value: 2: must be greater than or equal to "
                                         "`minReplicas`", "spec.scaleTargetRef.kind: Required value"])
        names, rows = await self.table(path)
        self.assertEqual(names, ["Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"])
        self.assertEqual(rows[0][:6], ["web", "Deployment/web", "cpu: <unknown>/80%", 1, 5, 0])

    @run
    async def test_protobuf_body(self):
        await self.make_ns()
        # what a typed client sends: the "k8s\0" magic, then runtime.Unknown{typeMeta, raw}
        hpa = {"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2", "metadata": {"name": "pb"},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                        "maxReplicas": 4}}
        reply = await self.client.request("POST", "/apis/autoscaling/v2/namespaces/apps/horizontalpodautoscalers",
                                          raw=protobuf.encode_object(hpa),
                                          content_type="application/vnd.kubernetes.protobuf")
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual((reply.body["spec"]["minReplicas"], reply.body["spec"]["maxReplicas"]), (1, 4))

    @run
    async def test_all_category_and_short_names_in_discovery(self):
        reply = await self.client.get("/apis/autoscaling/v2")
        hpa = {r["name"]: r for r in reply.body["resources"]}["horizontalpodautoscalers"]
        self.assertEqual((hpa["shortNames"], hpa["categories"]), (["hpa"], ["all"]))
        net = await self.client.get(NET)
        short = {r["name"]: r.get("shortNames") for r in net.body["resources"]}
        self.assertEqual(short["ingresses"], ["ing"])
        self.assertEqual(short["networkpolicies"], ["netpol"])


class AutoscalingV1Tests(ServerTestCase):
    @run
    async def test_v1_is_a_view_of_the_v2_storage(self):
        await self.client.post("/api/v1/namespaces", {"metadata": {"name": "apps"}})
        v1 = "/apis/autoscaling/v1/namespaces/apps/horizontalpodautoscalers"
        v2 = "/apis/autoscaling/v2/namespaces/apps/horizontalpodautoscalers"
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
        created = await self.client.post(v1, {"metadata": {"name": "web"}, "spec": {
            "scaleTargetRef": ref, "maxReplicas": 5, "targetCPUUtilizationPercentage": 60}})
        self.assertEqual(created.code, 201, created.body)
        self.assertEqual(created.body["spec"], {"scaleTargetRef": ref, "maxReplicas": 5, "minReplicas": 1,
                                                "targetCPUUtilizationPercentage": 60})
        stored = await self.client.get(f"{v2}/web")
        self.assertEqual(stored.body["spec"]["metrics"], [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}])
        # written through v2, read through v1
        await self.client.post(v2, {"metadata": {"name": "plain"}, "spec": {"scaleTargetRef": ref,
                                                                            "maxReplicas": 2}})
        plain = await self.client.get(f"{v1}/plain")
        self.assertEqual(plain.body["spec"]["targetCPUUtilizationPercentage"], 80)
        bad = await self.client.post(v1, {"metadata": {"name": "bad"}, "spec": {
            "scaleTargetRef": ref, "maxReplicas": 5, "targetCPUUtilizationPercentage": 0}})
        self.assertEqual(bad.code, 422)
        # upstream validates the internal (v2) form: the v1 field is reported at the metric's path
        self.assertEqual([c["field"] for c in bad.body["details"]["causes"]],
                         ["spec.metrics[0].resource.target.averageUtilization"])
