"""Resource-tree tests: every REST verb and its error cases, through the real
filters, delegation chain, handlers and Store, on ConfigMaps (namespaced, no
status), Namespaces (cluster-scoped, status) and Leases (coordination.k8s.io)."""
from __future__ import annotations

import base64
import json

import yaml

from twisted.internet import defer, reactor

from kapiserver.testing.cases import HANG_GUARD, ServerTestCase, run

CM = "/api/v1/namespaces/default/configmaps"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


def cm(name: str, data: dict | None = None, **meta) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": data or {}}


class CreateGetTests(ServerTestCase):
    @run
    async def test_create_sets_metadata(self):
        r = await self.client.post(CM, cm("a", {"k": "v"}))
        self.assertEqual(r.code, 201, r.body)
        md = r.body["metadata"]
        self.assertEqual(md["namespace"], "default")
        self.assertNotIn("generation", md)  # a ConfigMap has none, as upstream's
        self.assertRegex(md["uid"], r"^[0-9a-f-]{36}$")
        self.assertRegex(md["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertTrue(md["resourceVersion"].isdigit())
        got = await self.client.get(CM + "/a")
        self.assertEqual(got.code, 200)
        self.assertEqual(got.body["data"], {"k": "v"})
        self.assertEqual(got.body["metadata"]["resourceVersion"], md["resourceVersion"])
        missing = await self.client.get(CM + "/missing")
        # as kube-apiserver: no Server header naming the software and its version
        self.assertEqual([x.header("server") for x in (r, got, missing)], [None, None, None])

    @run
    async def test_already_exists(self):
        await self.client.post(CM, cm("a"))
        r = await self.client.post(CM, cm("a"))
        self.assertEqual(r.code, 409)
        self.assertEqual(r.body["reason"], "AlreadyExists")
        self.assertEqual(r.body["message"], 'configmaps "a" already exists')
        self.assertEqual(r.body["details"], {"name": "a", "kind": "configmaps"})

    @run
    async def test_null_and_empty_yaml_bodies_are_the_zero_object(self):
        """Go decodes JSON null into the zero object, and an empty YAML document (an empty body, or a first
        document with nothing in it) is null: kube-apiserver v1.32.13 creates a LimitRange named by a UUID (its
        PrepareForCreate) and a SelfSubjectReview from them, and asks a ConfigMap for its name. An empty JSON body
        stays a 400."""
        limits = "/api/v1/namespaces/default/limitranges"
        for body, content_type in ((b"null", "application/json"), (b"", "application/yaml"),
                                   (b"--- \n...\n---\nkind: ConfigMap\n", "application/yaml")):
            r = await self.client.post(limits, raw=body, content_type=content_type)
            self.assertEqual((r.code, r.body["kind"]), (201, "LimitRange"), r.body)
            self.assertRegex(r.body["metadata"]["name"], r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
        r = await self.client.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                   raw=b"--- \n...\n---\nkind: ConfigMap\n", content_type="application/yaml")
        self.assertEqual((r.code, r.body["kind"]), (201, "SelfSubjectReview"), r.body)
        r = await self.client.post(CM, raw=b"null")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (
            422, "Invalid", 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'))
        r = await self.client.post(CM, raw=b"")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (
            400, "BadRequest", "the object provided is unrecognized (must be of type ConfigMap): couldn't get "
                               "version/kind; json parse error: unexpected end of JSON input (<empty>)"))

    @run
    async def test_lease_drops_coordinated_leader_election_fields(self):
        """kube-apiserver v1.32.13 (CoordinatedLeaderElection off) creates and patches a Lease without them."""
        r = await self.client.post(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                            "metadata": {"name": "cle"}, "spec": {"strategy": "!="}})
        self.assertEqual((r.code, r.body["spec"]), (201, {}), r.body)
        r = await self.client.patch(LEASES + "/cle", {"spec": {"preferredHolder": "::1"}})
        self.assertEqual((r.code, r.body["spec"]), (200, {}), r.body)

    @run
    async def test_generate_name(self):
        body = cm("")
        body["metadata"] = {"generateName": "gen-"}
        names = set()
        for _ in range(3):
            r = await self.client.post(CM, body)
            self.assertEqual(r.code, 201, r.body)
            names.add(r.body["metadata"]["name"])
        self.assertEqual(len(names), 3)
        for name in names:
            self.assertRegex(name, r"^gen-[a-z0-9]{5}$")

    @run
    async def test_not_found(self):
        r = await self.client.get(CM + "/missing")
        self.assertEqual(r.code, 404)
        self.assertEqual(r.body["kind"], "Status")
        self.assertEqual(r.body["message"], 'configmaps "missing" not found')
        r = await self.client.get(LEASES + "/missing")
        self.assertEqual(r.body["message"], 'leases.coordination.k8s.io "missing" not found')
        self.assertEqual(r.body["details"]["group"], "coordination.k8s.io")

    @run
    async def test_invalid_name_is_422_with_causes(self):
        r = await self.client.post(CM, cm("Not_Valid"))
        self.assertEqual(r.code, 422)
        self.assertEqual(r.body["reason"], "Invalid")
        fields = [c.get("field") for c in r.body["details"]["causes"]]
        self.assertIn("metadata.name", fields)

    @run
    async def test_invalid_label_is_422(self):
        r = await self.client.post(CM, cm("x", labels={"bad key!": "v"}))
        self.assertEqual(r.code, 422)
        self.assertIn("metadata.labels", [c.get("field") for c in r.body["details"]["causes"]])

    @run
    async def test_malformed_json_is_400(self):
        r = await self.client.post(CM, raw=b'{"apiVersion": "v1", "kind":')
        self.assertEqual(r.code, 400)
        self.assertEqual(r.body["reason"], "BadRequest")

    @run
    async def test_wrong_kind_is_400(self):
        body = cm("x")
        body["kind"] = "Secret"
        r = await self.client.post(CM, body)
        self.assertEqual(r.code, 400)

    @run
    async def test_namespace_mismatch_is_400(self):
        r = await self.client.post(CM, cm("x", namespace="kube-system"))
        self.assertEqual(r.code, 400)
        self.assertIn("does not match the namespace", r.body["message"])

    @run
    async def test_name_mismatch_on_update_is_400(self):
        await self.client.post(CM, cm("a"))
        r = await self.client.put(CM + "/a", cm("b"))
        self.assertEqual(r.code, 400)

    @run
    async def test_body_too_large_is_413(self):
        big = cm("big", {"k": "x" * (3 * 1024 * 1024 + 10)})
        r = await self.client.post(CM, big)
        self.assertEqual(r.code, 413)
        self.assertEqual(r.body["reason"], "RequestEntityTooLarge")
        r = await self.client.get(CM + "/big")
        self.assertEqual(r.code, 404)

    @run
    async def test_unsupported_content_type_is_415(self):
        for body, content_type in ((b"a=b", "application/x-www-form-urlencoded"), (b"", "text/plain")):
            r = await self.client.post(CM, raw=body, content_type=content_type)
            self.assertEqual(r.code, 415)  # an empty body too: kube-apiserver v1.32.13 looks at its type first
            # upstream lists the serializers' media types (not the patch types, not the one it got)
            self.assertEqual((r.body["reason"], r.body["message"]), (
                "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types "
                "include: application/json, application/yaml, application/vnd.kubernetes.protobuf"))

    @run
    async def test_create_only_kind_has_no_object_path(self):
        """Upstream registers no path for an object of a kind that is only created (the reviews, Binding):
        naming one is 404 whatever the method; its collection path exists, so another method there is 405."""
        reviews = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
        for method, path in (("GET", reviews + "/x"), ("PUT", reviews + "/x"), ("DELETE", reviews + "/x"),
                             ("GET", "/api/v1/namespaces/default/bindings/x"),
                             ("GET", "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews/x")):
            r = await self.client.request(method, path, raw=b"{}" if method == "PUT" else None)
            self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                             (404, "NotFound", "the server could not find the requested resource"), (method, path))
        for query in ("", "?fieldSelector=metadata.name%3Dx"):  # the selector's name is no path: the route exists
            r = await self.client.get(reviews + query)
            self.assertEqual((r.code, r.body["reason"]), (405, "MethodNotAllowed"), query)

    @run
    async def test_unacceptable_accept_is_406(self):
        r = await self.client.get(CM, headers={"Accept": "application/x-unheard-of"})
        self.assertEqual(r.code, 406)
        self.assertEqual(r.body["reason"], "NotAcceptable")
        # go-restful's router answers for a built-in kind, listing its route's types (a list's: the streams
        # too), before any handler; only */* is a wildcard there
        self.assertEqual((r.body["message"], r.body["details"]), (
            "406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf, application/json;stream=watch, "
            "application/vnd.kubernetes.protobuf;stream=watch", {}))
        await self.client.post(CM, cm("accept"))
        for accept in ("text/html", "application/*", "text/html, application/*;q=0.5"):
            r = await self.client.get(CM + "/accept", headers={"Accept": accept})
            self.assertEqual((r.code, r.body["message"]), (406, "406: Not Acceptable\n\nAvailable representations: "
                             "application/json, application/yaml, application/vnd.kubernetes.protobuf"), accept)
        for accept in ("text/html, */*;q=0.1", "application/json;q=abc", "application/yaml ;x=y"):
            r = await self.client.get(CM + "/accept", headers={"Accept": accept})
            self.assertEqual(r.code, 200, accept)

    @run
    async def test_yaml_in_and_out(self):
        # (not "name: y": YAML 1.1, as sigs.k8s.io/yaml reads it, makes that a boolean)
        r = await self.client.post(CM, raw=b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: yml\ndata:\n  a: b\n",
                                   content_type="application/yaml")
        self.assertEqual(r.code, 201, r.raw)
        r = await self.client.get(CM + "/yml", headers={"Accept": "application/yaml"})
        self.assertEqual(r.header("content-type"), "application/yaml")
        self.assertIn(b"name: yml", r.raw)

    @run
    async def test_create_in_missing_namespace_is_404(self):
        r = await self.client.post("/api/v1/namespaces/nope/configmaps", cm("a"))
        self.assertEqual(r.code, 404)
        self.assertEqual(r.body["message"], 'namespaces "nope" not found')

    @run
    async def test_unknown_path_is_404_status(self):
        r = await self.client.get("/apis/nothing.example.com/v1/things")
        self.assertEqual(r.code, 404)
        self.assertEqual(r.body["kind"], "Status")
        r = await self.client.get("/no/such/path")
        self.assertEqual(r.code, 404)

    @run
    async def test_cluster_scoped_create_and_status(self):
        r = await self.client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": "demo"}})
        self.assertEqual(r.code, 201, r.body)
        self.assertEqual(r.body["status"]["phase"], "Active")
        self.assertNotIn("namespace", r.body["metadata"])
        r = await self.client.get("/api/v1/namespaces/demo/status")
        self.assertEqual(r.code, 200)
        self.assertEqual(r.body["metadata"]["name"], "demo")


