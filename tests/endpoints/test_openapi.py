"""The built-in definitions and the /openapi/v2 and /openapi/v3 documents."""
from __future__ import annotations

import os

import orjson
from openapi_spec_validator import validate
from twisted.internet import defer, reactor, utils
from twisted.trial import unittest
from twisted.web import resource, server

from kapiserver.endpoints import discovery, openapi
from kapiserver.machinery import errors
from kapiserver.machinery.openapi_definitions import load_definitions
from kapiserver.registry.resource_type import ResourceType, ScaleSubresource, Strategy
from kapiserver.testing.cases import ServerTestCase, run

CONFIGMAP = "io.k8s.api.core.v1.ConfigMap"
LEASE = "io.k8s.api.coordination.v1.Lease"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

CRONTAB_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "cronSpec": {"type": "string"},
            "replicas": {"type": "integer"},
            "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        }},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    },
}


def sample_types() -> list[ResourceType]:
    """ConfigMap, Namespace (cluster, status), Lease and a CRD kind with status and scale."""
    s = Strategy()
    return [
        ResourceType(group="", version="v1", kind="ConfigMap", plural="configmaps", singular="configmap",
                     namespaced=True, strategy=s, short_names=("cm",), schema_name=CONFIGMAP),
        ResourceType(group="", version="v1", kind="Namespace", plural="namespaces", singular="namespace",
                     namespaced=False, strategy=s, has_status=True, short_names=("ns",),
                     verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
                     schema_name="io.k8s.api.core.v1.Namespace"),
        ResourceType(group="coordination.k8s.io", version="v1", kind="Lease", plural="leases", singular="lease",
                     namespaced=True, strategy=s, schema_name=LEASE),
        ResourceType(group="stable.example.com", version="v1", kind="CronTab", plural="crontabs",
                     singular="crontab", namespaced=True, strategy=s, is_crd=True, has_status=True,
                     scale=ScaleSubresource(".spec.replicas", ".status.replicas"), short_names=("ct",),
                     categories=("all",), strategic_merge_patch=False, return_deleted_object=True,
                     schema=CRONTAB_SCHEMA),
    ]


