"""RBAC objects over HTTP on an in-process server: defaults, validation, roleRef
immutability, columns and discovery (stored only; nothing is enforced)."""
from __future__ import annotations

from kapiserver.testing.cases import ServerTestCase, run

RBAC = "/apis/rbac.authorization.k8s.io/v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def messages(reply) -> list[str]:
    return [f"{c.get('field', '')}: {c['message']}" for c in reply.body["details"]["causes"]]


class RBACTests(ServerTestCase):
    async def make_ns(self, name: str = "team") -> None:
        reply = await self.client.post("/api/v1/namespaces", {"metadata": {"name": name}})
        self.assertEqual(reply.code, 201, reply.body)

    @run
    async def test_role_rules_are_validated(self):
        await self.make_ns()
        reply = await self.client.post(f"{RBAC}/namespaces/team/roles", {
            "metadata": {"name": "bad"},
            "rules": [{"apiGroups": [""], "resources": ["pods"]},
                      {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
                      {"verbs": ["get"]}]})
        self.assertEqual(reply.code, 422)
        self.assertEqual(reply.body["reason"], "Invalid")
        self.assertEqual(messages(reply), [
            "rules[0].verbs: Required value: verbs must contain at least one value",
            'rules[1].nonResourceURLs: Invalid value: []string{"/healthz"}: namespaced rules cannot apply to '
            'non-resource URLs',
            "rules[2].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[2].resources: Required value: resource rules must supply at least one resource"])
        ok = await self.client.post(f"{RBAC}/namespaces/team/roles", {
            "metadata": {"name": "reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
        self.assertEqual(ok.code, 201, ok.body)

    @run
    async def test_clusterrole_keeps_aggregation_rule_and_non_resource_urls(self):
        body = {"metadata": {"name": "agg"},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/agg": "true"}}]},
                "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]}
        reply = await self.client.post(f"{RBAC}/clusterroles", body)
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["aggregationRule"], body["aggregationRule"])
        self.assertEqual(reply.body["rules"], body["rules"])
        bad = await self.client.post(f"{RBAC}/clusterroles", {"metadata": {"name": "agg2"},
                                                              "aggregationRule": {}})
        self.assertEqual(messages(bad), ["aggregationRule.clusterRoleSelectors: Required value: at least one "
                                         "clusterRoleSelector required if aggregationRule is non-nil"])

    @run
    async def test_rolebinding_defaults_and_subject_rules(self):
        await self.make_ns()
        reply = await self.client.post(f"{RBAC}/namespaces/team/rolebindings", {
            "metadata": {"name": "rb"}, "roleRef": {"kind": "Role", "name": "reader"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "bot",
                                                              "namespace": "team"}]})
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["roleRef"]["apiGroup"], "rbac.authorization.k8s.io")
        self.assertEqual(reply.body["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io")
        self.assertNotIn("apiGroup", reply.body["subjects"][1])
        bad = await self.client.post(f"{RBAC}/namespaces/team/rolebindings", {
            "metadata": {"name": "bad"}, "roleRef": {"kind": "Deployment", "name": ""},
            "subjects": [{"kind": "Robot", "name": "r"}, {"kind": "ServiceAccount", "name": "sa", "apiGroup": "x"}]})
        self.assertEqual(bad.code, 422)
        self.assertEqual(messages(bad), [
            'roleRef.kind: Unsupported value: "Deployment": supported values: "Role", "ClusterRole"',
            "roleRef.name: Required value",
            'subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"',
            'subjects[1].apiGroup: Unsupported value: "x": supported values: ""'])

    @run
    async def test_clusterrolebinding_needs_clusterrole_and_sa_namespace(self):
        reply = await self.client.post(f"{RBAC}/clusterrolebindings", {
            "metadata": {"name": "crb"}, "roleRef": {"kind": "Role", "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot"}]})
        self.assertEqual(reply.code, 422)
        self.assertEqual(messages(reply), [
            'roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
            "subjects[0].namespace: Required value"])

    @run
    async def test_role_ref_cannot_change(self):
        await self.make_ns()
        path = f"{RBAC}/namespaces/team/rolebindings"
        created = await self.client.post(path, {"metadata": {"name": "rb"},
                                                "roleRef": {"kind": "Role", "name": "reader",
                                                            "apiGroup": "rbac.authorization.k8s.io"}})
        self.assertEqual(created.code, 201)
        reply = await self.client.patch(f"{path}/rb", {"roleRef": {"name": "writer"}})
        self.assertEqual(reply.code, 422)
        self.assertEqual(reply.body["message"],
                         'RoleBinding.rbac.authorization.k8s.io "rb" is invalid: roleRef: Invalid value: '
                         'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"Role", Name:"writer"}: '
                         'cannot change roleRef')
        subjects = await self.client.patch(f"{path}/rb", {"subjects": [{"kind": "Group", "name": "devs"}]})
        self.assertEqual(subjects.code, 200, subjects.body)

    @run
    async def test_binding_table_columns(self):
        await self.make_ns()
        await self.client.post(f"{RBAC}/namespaces/team/rolebindings", {
            "metadata": {"name": "rb"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                         {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "name": "bot", "namespace": "team"}]})
        reply = await self.client.get(f"{RBAC}/namespaces/team/rolebindings", headers={"Accept": TABLE})
        cols = [(c["name"], c["priority"]) for c in reply.body["columnDefinitions"]]
        self.assertEqual(cols, [("Name", 0), ("Role", 0), ("Age", 0), ("Users", 1), ("Groups", 1),
                                ("ServiceAccounts", 1)])
        cells = reply.body["rows"][0]["cells"]
        self.assertEqual([cells[0], cells[1]] + cells[3:], ["rb", "ClusterRole/view", "alice, bob", "devs", "team/bot"])
        await self.client.post(f"{RBAC}/clusterroles", {"metadata": {"name": "view"}})
        roles = await self.client.get(f"{RBAC}/clusterroles", headers={"Accept": TABLE})
        self.assertEqual([c["name"] for c in roles.body["columnDefinitions"]], ["Name", "Created At"])
        self.assertRegex(roles.body["rows"][0]["cells"][1], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    @run
    async def test_discovery_lists_the_group(self):
        reply = await self.client.get(RBAC)
        resources = {r["name"]: r for r in reply.body["resources"]}
        self.assertEqual(sorted(resources), ["clusterrolebindings", "clusterroles", "rolebindings", "roles"])
        self.assertTrue(resources["roles"]["namespaced"])
        self.assertFalse(resources["clusterroles"]["namespaced"])
        self.assertEqual(resources["rolebindings"]["kind"], "RoleBinding")