class UpdateTests(ServerTestCase):
    @run
    async def test_stale_resource_version_conflicts(self):
        created = (await self.client.post(CM, cm("a", {"v": "1"}))).body
        stale = dict(created, data={"v": "2"})
        r = await self.client.put(CM + "/a", stale)
        self.assertEqual(r.code, 200, r.body)
        stale["data"] = {"v": "3"}
        r = await self.client.put(CM + "/a", stale)
        self.assertEqual(r.code, 409)
        self.assertEqual(r.body["reason"], "Conflict")
        self.assertEqual(r.body["message"], 'Operation cannot be fulfilled on configmaps "a": the object has '
                         'been modified; please apply your changes to the latest version and try again')
        self.assertEqual((await self.client.get(CM + "/a")).body["data"], {"v": "2"})

    @run
    async def test_unconditional_update(self):
        await self.client.post(CM, cm("a", {"v": "1"}))
        r = await self.client.put(CM + "/a", cm("a", {"v": "2"}))
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["data"], {"v": "2"})

    @run
    async def test_uid_and_creation_timestamp_are_kept(self):
        created = (await self.client.post(CM, cm("a"))).body
        body = cm("a", {"x": "y"})
        body["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z"
        r = await self.client.put(CM + "/a", body)
        self.assertEqual(r.body["metadata"]["uid"], created["metadata"]["uid"])
        self.assertEqual(r.body["metadata"]["creationTimestamp"], created["metadata"]["creationTimestamp"])

    @run
    async def test_a_put_s_uid_is_a_precondition(self):
        """kube-apiserver v1.32.13's answers: a PUT's uid must be the stored object's, checked before its
        resourceVersion, and a missing object has none, so even a kind a PUT may create (a Lease) is a 409;
        a patch that changes the uid is refused as immutable."""
        created = (await self.client.post(CM, cm("a"))).body
        uid = created["metadata"]["uid"]
        r = await self.client.put(CM + "/a", cm("a", {"k": "w"}, uid="null", resourceVersion="1"))
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (
            409, "Conflict", 'Operation cannot be fulfilled on configmaps "a": StorageError: invalid object, Code: 4, '
            "Key: /registry/configmaps/default/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
            f"precondition: null, UID in object meta: {uid}"))
        for path, body in ((CM + "/b", cm("b", uid="x-1")),
                           (LEASES + "/l", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                            "metadata": {"name": "l", "uid": "x-1"}})):
            r = await self.client.put(path, body)
            self.assertEqual((r.code, r.body["reason"]), (409, "Conflict"), path)
            self.assertTrue(r.body["message"].endswith(
                "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: x-1, UID in "
                "object meta: "), r.body["message"])
            self.assertEqual((await self.client.get(path)).code, 404)
        r = await self.client.patch(CM + "/a", {"metadata": {"uid": "other"}})
        self.assertEqual((r.code, r.body["message"]), (
            422, 'ConfigMap "a" is invalid: metadata.uid: Invalid value: "other": field is immutable'))
        self.assertEqual((await self.client.get(CM + "/a")).body["metadata"]["uid"], uid)

    @run
    async def test_a_resource_version_that_does_not_parse_is_400(self):
        """kube-apiserver v1.32.13 answers these writes a 500 with strconv's error (its versioner parses the
        written object's resourceVersion): the 400 it means, in its words, for an update, a create by PUT and an
        apply."""
        await self.client.post(CM, cm("a"))
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "resourceVersion": "é"}}
        for method, path, body, content_type in (
                ("PUT", CM + "/a", cm("a", resourceVersion="1e3"), "application/json"),
                ("PUT", LEASES + "/l", lease, "application/json"),
                ("PATCH", CM + "/b?fieldManager=m", json.dumps(cm("b", resourceVersion="é")).encode(),
                 "application/apply-patch+yaml")):
            if content_type == "application/json":
                r = await self.client.request(method, path, body=body)
            else:
                r = await self.client.patch(path, raw=body, content_type=content_type)
            value = body["metadata"]["resourceVersion"] if isinstance(body, dict) else "é"
            self.assertEqual((r.code, r.body["message"]),
                             (400, f'strconv.ParseUint: parsing "{value}": invalid syntax'), path)
        self.assertEqual([(await self.client.get(p)).code for p in (LEASES + "/l", CM + "/b")], [404, 404])
        r = await self.client.put(CM + "/a", cm("a", resourceVersion="18446744073709551616"))
        self.assertEqual((r.code, r.body["message"]),
                         (400, 'strconv.ParseUint: parsing "18446744073709551616": value out of range'))

    @run
    async def test_a_put_creates_the_kinds_upstream_lets_it(self):
        """kube-apiserver v1.32.13's strategies whose AllowCreateOnUpdate is true (Leases, RBAC, Events,
        LimitRanges, Services, Endpoints, RuntimeClasses) create on PUT; a ConfigMap's is a 404."""
        default = "/api/v1/namespaces/default"
        for path, body in (
                (f"{default}/limitranges/lr", {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr"}}),
                (f"{default}/endpoints/ep", {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "ep"}}),
                (f"{default}/services/svc", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
                                             "spec": {"ports": [{"port": 80}]}}),
                ("/apis/node.k8s.io/v1/runtimeclasses/rc", {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                                            "metadata": {"name": "rc"}, "handler": "h"})):
            r = await self.client.put(path, body)
            self.assertEqual(r.code, 201, (path, r.body))
            self.assertEqual((await self.client.get(path)).code, 200, path)
        svc = (await self.client.get(f"{default}/services/svc")).body
        self.assertTrue(svc["spec"]["clusterIP"])  # allocated as on a create
        self.assertEqual((await self.client.put(CM + "/nope", cm("nope"))).code, 404)

    @run
    async def test_noop_update_keeps_resource_version(self):
        created = (await self.client.post(CM, cm("a", {"v": "1"}))).body
        r = await self.client.put(CM + "/a", created)
        self.assertEqual(r.body["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"])

    async def _generations(self, path: str, obj: dict, *changes: dict) -> list:
        """metadata.generation after creating ``obj`` at ``path`` and after each merge patch."""
        r = await self.client.post(path, obj)
        self.assertEqual(r.code, 201, r.body)
        seen = [r.body["metadata"].get("generation")]
        for change in changes:
            r = await self.client.patch(f"{path}/{obj['metadata']['name']}", change)
            self.assertEqual(r.code, 200, r.body)
            seen.append(r.body["metadata"].get("generation"))
        return seen

    @run
    async def test_generation_as_kube_apiserver_keeps_it_for_each_kind(self):
        # what kube-apiserver 1.32 answers for the same requests (checked side by side)
        labels, annotations = {"metadata": {"labels": {"x": "y"}}}, {"metadata": {"annotations": {"x": "y"}}}
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                 "spec": {"holderIdentity": "a"}}
        self.assertEqual(await self._generations(LEASES, lease, {"spec": {"holderIdentity": "b"}}), [None, None])
        # a kind that does not track it keeps what the creating request sent; an update cannot change it
        sent = cm("sent", {"k": "v"})
        sent["metadata"]["generation"] = 7
        self.assertEqual(await self._generations(CM, sent, {"data": {"k": "w"}}, {"metadata": {"generation": 9}}),
                         [7, 7, 7])
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                      "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                          "metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
        self.assertEqual(await self._generations("/apis/apps/v1/namespaces/default/deployments", deployment,
                                                 {"spec": {"replicas": 3}}, labels, annotations), [1, 2, 2, 3])
        priority_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                          "metadata": {"name": "generation"}, "value": 10, "description": "a"}
        self.assertEqual(await self._generations("/apis/scheduling.k8s.io/v1/priorityclasses", priority_class,
                                                 {"description": "b"}), [1, 1])
        slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "s"},
                  "addressType": "IPv4", "endpoints": []}
        self.assertEqual(await self._generations("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                                                 slice_, labels, annotations), [1, 2, 2])
        driver = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "g.example.com"},
                  "spec": {}}
        self.assertEqual(await self._generations("/apis/storage.k8s.io/v1/csidrivers", driver,
                                                 {"spec": {"requiresRepublish": True}}), [None, 1])

    @run
    async def test_status_subresource_changes_status_and_metadata_not_spec(self):
        await self.client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": "st"}})
        ns = (await self.client.get("/api/v1/namespaces/st")).body
        ns["metadata"]["labels"] = {"changed": "yes"}
        ns["spec"] = {"finalizers": ["example.com/mine"]}
        ns["status"] = {"phase": "Active", "conditions": [{"type": "X", "status": "True"}]}
        r = await self.client.put("/api/v1/namespaces/st/status", ns)
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["status"]["conditions"][0]["type"], "X")
        # upstream's namespaceStatusStrategy resets only the spec
        self.assertEqual(r.body["metadata"]["labels"]["changed"], "yes")
        self.assertEqual(r.body["spec"], {"finalizers": ["kubernetes"]})
        # the main resource ignores status
        ns2 = r.body
        ns2["status"] = {"phase": "Active"}
        ns2["metadata"]["labels"] = {"a": "b"}
        r = await self.client.put("/api/v1/namespaces/st", ns2)
        self.assertEqual(r.body["metadata"]["labels"]["a"], "b")
        self.assertEqual(r.body["status"]["conditions"][0]["type"], "X")