class DefinitionsTests(unittest.TestCase):
    def setUp(self):
        self.defs = load_definitions()

    def test_optional_fields_have_plain_types(self):
        cm = self.defs.get(CONFIGMAP)
        self.assertEqual(cm["type"], "object")
        self.assertEqual(cm["properties"]["immutable"]["type"], "boolean")
        self.assertEqual(cm["properties"]["data"]["additionalProperties"], {"type": "string"})

    def test_no_rewrites_left_anywhere(self):
        text = orjson.dumps({n: self.defs.get(n) for n in self.defs.names()}).decode()
        self.assertNotIn('"null"', text)
        self.assertNotIn("#/$defs/", text)
        for name in self.defs.names():
            for prop in ("apiVersion", "kind"):
                self.assertNotIn("enum", self.defs.get(name).get("properties", {}).get(prop, {}), name)

    def test_refs_are_swagger_style(self):
        meta = self.defs.get(CONFIGMAP)["properties"]["metadata"]
        self.assertEqual(meta["$ref"], "#/definitions/" + OBJECT_META)
        self.assertIn("description", meta)

    def test_int_or_string_and_quantity_as_upstream(self):
        ios = self.defs.get("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
        self.assertEqual((ios["type"], ios["format"]), ("string", "int-or-string"))
        self.assertNotIn("oneOf", ios)
        qty = self.defs.get("io.k8s.apimachinery.pkg.api.resource.Quantity")
        self.assertEqual(qty["type"], "string")
        self.assertNotIn("oneOf", qty)

    def test_extensions_kept(self):
        containers = self.defs.get("io.k8s.api.core.v1.PodSpec")["properties"]["containers"]
        self.assertEqual(containers["x-kubernetes-patch-merge-key"], "name")
        self.assertEqual(containers["x-kubernetes-patch-strategy"], "merge")
        self.assertEqual(containers["x-kubernetes-list-type"], "map")
        self.assertEqual(containers["x-kubernetes-list-map-keys"], ["name"])
        self.assertIn("name", self.defs.get("io.k8s.api.core.v1.Container")["required"])

    def test_resolve_ref_accepts_every_style(self):
        for ref in ("#/definitions/", "#/components/schemas/", "#/$defs/"):
            self.assertIs(self.defs.resolve_ref(ref + LEASE), self.defs.get(LEASE))
        self.assertRaises(KeyError, self.defs.resolve_ref, "#/definitions/no.such.Kind")

    def test_gvk_index(self):
        index = self.defs.gvk_index()
        self.assertEqual(index[("", "v1", "ConfigMap")], CONFIGMAP)
        self.assertEqual(index[("apps", "v1", "Deployment")], "io.k8s.api.apps.v1.Deployment")

    def test_loaded_once(self):
        self.assertIs(load_definitions(), self.defs)


class OpenAPIV3Tests(unittest.TestCase):
    def setUp(self):
        self.defs = load_definitions()
        self.types = sample_types()

    def doc(self, group, version):
        return openapi.build_openapi_v3_group_version(group, version, self.types, self.defs)

    def test_core_document_is_valid_openapi_3(self):
        doc = self.doc("", "v1")
        self.assertEqual(doc["openapi"], "3.0.0")
        validate(doc)

    def test_kind_schema_carries_gvk_so_kubectl_finds_it(self):
        schemas = self.doc("", "v1")["components"]["schemas"]
        cm = schemas[CONFIGMAP]
        self.assertEqual(cm["x-kubernetes-group-version-kind"], [{"group": "", "kind": "ConfigMap", "version": "v1"}])
        self.assertEqual(cm["properties"]["metadata"]["allOf"], [{"$ref": "#/components/schemas/" + OBJECT_META}])
        self.assertIn(OBJECT_META, schemas)
        self.assertIn("io.k8s.api.core.v1.ConfigMapList", schemas)
        self.assertIn("io.k8s.apimachinery.pkg.apis.meta.v1.Status", schemas)
        # only what this group-version needs
        self.assertNotIn(LEASE, schemas)
        self.assertNotIn("io.k8s.api.core.v1.Pod", schemas)

    def test_every_ref_resolves_inside_the_document(self):
        for gv in (("", "v1"), ("coordination.k8s.io", "v1"), ("stable.example.com", "v1")):
            doc = self.doc(*gv)
            text = orjson.dumps(doc).decode()
            for ref in set(part.split('"')[0] for part in text.split('"$ref":"')[1:]):
                self.assertTrue(ref.startswith("#/components/schemas/"), ref)
                self.assertIn(ref[len("#/components/schemas/"):], doc["components"]["schemas"], (gv, ref))

    def test_patch_operation_offers_field_validation(self):
        # kubectl decides on server-side field validation from this parameter
        op = self.doc("", "v1")["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]
        self.assertEqual(op["x-kubernetes-group-version-kind"], {"group": "", "kind": "ConfigMap", "version": "v1"})
        self.assertEqual(op["operationId"], "patchCoreV1NamespacedConfigMap")
        names = {p["name"]: p for p in op["parameters"]}
        self.assertEqual(names["fieldValidation"]["in"], "query")
        self.assertEqual(set(names), {"dryRun", "fieldManager", "fieldValidation", "force"})
        self.assertEqual(set(op["requestBody"]["content"]), {
            "application/json-patch+json", "application/merge-patch+json",
            "application/strategic-merge-patch+json", "application/apply-patch+yaml"})

    def test_paths_of_namespaced_and_cluster_kinds(self):
        paths = self.doc("", "v1")["paths"]
        for path in ("/api/v1/", "/api/v1/configmaps", "/api/v1/namespaces/{namespace}/configmaps",
                     "/api/v1/watch/namespaces/{namespace}/configmaps/{name}", "/api/v1/watch/configmaps",
                     "/api/v1/namespaces", "/api/v1/namespaces/{name}", "/api/v1/namespaces/{name}/status"):
            self.assertIn(path, paths)
        lst = paths["/api/v1/namespaces/{namespace}/configmaps"]["get"]
        self.assertEqual(lst["x-kubernetes-action"], "list")
        self.assertEqual({p["name"] for p in lst["parameters"]} >= {
            "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch",
            "watch", "timeoutSeconds", "allowWatchBookmarks", "sendInitialEvents"}, True)
        self.assertEqual(lst["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
                         "#/components/schemas/io.k8s.api.core.v1.ConfigMapList")
        delete = paths["/api/v1/namespaces/{namespace}/configmaps/{name}"]["delete"]
        self.assertTrue({"propagationPolicy", "gracePeriodSeconds", "orphanDependents", "dryRun"}
                        <= {p["name"] for p in delete["parameters"]})
        # Namespace has no deletecollection verb: no DELETE on the collection
        self.assertNotIn("delete", paths["/api/v1/namespaces"])
        status = paths["/api/v1/namespaces/{name}/status"]
        self.assertEqual(set(status) - {"parameters"}, {"get", "put", "patch"})
        self.assertEqual(status["get"]["operationId"], "readCoreV1NamespaceStatus")

    def test_custom_resource_schema_and_subresources(self):
        doc = self.doc("stable.example.com", "v1")
        validate(doc)
        schemas = doc["components"]["schemas"]
        ct = schemas["com.example.stable.v1.CronTab"]
        self.assertEqual(ct["x-kubernetes-group-version-kind"],
                         [{"group": "stable.example.com", "kind": "CronTab", "version": "v1"}])
        self.assertEqual(ct["properties"]["apiVersion"]["type"], "string")
        self.assertEqual(ct["properties"]["metadata"]["allOf"], [{"$ref": "#/components/schemas/" + OBJECT_META}])
        self.assertEqual(ct["properties"]["spec"]["properties"]["cronSpec"], {"type": "string"})
        self.assertEqual(schemas["com.example.stable.v1.CronTabList"]["properties"]["items"]["items"],
                         {"$ref": "#/components/schemas/com.example.stable.v1.CronTab"})
        scale = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"]
        self.assertEqual(scale["get"]["x-kubernetes-group-version-kind"],
                         {"group": "autoscaling", "kind": "Scale", "version": "v1"})
        self.assertIn("io.k8s.api.autoscaling.v1.Scale", schemas)
        patch = doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}"]["patch"]
        self.assertNotIn("application/strategic-merge-patch+json", patch["requestBody"]["content"])
        self.assertEqual(patch["operationId"], "patchStableExampleComV1NamespacedCronTab")

    def test_int_or_string_in_v3_is_one_of(self):
        lease = self.doc("coordination.k8s.io", "v1")["components"]["schemas"]
        self.assertNotIn("io.k8s.apimachinery.pkg.util.intstr.IntOrString", lease)
        types = self.types + [ResourceType(group="", version="v1", kind="Service", plural="services",
                                           singular="service", namespaced=True, strategy=Strategy(),
                                           schema_name="io.k8s.api.core.v1.Service")]
        doc = openapi.build_openapi_v3_group_version("", "v1", types, self.defs)
        ios = doc["components"]["schemas"]["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
        self.assertEqual(ios["oneOf"], [{"type": "integer"}, {"type": "string"}])
        validate(doc)


class OpenAPIV2Tests(unittest.TestCase):
    def test_swagger_document(self):
        doc = openapi.build_openapi_v2(sample_types(), load_definitions())
        validate(doc)
        self.assertEqual(doc["swagger"], "2.0")
        item = doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
        self.assertEqual(item["put"]["x-kubernetes-action"], "put")
        self.assertEqual(item["put"]["x-kubernetes-group-version-kind"],
                         {"group": "coordination.k8s.io", "kind": "Lease", "version": "v1"})
        body = [p for p in item["put"]["parameters"] if p["in"] == "body"][0]
        self.assertEqual(body["schema"], {"$ref": "#/definitions/" + LEASE})
        self.assertIn("fieldValidation", {p["name"] for p in item["patch"]["parameters"]})
        self.assertEqual(doc["definitions"][LEASE]["properties"]["metadata"]["$ref"], "#/definitions/" + OBJECT_META)
        self.assertIn("com.example.stable.v1.CronTab", doc["definitions"])
        port = doc["definitions"]["com.example.stable.v1.CronTab"]["properties"]["spec"]["properties"]["port"]
        self.assertNotIn("anyOf", port)
        self.assertNotIn("#/components/", orjson.dumps(doc).decode())


class OpenAPIServiceTests(unittest.TestCase):
    def setUp(self):
        self.service = openapi.OpenAPIService(load_definitions())
        self.service.set_types(sample_types())

    def test_index_lists_group_versions_with_content_hash(self):
        index = orjson.loads(self.service.v3_index_bytes())
        self.assertEqual(set(index["paths"]), {"api/v1", "apis/coordination.k8s.io/v1",
                                               "apis/stable.example.com/v1"})
        body, etag = self.service.v3_bytes("api/v1")
        self.assertEqual(len(etag), 128)
        self.assertEqual(etag, etag.upper())
        self.assertEqual(index["paths"]["api/v1"]["serverRelativeURL"], f"/openapi/v3/api/v1?hash={etag}")
        self.assertEqual(orjson.loads(body)["openapi"], "3.0.0")

    def test_unknown_group_version_is_none(self):
        self.assertIsNone(self.service.v3_bytes("apis/apps/v1"))

    def test_hash_changes_when_a_document_changes(self):
        _, before = self.service.v3_bytes("apis/stable.example.com/v1")
        core_before = self.service.v3_bytes("api/v1")[1]
        types = sample_types()
        types[3].short_names = ()
        types[3].schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
        self.service.set_types(types)
        _, after = self.service.v3_bytes("apis/stable.example.com/v1")
        self.assertNotEqual(before, after)
        self.assertEqual(self.service.v3_bytes("api/v1")[1], core_before)
        index = orjson.loads(self.service.v3_index_bytes())
        self.assertIn(after, index["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"])

    def test_removed_group_disappears(self):
        self.service.set_types(sample_types()[:3])
        self.assertIsNone(self.service.v3_bytes("apis/stable.example.com/v1"))
        self.assertNotIn("apis/stable.example.com/v1", orjson.loads(self.service.v3_index_bytes())["paths"])
        self.assertNotIn("com.example.stable.v1.CronTab", orjson.loads(self.service.v2_bytes())["definitions"])


KUBECTL = "/usr/lib/google-cloud-sdk/bin/kubectl.1.32"


class _DocumentsSite(resource.Resource):
    """Serves only discovery and OpenAPI, enough for ``kubectl explain`` and ``create``'s validation probe."""

    isLeaf = True

    def __init__(self, types: list[ResourceType]) -> None:
        super().__init__()
        self.types = types
        self.service = openapi.OpenAPIService(load_definitions())
        self.service.set_types(types)
        self.posts: list[str] = []

    def render_GET(self, request):
        path = request.path.decode().rstrip("/")
        request.setHeader(b"content-type", b"application/json")
        parts = path.split("/")[1:]
        if path == "/api":
            return orjson.dumps(discovery.api_versions())
        if path == "/apis":
            return orjson.dumps(discovery.api_group_list(self.types))
        if path == "/api/v1":
            return orjson.dumps(discovery.api_resource_list("", "v1", self.types))
        if parts[0] == "apis" and len(parts) == 3:
            return orjson.dumps(discovery.api_resource_list(parts[1], parts[2], self.types))
        if path == "/openapi/v3":
            return self.service.v3_index_bytes()
        found = self.service.v3_bytes(path[len("/openapi/v3/"):]) if path.startswith("/openapi/v3/") else None
        if found:
            return found[0]
        request.setResponseCode(404)
        return orjson.dumps(errors.StatusError(404, "NotFound", "not found").to_status())

    def render_POST(self, request):
        self.posts.append(request.uri.decode())
        request.setHeader(b"content-type", b"application/json")
        request.setResponseCode(201)
        return request.content.read()


class KubectlTests(unittest.TestCase):
    """kubectl 1.32 reads our discovery and /openapi/v3 documents."""

    if not os.path.exists(KUBECTL):
        skip = "kubectl 1.32 not installed"

    def setUp(self):
        self.site = _DocumentsSite(sample_types())
        self.port = reactor.listenTCP(0, server.Site(self.site), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.home = self.mktemp()
        os.makedirs(self.home)

    async def kubectl(self, *args: str) -> str:
        env = {"HOME": self.home, "KUBECONFIG": os.devnull, "PATH": os.environ.get("PATH", "")}
        out, err, code = await utils.getProcessOutputAndValue(
            KUBECTL, ("--server", f"http://127.0.0.1:{self.port.getHost().port}") + args, env=env)
        self.assertEqual(code, 0, err)
        return out.decode()

    def test_explain_configmap_data(self):
        async def run():
            out = await self.kubectl("explain", "configmap.data")
            self.assertIn("FIELD: data <map[string]string>", out)
            self.assertIn("Data contains the configuration data", out)
        return defer.Deferred.fromCoroutine(run())

    def test_explain_lease_spec_and_custom_kind(self):
        async def run():
            out = await self.kubectl("explain", "lease.spec")
            self.assertIn("GROUP:      coordination.k8s.io", out)
            self.assertIn("holderIdentity\t<string>", out)
            out = await self.kubectl("explain", "crontab.spec")
            self.assertIn("cronSpec\t<string>", out)
        return defer.Deferred.fromCoroutine(run())

    def test_create_asks_for_server_side_strict_validation(self):
        async def run():
            manifest = os.path.join(self.home, "cm.yaml")
            with open(manifest, "w") as f:
                f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n")
            await self.kubectl("create", "-f", manifest)
            self.assertEqual(len(self.site.posts), 1)
            self.assertIn("fieldValidation=Strict", self.site.posts[0])
        return defer.Deferred.fromCoroutine(run())


class OpenAPIMethodTests(ServerTestCase):
    @run
    async def test_any_method_is_answered_as_a_get(self):
        """kube-openapi's handlers sit on a path mux without method routing: MKCOL, TRACE, LOCK or a
        made-up method get the document (never a 500), a conditional one 412 rather than 304."""
        document = await self.client.get("/openapi/v2")
        self.assertEqual(document.code, 200)
        for method in ("MKCOL", "TRACE", "LOCK", "FROB", "POST"):
            reply = await self.client.request(method, "/openapi/v2")
            self.assertEqual((reply.code, reply.raw), (200, document.raw), method)
        index = await self.client.request("MKCOL", "/openapi/v3")
        self.assertEqual(index.code, 200)
        self.assertIn("api/v1", index.body["paths"])
        etag = document.header("etag")
        conditional = await self.client.request("LOCK", "/openapi/v2", headers={"If-None-Match": etag})
        self.assertEqual(conditional.code, 412)
        conditional = await self.client.request("GET", "/openapi/v2", headers={"If-None-Match": etag})
        self.assertEqual(conditional.code, 304)