class PatchTests(ServerTestCase):
    @run
    async def test_merge_patch(self):
        await self.client.post(CM, cm("a", {"x": "1", "y": "2"}))
        r = await self.client.patch(CM + "/a", {"data": {"x": None, "z": "3"}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["data"], {"y": "2", "z": "3"})

    @run
    async def test_json_patch_with_test_op(self):
        await self.client.post(CM, cm("a", {"x": "1"}))
        ops = [{"op": "test", "path": "/data/x", "value": "1"}, {"op": "add", "path": "/data/y", "value": "2"}]
        r = await self.client.patch(CM + "/a", ops, content_type="application/json-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["data"], {"x": "1", "y": "2"})
        ops = [{"op": "test", "path": "/data/x", "value": "nope"}, {"op": "remove", "path": "/data/x"}]
        r = await self.client.patch(CM + "/a", ops, content_type="application/json-patch+json")
        self.assertIn(r.code, (409, 422, 400))
        self.assertEqual((await self.client.get(CM + "/a")).body["data"], {"x": "1", "y": "2"})

    @run
    async def test_strategic_merge_patch_on_builtin(self):
        await self.client.post(CM, cm("a", {"x": "1"}, labels={"a": "b"}))
        r = await self.client.patch(CM + "/a", {"metadata": {"labels": {"c": "d"}}},
                                    content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["metadata"]["labels"], {"a": "b", "c": "d"})

    @run
    async def test_patch_precondition_conflict(self):
        created = (await self.client.post(CM, cm("a"))).body
        await self.client.patch(CM + "/a", {"data": {"n": "1"}})
        r = await self.client.patch(CM + "/a", {"metadata": {"resourceVersion": created["metadata"]
                                                              ["resourceVersion"]}, "data": {"n": "2"}})
        self.assertEqual(r.code, 409)

    @run
    async def test_type_meta_a_patch_leaves(self):
        """kube-apiserver v1.32.13: a strategic merge patch's result is converted into the resource's type, so its
        apiVersion and kind are not read; a JSON or merge patch's is decoded as JSON, where a missing apiVersion
        leaves an object without a name (400) and a wrong one is a 422."""
        await self.client.post(CM, cm("a", {"k": "v"}))
        for body in ({"apiVersion": "v2"}, {"kind": "Pod"}, {"apiVersion": None, "kind": ""}):
            r = await self.client.patch(CM + "/a", {**body, "data": {"k": "s"}},
                                        content_type="application/strategic-merge-patch+json")
            self.assertEqual((r.code, r.body["apiVersion"], r.body["kind"], r.body["data"]),
                             (200, "v1", "ConfigMap", {"k": "s"}), body)
        r = await self.client.patch(CM + "/a", {"kind": [[[]]]}, content_type="application/strategic-merge-patch+json")
        self.assertEqual(r.code, 422)  # not a string: the conversion fails
        undeterminable = "the name of the object (a based on URL) was undeterminable: name must be provided"
        for body, content_type in (({"apiVersion": ""}, "application/merge-patch+json"),
                                   ({"apiVersion": None}, "application/merge-patch+json"),
                                   ([{"op": "remove", "path": "/apiVersion"}], "application/json-patch+json")):
            r = await self.client.patch(CM + "/a", body, content_type=content_type)
            self.assertEqual((r.code, r.body["reason"], r.body["message"]), (400, "BadRequest", undeterminable), body)
        r = await self.client.patch(CM + "/a", {"kind": None, "data": {"k": "m"}})
        self.assertEqual((r.code, r.body["kind"], r.body["data"]), (200, "ConfigMap", {"k": "m"}))
        r = await self.client.patch(CM + "/a", {"apiVersion": "v2"})
        self.assertEqual(r.code, 422)

    @run
    async def test_a_patch_is_decoded_once_the_object_is_read(self):
        """kube-apiserver v1.32.13's answers (fieldValidation Warn, the default): a missing object is a 404
        whatever the patch; an existing one gets each patcher's own decoding error."""
        await self.client.post(CM, cm("a", {"k": "v"}))
        smp, merge, json_patch = ("application/strategic-merge-patch+json", "application/merge-patch+json",
                                  "application/json-patch+json")
        answers = {
            (smp, b""): (400, "unexpected end of JSON input"),
            (smp, b"null"): (200, None),
            (smp, b"[5]"): (400, "json: cannot unmarshal array into Go value of type map[string]interface {}"),
            (smp, b"{"): (400, "unexpected end of JSON input"),
            (merge, b" "): (400, "error decoding patch: unexpected end of JSON input"),
            (merge, b"null"): (400, "Invalid JSON Patch"),
            (merge, b'"s"'): (400, "error decoding patch: json: cannot unmarshal string into Go value of type "
                                   "map[string]interface {}"),
            (json_patch, b"null"): (200, None),
            (json_patch, b"{}"): (400, "error decoding patch: json: cannot unmarshal object into Go value of type "
                                       "[]handlers.jsonPatchOp"),
            (json_patch, b"[5]"): (400, "error decoding patch: json: cannot unmarshal number into Go value of type "
                                        "handlers.jsonPatchOp"),
            (json_patch, b'[{"op": 5}]'): (400, "error decoding patch: json: cannot unmarshal number into Go struct "
                                                "field jsonPatchOp.op of type string"),
        }
        for (content_type, body), (code, message) in answers.items():
            r = await self.client.patch(CM + "/a", raw=body, content_type=content_type)
            self.assertEqual((r.code, r.body.get("message")), (code, message), (content_type, body))
            r = await self.client.patch(CM + "/missing", raw=body, content_type=content_type)
            self.assertEqual((r.code, r.body["message"]), (404, 'configmaps "missing" not found'), (content_type, body))
        self.assertEqual((await self.client.get(CM + "/a")).body["data"], {"k": "v"})

    @run
    async def test_json_patch_replaces_the_whole_document(self):
        """evanphx/json-patch v4 as kube-apiserver v1.32.13 applies it: ``replace`` at ``""`` with an object
        replaces the document, with a scalar or null changes nothing; an array does not decode into an object
        (422, the patched JSON quoted as Go's %q quotes it)."""
        await self.client.post(CM, cm("a", {"k": "v"}))
        whole = cm("a", {"x": "y"})
        for value, data in ((5, {"k": "v"}), (None, {"k": "v"}), (whole, {"x": "y"})):
            r = await self.client.patch(CM + "/a", [{"op": "replace", "path": "", "value": value}],
                                        content_type="application/json-patch+json")
            self.assertEqual((r.code, r.body.get("data")), (200, data), value)
        r = await self.client.patch(CM + "/a", [{"op": "replace", "path": "", "value": []}],
                                    content_type="application/json-patch+json")
        self.assertEqual((r.code, r.body["message"]), (
            422, ' "" is invalid: patch: Invalid value: "[]": couldn\'t get version/kind; json parse error: json: '
            'cannot unmarshal array into Go value of type struct { APIVersion string "json:\\"apiVersion,omitempty'
            '\\""; Kind string "json:\\"kind,omitempty\\"" }'))

    @run
    async def test_cbor_apply_patch_is_415(self):
        """kapiserver does not serve CBOR, so (like upstream without the CBOR gate) it takes no CBOR apply."""
        await self.client.post(CM, cm("a"))
        r = await self.client.patch(CM + "/a", raw=b"\xa0", content_type="application/apply-patch+cbor")
        self.assertEqual(r.code, 415)
        self.assertEqual(r.body["reason"], "UnsupportedMediaType")
        self.assertEqual(r.body["message"], "the body of the request was in an unknown format - accepted media "
                         "types include: application/json-patch+json, application/merge-patch+json, "
                         "application/strategic-merge-patch+json, application/apply-patch+yaml")

    @run
    async def test_concurrent_patches_lose_nothing(self):
        await self.client.post(CM, cm("a"))
        results = await defer.gatherResults([
            self.client.patch(CM + "/a", [{"op": "add", "path": f"/data/k{i}", "value": str(i)}],
                              content_type="application/json-patch+json") for i in range(20)])
        self.assertEqual([r.code for r in results], [200] * 20)
        data = (await self.client.get(CM + "/a")).body["data"]
        self.assertEqual(len(data), 20)


class DeleteTests(ServerTestCase):
    @run
    async def test_delete_returns_success_status(self):
        created = (await self.client.post(CM, cm("a"))).body
        r = await self.client.delete(CM + "/a")
        self.assertEqual(r.code, 200)
        self.assertEqual(r.body["status"], "Success")
        self.assertEqual(r.body["details"]["uid"], created["metadata"]["uid"])
        self.assertEqual((await self.client.get(CM + "/a")).code, 404)
        self.assertEqual((await self.client.delete(CM + "/a")).code, 404)

    @run
    async def test_preconditions(self):
        """kube-apiserver v1.32.13's BeforeDelete answers: the conflict names the kind."""
        created = (await self.client.post(CM, cm("a"))).body
        md = created["metadata"]
        r = await self.client.delete(CM + "/a", {"preconditions": {"uid": "other"}})
        self.assertEqual((r.code, r.body["message"], r.body["details"]), (
            409, 'Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (other) does not match '
            f"the UID in record ({md['uid']}). The object might have been deleted and then recreated",
            {"name": "a", "kind": "ConfigMap"}))
        r = await self.client.delete(CM + "/a", {"preconditions": {"resourceVersion": "1"}})
        self.assertEqual((r.code, r.body["message"]), (
            409, 'Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the precondition (1) does '
            f"not match the ResourceVersion in record ({md['resourceVersion']}). The object might have been modified"))
        leases = await self.client.post(LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                 "metadata": {"name": "l"}})
        r = await self.client.delete(LEASES + "/l", {"preconditions": {"uid": "q"}})
        self.assertEqual((r.code, r.body["details"]), (409, {"name": "l", "group": "coordination.k8s.io",
                                                             "kind": "Lease"}))
        self.assertTrue(r.body["message"].startswith(
            'Operation cannot be fulfilled on Lease.coordination.k8s.io "l": the UID in the precondition (q)'))
        self.assertEqual((await self.client.get(LEASES + "/l")).body["metadata"]["uid"],
                         leases.body["metadata"]["uid"])
        r = await self.client.delete(CM + "/a", {"preconditions": {"uid": created["metadata"]["uid"]},
                                                 "propagationPolicy": "Foreground"})
        self.assertEqual(r.code, 200)

    @run
    async def test_bad_propagation_policy(self):
        await self.client.post(CM, cm("a"))
        r = await self.client.delete(CM + "/a", {"propagationPolicy": "Sideways"})
        self.assertEqual(r.code, 422)

    @run
    async def test_a_body_s_options_leave_the_query_s_unread(self):
        """As upstream's DeleteResource: options come from the body when there is one (the query's,
        even an invalid or a dry-run one, are not read), else from the query."""
        for name in ("a", "b", "c"):
            await self.client.post(CM, cm(name))
        r = await self.client.delete(CM + "/a?propagationPolicy=All&dryRun=-1", {"kind": "DeleteOptions"})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((await self.client.get(CM + "/a")).code, 404)
        r = await self.client.delete(CM + "/b?dryRun=All", {"gracePeriodSeconds": 0})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((await self.client.get(CM + "/b")).code, 404, "not a dry run: the body said none")
        r = await self.client.delete(CM + "/c?dryRun=-1")
        self.assertEqual((r.code, r.body["message"]), (422, 'DeleteOptions.meta.k8s.io "" is invalid: dryRun: '
                                                              'Unsupported value: []string{"-1"}: supported values: "All"'))
        r = await self.client.delete(CM + "/c?dryRun=All")
        self.assertEqual(r.code, 200)
        self.assertEqual((await self.client.get(CM + "/c")).code, 200, "a dry run")
        r = await self.client.delete(CM + "?propagationPolicy=All&labelSelector=none", {"dryRun": ["All"]})
        self.assertEqual(r.code, 200, r.body)

    @run
    async def test_an_update_cannot_start_a_deletion(self):
        """A deletion timestamp or grace period set by an update is immutable, as upstream's BeforeUpdate
        and ValidateObjectMetaUpdate make it (they were dropped silently)."""
        created = (await self.client.post(CM, cm("a"))).body
        for field, value, shown in (("deletionGracePeriodSeconds", 1, "1"),
                                    ("deletionTimestamp", "2026-01-02T03:04:05Z", "2026-01-02 03:04:05 +0000 UTC")):
            body = {**created, "metadata": {**created["metadata"], field: value}}
            r = await self.client.put(CM + "/a", body)
            self.assertEqual((r.code, r.body["message"]), (422, f'ConfigMap "a" is invalid: metadata.{field}: '
                                                                f'Invalid value: {shown}: field is immutable'))
        await self.client.post(CM, cm("f", finalizers=["example.com/hold"]))
        deleting = (await self.client.delete(CM + "/f")).body
        r = await self.client.put(CM + "/f", {**deleting, "metadata": {
            k: v for k, v in deleting["metadata"].items() if k not in ("deletionTimestamp", "deletionGracePeriodSeconds")}})
        self.assertEqual(r.code, 200, r.body)  # left out: kept, as upstream keeps them
        self.assertEqual(r.body["metadata"]["deletionTimestamp"], deleting["metadata"]["deletionTimestamp"])
        self.assertEqual(r.body["metadata"]["deletionGracePeriodSeconds"], 0)

    @run
    async def test_finalizers_hold_the_object(self):
        await self.client.post(CM, cm("f", finalizers=["example.com/hold"]))
        r = await self.client.delete(CM + "/f")
        self.assertEqual(r.code, 200)
        self.assertTrue(r.body["metadata"]["deletionTimestamp"])
        self.assertEqual(r.body["metadata"]["deletionGracePeriodSeconds"], 0)
        got = await self.client.get(CM + "/f")
        self.assertEqual(got.code, 200)
        # no new finalizers on a deleting object
        r = await self.client.patch(CM + "/f", {"metadata": {"finalizers": ["example.com/hold", "x.io/new"]}})
        self.assertEqual(r.code, 422)
        # emptying the finalizers removes it
        r = await self.client.patch(CM + "/f", {"metadata": {"finalizers": None}})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual((await self.client.get(CM + "/f")).code, 404)

    @run
    async def test_deletecollection_with_selectors(self):
        for i in range(4):
            await self.client.post(CM, cm(f"c{i}", labels={"app": "x" if i % 2 else "y"}))
        r = await self.client.delete(CM + "?labelSelector=app%3Dx")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(sorted(i["metadata"]["name"] for i in r.body["items"]), ["c1", "c3"])
        left = (await self.client.get(CM + "?labelSelector=app")).body["items"]
        self.assertEqual(sorted(i["metadata"]["name"] for i in left), ["c0", "c2"])
        r = await self.client.delete(CM + "?fieldSelector=metadata.name%3Dc0")
        self.assertEqual([i["metadata"]["name"] for i in r.body["items"]], ["c0"])

    @run
    async def test_bootstrap_namespace_cannot_be_deleted(self):
        r = await self.client.delete("/api/v1/namespaces/default")
        self.assertEqual(r.code, 403)


class ListTests(ServerTestCase):
    async def _fill(self, n=7):
        for i in range(n):
            await self.client.post(CM, cm(f"item{i}", labels={"idx": str(i), "even": str(i % 2 == 0).lower()}))

    @run
    async def test_label_selectors(self):
        await self._fill()
        cases = {"even=true": 4, "even==false": 3, "even!=true": 3, "idx in (1,2,9)": 2, "idx notin (1,2)": 5,
                 "idx": 7, "!idx": 0, "even=true,idx in (0,2)": 2}
        for selector, count in cases.items():
            r = await self.client.get(CM + "?labelSelector=" + selector.replace(" ", "%20"))
            self.assertEqual(r.code, 200, (selector, r.body))
            names = [i["metadata"]["name"] for i in r.body["items"] if i["metadata"]["name"].startswith("item")]
            self.assertEqual(len(names), count, selector)

    @run
    async def test_integer_parameters_parse_as_go_parse_int(self):
        """strconv.ParseInt takes no spaces, underscores or empty values (Python's int() would)."""
        for query, value in (("limit=%201", " 1"), ("limit=1_0", "1_0"), ("limit=", ""),
                             ("timeoutSeconds=%201", " 1")):
            # before the resourceVersion: a future revision would otherwise be a 504
            r = await self.client.get(CM + "?resourceVersion=99999999999999&" + query)
            self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                             (400, "BadRequest", f'strconv.ParseInt: parsing "{value}": invalid syntax'), query)
        r = await self.client.get(CM + "?limit=99999999999999999999")
        self.assertEqual((r.code, r.body["message"]),
                         (400, 'strconv.ParseInt: parsing "99999999999999999999": value out of range'))
        await self._fill(3)
        r = await self.client.get(CM + "?limit=%2B2")
        self.assertEqual((r.code, len(r.body["items"])), (200, 2))

    @run
    async def test_watch_parameter_is_true_unless_false_or_0(self):
        """runtime.Convert_Slice_string_To_bool: ``t``, ``yes``, ``y`` all ask for a watch."""
        for value in ("t", "yes", "Y", "1", "TRUE"):
            r = await self.client.get(CM + "?timeoutSeconds=1&watch=" + value)
            self.assertEqual(r.code, 200)
            self.assertEqual(json.loads(r.raw.splitlines()[0])["type"], "ADDED", value)
        for value in ("0", "false", "FaLsE"):
            r = await self.client.get(CM + "?watch=" + value)
            self.assertEqual((r.code, r.body["kind"]), (200, "ConfigMapList"), value)

    @run
    async def test_field_selectors(self):
        await self._fill(3)
        r = await self.client.get(CM + "?fieldSelector=metadata.name%3Ditem1")
        self.assertEqual([i["metadata"]["name"] for i in r.body["items"]], ["item1"])
        r = await self.client.get("/api/v1/configmaps?fieldSelector=metadata.namespace%3Ddefault,"
                                  "metadata.name!%3Ditem1")
        self.assertNotIn("item1", [i["metadata"]["name"] for i in r.body["items"]])
        r = await self.client.get(CM + "?fieldSelector=spec.nothing%3Dx")
        self.assertEqual(r.code, 400)
        # ConfigMaps have no field label conversion upstream: the default one's message
        self.assertEqual(r.body["message"], '"spec.nothing" is not a known field selector: only "metadata.name", '
                                            '"metadata.namespace"')

    @run
    async def test_pagination_returns_everything_once(self):
        await self._fill(7)
        seen, token, pages = [], "", 0
        while True:
            r = await self.client.get(CM + "?labelSelector=idx&limit=3" + (f"&continue={token}" if token else ""))
            self.assertEqual(r.code, 200, r.body)
            seen += [i["metadata"]["name"] for i in r.body["items"]]
            pages += 1
            token = r.body["metadata"].get("continue", "")
            if not token:
                break
        self.assertEqual(sorted(seen), [f"item{i}" for i in range(7)])
        self.assertEqual(pages, 3)

    @run
    async def test_remaining_item_count(self):
        await self._fill(5)
        r = await self.client.get(CM + "?limit=2")
        total = len((await self.client.get(CM)).body["items"])
        self.assertEqual(r.body["metadata"]["remainingItemCount"], total - 2)

    @run
    async def test_list_resource_version_and_exact(self):
        await self._fill(2)
        first = (await self.client.get(CM)).body
        rv = first["metadata"]["resourceVersion"]
        await self.client.post(CM, cm("later"))
        exact = await self.client.get(CM + f"?resourceVersion={rv}&resourceVersionMatch=Exact")
        self.assertEqual(exact.code, 200, exact.body)
        self.assertEqual(len(exact.body["items"]), len(first["items"]))
        self.assertEqual(exact.body["metadata"]["resourceVersion"], rv)
        r = await self.client.get(CM + "?resourceVersionMatch=Bogus&resourceVersion=1")
        self.assertEqual(r.code, 422)
        # a resourceVersion parses as Go's strconv.ParseUint: no sign, spaces or underscores
        bad = await self.client.get(CM + "?resourceVersion=abc")
        for value in ("%2B1", "1_0", "%201"):
            r = await self.client.get(CM + f"?resourceVersion={value}")
            self.assertEqual((r.code, r.body["reason"]), (bad.code, bad.body["reason"]), value)

    @run
    async def test_selectors_of_nothing_select_everything(self):
        """kube-apiserver v1.32.13: a NUL byte ends a label selector; a field term without field or value is
        everything; a value without a field is still an unknown field."""
        await self._fill(2)
        everything = len((await self.client.get(CM)).body["items"])
        for query in ("labelSelector=%00", "fieldSelector=%3D", "fieldSelector=%21%3D"):
            r = await self.client.get(CM + "?" + query)
            self.assertEqual((r.code, len(r.body["items"])), (200, everything), query)
        r = await self.client.get(CM + "?fieldSelector=%3Dx")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (
            400, "BadRequest", '"" is not a known field selector: only "metadata.name", "metadata.namespace"'))

    @run
    async def test_bad_continue_token(self):
        """Upstream's DecodeContinue (RawURLEncoding: no padding) and the etcd store's 400; kube-apiserver
        v1.32.13's messages for the same tokens."""
        await self._fill(2)
        token = (await self.client.get(CM + "?limit=1")).body["metadata"]["continue"]
        padded = base64.urlsafe_b64encode(base64.urlsafe_b64decode(token + "==")).decode()
        outside = base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":5,"start":"../x"}').decode().rstrip("=")
        for query, message in (
                ("garbage", "invalid character '\\u0081' looking for beginning of value"),
                ("abcde", "illegal base64 data at input byte 4"),
                (padded.replace("=", "%3D"), f"illegal base64 data at input byte {len(padded.rstrip('='))}"),
                ("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOiJ4In0",  # rv 0
                 "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
                (outside, "../x")):
            r = await self.client.get(CM + f"?limit=1&continue={query}")
            self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                             (400, "BadRequest", f"invalid continue token: continue key is not valid: {message}"))
        self.assertEqual((await self.client.get(CM + f"?limit=1&continue={token}")).code, 200)

    @run
    async def test_resource_version_beside_a_continue_token(self):
        """kube-apiserver v1.32.13: the stored list refuses a resourceVersion other than "0" beside a token
        (400, after the token's own checks); a watch does not read the token; componentstatuses, which are
        not stored, list whatever the token."""
        await self._fill(2)
        page = (await self.client.get(CM + "?limit=1")).body["metadata"]
        token = page["continue"]
        r = await self.client.get(CM + f"?limit=1&continue={token}&resourceVersion=5")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (
            400, "BadRequest", "specifying resource version is not allowed when using continue"))
        r = await self.client.get(CM + "?limit=1&continue=abcde&resourceVersion=5")
        self.assertEqual((r.code, r.body["message"]), (
            400, "invalid continue token: continue key is not valid: illegal base64 data at input byte 4"))
        self.assertEqual((await self.client.get(CM + f"?limit=1&continue={token}&resourceVersion=0")).code, 200)
        r = await self.client.get("/api/v1/componentstatuses?continue=aaaa&resourceVersion=5")
        self.assertEqual((r.code, r.body["kind"]), (200, "ComponentStatusList"))
        r = await self.client.get(CM + f"?watch=1&timeoutSeconds=1&continue={token}"
                                       f"&resourceVersion={page['resourceVersion']}")
        self.assertEqual((r.code, r.raw), (200, b""))  # nothing written since

    @run
    async def test_compacted_continue_token_is_410_with_fresh_token(self):
        await self._fill(4)
        r = await self.client.get(CM + "?limit=1")
        token = r.body["metadata"]["continue"]
        for i in range(3):
            await self.client.patch(CM + "/item0", {"data": {"n": str(i)}})
        current = await self.server.storage.current_revision()
        await self.server.storage.compact(current)
        r = await self.client.get(CM + f"?limit=1&continue={token}")
        self.assertEqual(r.code, 410)
        self.assertEqual(r.body["reason"], "Expired")
        fresh = r.body["metadata"]["continue"]
        r = await self.client.get(CM + f"?limit=100&continue={fresh}")
        self.assertEqual(r.code, 200, r.body)
        self.assertTrue(r.body["items"])

    @run
    async def test_table_output(self):
        await self.client.post(CM, cm("t", {"a": "1", "b": "2"}))
        r = await self.client.get(CM, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.body["kind"], "Table")
        names = [c["name"] for c in r.body["columnDefinitions"]]
        self.assertEqual(names[:3], ["Name", "Data", "Age"])
        row = [row for row in r.body["rows"] if row["cells"][0] == "t"][0]
        self.assertEqual(row["cells"][1], 2)
        self.assertEqual(row["object"]["kind"], "PartialObjectMetadata")

    @run
    async def test_partial_object_metadata(self):
        await self.client.post(CM, cm("p", {"a": "1"}))
        r = await self.client.get(CM + "/p", headers={
            "Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"})
        self.assertEqual(r.body["kind"], "PartialObjectMetadata")
        self.assertNotIn("data", r.body)
        r = await self.client.get(CM, headers={
            "Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"})
        self.assertEqual(r.body["kind"], "PartialObjectMetadataList")


class WatchTests(ServerTestCase):
    settings = {"bookmark_interval_seconds": 0.2}
    watch_path = CM

    async def _watch(self, query: str) -> list[dict]:
        """All events of a watch that the server ends (timeoutSeconds or an ERROR)."""
        import treq
        events: list[dict] = []
        buf = bytearray()
        response = await treq.get(self.server.url + self.watch_path + "?watch=true&" + query, unbuffered=True,
                                  persistent=False)
        self.assertEqual(response.code, 200)

        def collect(chunk: bytes):
            buf.extend(chunk)
            while b"\n" in buf:
                line, _, rest = bytes(buf).partition(b"\n")
                buf[:] = rest
                events.append(json.loads(line))
        await treq.collect(response, collect)
        return events

    @run
    async def test_a_watch_asking_for_a_list_shape(self):
        """Negotiated as upstream's list route: the options are checked first (kube-apiserver v1.32.13's 400s and
        422s), and a watch's events are single objects, so the PartialObjectMetadataList clause is passed over for
        a later one, or refused (406) when it is the only one (upstream streams nothing there)."""
        poml = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1&fieldSelector=x%3Cy", headers={"Accept": poml})
        self.assertEqual((r.code, r.body["message"]), (400, "invalid selector: 'x<y'; can't understand 'x<y'"))
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1&resourceVersionMatch=Exact", headers={"Accept": poml})
        self.assertEqual(r.code, 422)
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1", headers={"Accept": poml})
        self.assertEqual((r.code, r.body["reason"]), (406, "NotAcceptable"))
        await self.client.post(CM, cm("seen"))
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1", headers={"Accept": poml + ", application/json"})
        self.assertEqual(r.code, 200)
        self.assertIn("seen", [json.loads(line)["object"]["metadata"]["name"] for line in r.raw.splitlines()])

    @run
    async def test_watch_from_resource_version_gets_exactly_later_events(self):
        a = (await self.client.post(CM, cm("w1"))).body
        rv = a["metadata"]["resourceVersion"]
        await self.client.patch(CM + "/w1", {"data": {"x": "1"}})
        await self.client.post(CM, cm("w2"))
        await self.client.delete(CM + "/w1")
        events = await self._watch(f"resourceVersion={rv}&timeoutSeconds=2"
                                   "&fieldSelector=metadata.name!%3Dkube-root-ca.crt")
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("MODIFIED", "w1"), ("ADDED", "w2"), ("DELETED", "w1")])
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        self.assertEqual(rvs, sorted(rvs))
        self.assertTrue(all(r > int(rv) for r in rvs))

    @run
    async def test_watch_without_rv_starts_with_current_state(self):
        await self.client.post(CM, cm("s1"))
        events = await self._watch("fieldSelector=metadata.name%3Ds1&timeoutSeconds=1")
        self.assertEqual(events[0]["type"], "ADDED")
        self.assertEqual(events[0]["object"]["metadata"]["name"], "s1")

    @run
    async def test_cluster_wide_watch_pinned_by_field_selector_to_one_object(self):
        start = (await self.client.get(CM)).body["metadata"]["resourceVersion"]
        for name in ("p1", "p10", "p2"):  # p10: the same name prefix, another object
            await self.client.post(CM, cm(name))
        await self.client.patch(CM + "/p1", {"data": {"k": "v"}})
        await self.client.patch(CM + "/p10", {"data": {"k": "v"}})
        self.watch_path = "/api/v1/configmaps"
        events = await self._watch(f"resourceVersion={start}&timeoutSeconds=1"
                                   "&fieldSelector=metadata.namespace%3Ddefault,metadata.name%3Dp1")
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events],
                         [("ADDED", "p1"), ("MODIFIED", "p1")])
        events = await self._watch("timeoutSeconds=1&fieldSelector=metadata.namespace%3Ddefault")
        self.assertEqual(sorted(e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"),
                         ["kube-root-ca.crt", "p1", "p10", "p2"])

    @run
    async def test_cluster_wide_watch_of_one_name_sees_it_in_every_namespace(self):
        # the pinned name is checked on each event's key before decoding (the API server's
        # kube-root-ca.crt informer watches this way): every namespace's object, no other
        start = (await self.client.get(CM)).body["metadata"]["resourceVersion"]
        await self.client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": "other"}})
        other = "/api/v1/namespaces/other/configmaps"
        for path, name in ((CM, "n1"), (CM, "n10"), (other, "n1"), (other, "x-n1")):
            await self.client.post(path, cm(name))
        await self.client.patch(other + "/n1", {"data": {"k": "v"}})
        await self.client.delete(CM + "/n1")
        await self.client.delete(CM + "/n10")
        self.watch_path = "/api/v1/configmaps"
        events = await self._watch(f"resourceVersion={start}&timeoutSeconds=1&fieldSelector=metadata.name%3Dn1")
        self.assertEqual([(e["type"], e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"])
                          for e in events],
                         [("ADDED", "default", "n1"), ("ADDED", "other", "n1"), ("MODIFIED", "other", "n1"),
                          ("DELETED", "default", "n1")])

    @run
    async def test_compacted_watch_is_410_error_event(self):
        a = (await self.client.post(CM, cm("old"))).body
        for i in range(3):
            await self.client.patch(CM + "/old", {"data": {"n": str(i)}})
        await self.server.storage.compact(await self.server.storage.current_revision())
        events = await self._watch(f"resourceVersion={a['metadata']['resourceVersion']}&timeoutSeconds=5")
        self.assertEqual(events[0]["type"], "ERROR")
        self.assertEqual(events[0]["object"]["code"], 410)
        self.assertEqual(events[0]["object"]["reason"], "Expired")

    @run
    async def test_selector_transitions(self):
        await self.client.post(CM, cm("m", labels={"team": "a"}))
        start = (await self.client.get(CM)).body["metadata"]["resourceVersion"]
        await self.client.patch(CM + "/m", {"metadata": {"labels": {"team": "b"}}})  # leaves selection
        await self.client.patch(CM + "/m", {"metadata": {"labels": {"team": "a"}}})  # enters again
        await self.client.patch(CM + "/m", {"data": {"k": "v"}})  # stays
        events = await self._watch(f"resourceVersion={start}&labelSelector=team%3Da&timeoutSeconds=2")
        self.assertEqual([e["type"] for e in events], ["DELETED", "ADDED", "MODIFIED"])

    @run
    async def test_bookmarks_and_initial_events_end(self):
        await self.client.post(CM, cm("b1"))
        events = await self._watch("sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                                   "&allowWatchBookmarks=true&timeoutSeconds=2")
        types = [e["type"] for e in events]
        self.assertIn("ADDED", types)
        first_bookmark = events[types.index("BOOKMARK")]
        annotations = first_bookmark["object"]["metadata"]["annotations"]
        self.assertEqual(annotations["k8s.io/initial-events-end"], "true")
        # client-go's WatchList decodes its list type from the blueprint: the empty list, as JSON here
        blueprint = json.loads(base64.b64decode(annotations["kubernetes.io/initial-events-list-blueprint"]))
        self.assertEqual(blueprint, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": None})
        self.assertLess(types.index("ADDED"), types.index("BOOKMARK"))

    @run
    async def test_send_initial_events_without_bookmarks_is_a_watch_list_without_them(self):
        """Upstream's validateWatchOptions asks for resourceVersionMatch=NotOlderThan, not for bookmarks."""
        await self.client.post(CM, cm("nb1"))
        events = await self._watch("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
        self.assertIn("nb1", [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"])
        self.assertNotIn("BOOKMARK", [e["type"] for e in events])
        r = await self.client.get(CM + "?watch=true&sendInitialEvents=true&resourceVersionMatch=Exact")
        self.assertEqual((r.code, r.body["message"]), (422, 'ListOptions.meta.k8s.io "" is invalid: '
                         '[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch '
                         'to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: '
                         '"NotOlderThan"]'))

    @run
    async def test_a_watch_from_now_is_a_watch_list(self):
        """Upstream's SetListOptionsDefaults (v1.32, WatchList on): a watch at resourceVersion "" or "0" asking
        for neither sendInitialEvents nor resourceVersionMatch is sendInitialEvents=true&resourceVersionMatch=
        NotOlderThan; a continue token is refused as for one, and its initial events end with a bookmark."""
        r = await self.client.get(CM + "?watch=true&continue=abc")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (422, "Invalid", (
            'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is '
            'forbidden when continue is provided')))
        await self.client.post(CM, cm("wl1"))
        events = await self._watch("allowWatchBookmarks=true&timeoutSeconds=1")
        types = [e["type"] for e in events]
        self.assertLess(types.index("ADDED"), types.index("BOOKMARK"))
        self.assertEqual(events[types.index("BOOKMARK")]["object"]["metadata"]["annotations"][
            "k8s.io/initial-events-end"], "true")

    @run
    async def test_negative_limit_and_timeout_are_not_refused(self):
        """Upstream validates neither: a negative limit does not page, a negative timeout ends a watch at once."""
        await self.client.post(CM, cm("neg"))
        r = await self.client.get(CM + "?limit=-1&timeoutSeconds=-1")
        self.assertEqual(r.code, 200, r.body)
        self.assertIn("neg", [item["metadata"]["name"] for item in r.body["items"]])
        self.assertNotIn("continue", r.body["metadata"])
        events = await defer.Deferred.fromCoroutine(self._watch(
            "resourceVersion=1&timeoutSeconds=-1")).addTimeout(HANG_GUARD, reactor)
        self.assertIsInstance(events, list)

    @run
    async def test_watch_stream_negotiation(self):
        """YAML has no stream form (upstream's NegotiateOutputMediaTypeStream); a watch-list cannot be a Table
        (watchListEndpointRestrictions): another acceptable type is chosen, else 406."""
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1", headers={"Accept": "application/yaml"})
        self.assertEqual((r.code, r.header("content-type")), (406, "application/yaml"))
        status = yaml.safe_load(r.raw)
        self.assertEqual((status["reason"], status["message"]), ("NotAcceptable", (
            "only the following media types are accepted: application/json;stream=watch, "
            "application/vnd.kubernetes.protobuf;stream=watch")))
        table = "application/json;as=Table;v=v1;g=meta.k8s.io"
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1&allowWatchBookmarks=true",
                                  headers={"Accept": table})
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (406, "NotAcceptable", (
            "only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf")))
        await self.client.post(CM, cm("tw"))
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1&allowWatchBookmarks=true",
                                  headers={"Accept": table + ",application/json"})
        self.assertEqual(r.code, 200)
        self.assertEqual(json.loads(r.raw.splitlines()[0])["object"]["kind"], "ConfigMap")
        r = await self.client.get(CM + "?watch=true&timeoutSeconds=1", headers={"Accept": table})
        self.assertEqual(json.loads(r.raw.splitlines()[0])["object"]["kind"], "Table")  # not a watch-list

    @run
    async def test_list_options_are_validated_in_upstream_order(self):
        # kube-apiserver v1.32.13's message for the same query
        r = await self.client.get(CM + "?sendInitialEvents=true&resourceVersionMatch=Bogus")
        self.assertEqual((r.code, r.body["reason"], r.body["message"]), (422, "Invalid", (
            'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is '
            'forbidden unless resourceVersion is provided, resourceVersionMatch: Unsupported value: "Bogus": '
            'supported values: "Exact", "NotOlderThan", "", sendInitialEvents: Forbidden: sendInitialEvents is '
            'forbidden for list]')))

    @run
    async def test_timeout_seconds_ends_the_watch(self):
        # Without its timeoutSeconds the server would hold the watch for its minimum request
        # timeout (half an hour and more): the guard against a hang tells the two apart.
        sent = reactor.seconds()
        events = await defer.Deferred.fromCoroutine(self._watch(
            "resourceVersion=0&timeoutSeconds=1&fieldSelector=metadata.name%3Dnone")).addTimeout(HANG_GUARD, reactor)
        self.assertEqual(events, [])
        self.assertGreaterEqual(reactor.seconds() - sent, 1.0)  # and not before the second was up

    @run
    async def test_legacy_watch_path(self):
        import treq
        a = (await self.client.post(CM, cm("legacy"))).body
        await self.client.patch(CM + "/legacy", {"data": {"x": "1"}})
        response = await treq.get(self.server.url + "/api/v1/watch/namespaces/default/configmaps?resourceVersion="
                                  + a["metadata"]["resourceVersion"] + "&timeoutSeconds=1"
                                  "&fieldSelector=metadata.name%3Dlegacy", persistent=False)
        body = await treq.content(response)
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
        self.assertEqual(events[0]["type"], "MODIFIED")

    @run
    async def test_legacy_watch_path_of_one_object(self):
        """Upstream's ListResource: the name in the path selects that object; a field selector
        must pin the same name."""
        import treq
        for name in ("one", "two"):
            await self.client.post(CM, cm(name))
        response = await treq.get(self.server.url + "/api/v1/watch/namespaces/default/configmaps/one"
                                  "?timeoutSeconds=1", persistent=False)
        body = await treq.content(response)
        events = [json.loads(line) for line in body.splitlines() if line.strip()]
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events], [("ADDED", "one")])
        for selector in ("metadata.name%3Dtwo", "metadata.name!%3Done", "metadata.namespace%3Ddefault"):
            r = await self.client.get("/api/v1/watch/namespaces/default/configmaps/one?fieldSelector=" + selector)
            self.assertEqual((r.code, r.body["reason"], r.body["message"]),
                             (400, "BadRequest", "fieldSelector metadata.name doesn't match requested name"),
                             selector)
        # the label conversion comes first
        r = await self.client.get("/api/v1/watch/namespaces/default/configmaps/one?fieldSelector=spec.x%3D1")
        self.assertEqual(r.body["message"], '"spec.x" is not a known field selector: only "metadata.name", '
                                            '"metadata.namespace"')
