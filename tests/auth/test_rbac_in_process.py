"""RBAC on an in-process server (authorization.modes [RBAC]): enforcement, bootstrap reconciliation,
aggregation, escalation checks and access reviews, driven over HTTP with impersonation.

The test client is anonymous; the tests first make system:anonymous a cluster-admin through the Store
(the server acting as itself), then act as other users with Impersonate-* headers.
"""
from __future__ import annotations

from twisted.internet import reactor

from kapiserver.auth.rbac.bootstrap_policy import GROUP
from kapiserver.auth.rbac.reconciliation import ensure_bootstrap_policy
from kapiserver.registry.options import DeleteOptions
from kapiserver.testing.cases import ServerTestCase, run

RBAC = f"/apis/{GROUP}/v1"
AUTHZ = "/apis/authorization.k8s.io/v1"


def as_user(name: str, group: str = "") -> dict:
    headers = {"Impersonate-User": name}
    if group:
        headers["Impersonate-Group"] = group
    return headers


def binding(name: str, role: str, subject: dict, kind: str = "ClusterRole") -> dict:
    return {"metadata": {"name": name}, "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role},
            "subjects": [{"apiGroup": GROUP, **subject} if subject["kind"] != "ServiceAccount" else subject]}


class RBACTestCase(ServerTestCase):
    settings = {"authorization_modes": ["RBAC"]}

    async def _start(self) -> None:
        await super()._start()
        store = self.server.api.served.store(GROUP, "v1", "clusterrolebindings")
        await store.create("", binding("test-anonymous-admin", "cluster-admin",
                                       {"kind": "User", "name": "system:anonymous"}))
        await self.wait_for(lambda: self._indexed("test-anonymous-admin"))
        await self.wait_for(self._aggregated)  # admin, edit and view are filled by the aggregation controller
        reply = await self.client.post("/api/v1/namespaces", {"metadata": {"name": "demo"}})
        self.assertEqual(reply.code, 201, reply.body)

    async def _aggregated(self) -> bool:
        roles = self.server.api.rbac.cluster_roles
        return all(roles.get(name) for name in ("admin", "edit", "view"))

    async def _indexed(self, name: str) -> bool:
        return name in self.server.api.rbac.cluster_role_bindings

    async def can(self, user: str, verb: str, resource: str, namespace: str = "demo", group: str = "",
                  api_group: str = "", subresource: str = "") -> bool:
        spec = {"user": user, "resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace,
                                                      "group": api_group, "subresource": subresource}}
        if group:
            spec["groups"] = [group]
        reply = await self.client.post(f"{AUTHZ}/subjectaccessreviews",
                                       {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                                        "spec": spec})
        self.assertEqual(reply.code, 201, reply.body)
        return reply.body["status"]["allowed"]

    async def grant(self, name: str, role: str, subject: dict, namespace: str = "demo",
                    kind: str = "ClusterRole") -> None:
        path = f"{RBAC}/namespaces/{namespace}/rolebindings" if namespace else f"{RBAC}/clusterrolebindings"
        reply = await self.client.post(path, binding(name, role, subject, kind))
        self.assertEqual(reply.code, 201, reply.body)
        key = (namespace, name) if namespace else name
        index = self.server.api.rbac
        await self.wait_for(lambda: self._has(index.role_bindings if namespace else index.cluster_role_bindings, key))

    async def _has(self, table: dict, key) -> bool:
        return key in table


class EnforcementTests(RBACTestCase):
    @run
    async def test_read_only_role_cannot_delete_secrets(self):
        reply = await self.client.post(f"{RBAC}/namespaces/demo/roles", {
            "metadata": {"name": "secret-reader"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]})
        self.assertEqual(reply.code, 201, reply.body)
        await self.grant("alice-reads", "secret-reader", {"kind": "User", "name": "alice"}, kind="Role")
        self.assertEqual((await self.client.post("/api/v1/namespaces/demo/secrets", {
            "metadata": {"name": "s"}, "stringData": {"a": "b"}})).code, 201)
        listed = await self.client.get("/api/v1/namespaces/demo/secrets", headers=as_user("alice"))
        self.assertEqual(listed.code, 200, listed.body)
        denied = await self.client.delete("/api/v1/namespaces/demo/secrets/s", headers=as_user("alice"))
        self.assertEqual((denied.code, denied.body["reason"], denied.body["message"]), (
            403, "Forbidden", 'secrets "s" is forbidden: User "alice" cannot delete resource "secrets" in API group '
                              '"" in the namespace "demo"'))
        self.assertEqual(denied.body["details"], {"name": "s", "kind": "secrets"})
        # elsewhere alice has nothing
        other = await self.client.get("/api/v1/namespaces/default/secrets", headers=as_user("alice"))
        self.assertEqual(other.code, 403)

    @run
    async def test_reviews_give_upstream_reasons(self):
        await self.grant("bob-view", "view", {"kind": "User", "name": "bob"})
        reply = await self.client.post(f"{AUTHZ}/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "bob", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "demo"}}})
        self.assertEqual(reply.body["status"], {
            "allowed": True, "reason": 'RBAC: allowed by RoleBinding "bob-view/demo" of ClusterRole "view" to User "bob"'})
        masters = await self.client.post(f"{AUTHZ}/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "root", "groups": ["system:masters"],
                     "resourceAttributes": {"verb": "delete", "resource": "nodes"}}})
        self.assertEqual(masters.body["status"], {"allowed": True})  # the privileged-group authorizer: no reason
        # a binding to a role that does not exist shows up in the denial's reason
        await self.grant("ghost", "no-such-role", {"kind": "User", "name": "carol"})
        denied = await self.client.get("/api/v1/namespaces/demo/pods", headers=as_user("carol"))
        self.assertEqual(denied.body["message"], 'pods is forbidden: User "carol" cannot list resource "pods" in API '
                                                 'group "" in the namespace "demo": RBAC: clusterrole.rbac.'
                                                 'authorization.k8s.io "no-such-role" not found')

    @run
    async def test_service_account_and_group_subjects_and_scale_subresource(self):
        await self.grant("ci", "edit", {"kind": "ServiceAccount", "name": "deployer"})  # namespace defaulted
        self.assertTrue(await self.can("system:serviceaccount:demo:deployer", "update", "deployments",
                                       api_group="apps", subresource="scale"))
        self.assertFalse(await self.can("system:serviceaccount:other:deployer", "update", "deployments",
                                        api_group="apps"))
        await self.grant("readers", "view", {"kind": "Group", "name": "system:serviceaccounts:demo"}, namespace="")
        self.assertTrue(await self.can("system:serviceaccount:demo:x", "list", "configmaps", namespace="kube-system",
                                       group="system:serviceaccounts:demo"))
        self.assertFalse(await self.can("system:serviceaccount:demo:x", "list", "secrets", namespace="kube-system",
                                        group="system:serviceaccounts:demo"))

    @run
    async def test_impersonation_needs_the_verb(self):
        await self.grant("dave-admin", "admin", {"kind": "User", "name": "dave"})
        # dave (namespace admin) may impersonate service accounts of demo only (upstream's edit role)
        self.assertTrue(await self.can("dave", "impersonate", "serviceaccounts"))
        self.assertFalse(await self.can("dave", "impersonate", "users", namespace=""))
        await self.client.post("/api/v1/namespaces/demo/serviceaccounts", {"metadata": {"name": "robot"}})
        # the impersonated user has nothing (not even discovery), so its own request is 403 -- but after
        # impersonation succeeded, which the message shows
        reply = await self.client.get("/api/v1/namespaces/demo/pods", headers={
            "Impersonate-User": "system:serviceaccount:demo:robot"})
        self.assertEqual(reply.body["message"], 'pods is forbidden: User "system:serviceaccount:demo:robot" cannot '
                                                'list resource "pods" in API group "" in the namespace "demo"')

    @run
    async def test_rules_review_lists_bound_rules(self):
        await self.grant("erin-pods", "pod-reader", {"kind": "User", "name": "erin"}, kind="Role")
        await self.client.post(f"{RBAC}/namespaces/demo/roles", {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], "resourceNames": ["p1"]}]})
        await self.wait_for(lambda: self._has(self.server.api.rbac.roles, ("demo", "pod-reader")))
        reply = await self.client.post(f"{AUTHZ}/selfsubjectrulesreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "demo"}}, headers=as_user("erin"))
        self.assertEqual(reply.code, 201, reply.body)
        status = reply.body["status"]
        self.assertIn({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p1"]},
                      status["resourceRules"])
        self.assertIn({"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                       "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}, status["resourceRules"])
        self.assertIn({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version",
                                                             "/version/"]}, status["nonResourceRules"])
        self.assertFalse(status["incomplete"])
        no_ns = await self.client.post(f"{AUTHZ}/selfsubjectrulesreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {}})
        self.assertEqual((no_ns.code, no_ns.body["message"]), (400, "no namespace on request"))


class EscalationTests(RBACTestCase):
    async def _start(self) -> None:
        await super()._start()
        await self.grant("frank-admin", "admin", {"kind": "User", "name": "frank"})

    @run
    async def test_role_broader_than_ones_own_is_refused(self):
        reply = await self.client.post(f"{RBAC}/namespaces/demo/roles", {
            "metadata": {"name": "everything"}, "rules": [{"apiGroups": [""], "resources": ["secrets", "resourcequotas"],
                                                            "verbs": ["get", "create"]}]}, headers=as_user("frank"))
        self.assertEqual((reply.code, reply.body["reason"]), (403, "Forbidden"))
        self.assertEqual(reply.body["message"],
                         'roles.rbac.authorization.k8s.io "everything" is forbidden: user "frank" (groups=['
                         '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
                         '{APIGroups:[""], Resources:["resourcequotas"], Verbs:["create"]}')
        within = await self.client.post(f"{RBAC}/namespaces/demo/roles", {
            "metadata": {"name": "secrets"}, "rules": [{"apiGroups": [""], "resources": ["secrets"],
                                                        "verbs": ["get", "create"]}]}, headers=as_user("frank"))
        self.assertEqual(within.code, 201, within.body)
        # updating it to more than frank holds is refused too
        within.body["rules"][0]["resources"].append("resourcequotas")
        grown = await self.client.put(f"{RBAC}/namespaces/demo/roles/secrets", within.body, headers=as_user("frank"))
        self.assertEqual(grown.code, 403, grown.body)
        # a PUT's uid is the stored role's precondition, for frank and for the cluster admin alike
        for headers in (as_user("frank"), {}):
            stale = dict(within.body, metadata={**within.body["metadata"], "uid": "other"})
            refused = await self.client.put(f"{RBAC}/namespaces/demo/roles/secrets", stale, headers=headers)
            self.assertEqual((refused.code, refused.body["reason"]), (409, "Conflict"), refused.body)
        created = await self.client.put(f"{RBAC}/namespaces/demo/roles/by-put", {"metadata": {"name": "by-put"}})
        self.assertEqual(created.code, 201, created.body)

    @run
    async def test_binding_cluster_admin_needs_its_permissions_or_bind(self):
        reply = await self.client.post(f"{RBAC}/namespaces/demo/rolebindings",
                                       binding("mine", "cluster-admin", {"kind": "User", "name": "frank"}),
                                       headers=as_user("frank"))
        self.assertEqual(reply.code, 403, reply.body)
        self.assertEqual(reply.body["message"],
                         'rolebindings.rbac.authorization.k8s.io "mine" is forbidden: user "frank" (groups=['
                         '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
                         '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}')
        # binding a role whose permissions frank holds is fine; a missing role is 404
        ok = await self.client.post(f"{RBAC}/namespaces/demo/rolebindings",
                                    binding("viewers", "view", {"kind": "User", "name": "gina"}),
                                    headers=as_user("frank"))
        self.assertEqual(ok.code, 201, ok.body)
        missing = await self.client.post(f"{RBAC}/namespaces/demo/rolebindings",
                                         binding("nope", "nope", {"kind": "User", "name": "gina"}, kind="Role"),
                                         headers=as_user("frank"))
        self.assertEqual((missing.code, missing.body["message"]),
                         (404, 'roles.rbac.authorization.k8s.io "nope" not found'))
        # the bind verb on cluster-admin lets frank bind it without holding it
        await self.client.post(f"{RBAC}/clusterroles", {
            "metadata": {"name": "bind-admin"}, "rules": [{"apiGroups": [GROUP], "resources": ["clusterroles"],
                                                           "verbs": ["bind"], "resourceNames": ["cluster-admin"]}]})
        await self.grant("frank-binds", "bind-admin", {"kind": "User", "name": "frank"})
        bound = await self.client.post(f"{RBAC}/namespaces/demo/rolebindings",
                                       binding("mine", "cluster-admin", {"kind": "User", "name": "frank"}),
                                       headers=as_user("frank"))
        self.assertEqual(bound.code, 201, bound.body)

    @run
    async def test_aggregation_rule_needs_cluster_admin_and_escalate_verb_allows(self):
        await self.grant("frank-roles", "admin", {"kind": "User", "name": "frank"}, namespace="")
        agg = {"metadata": {"name": "mine"},
               "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}
        reply = await self.client.post(f"{RBAC}/clusterroles", agg, headers=as_user("frank"))
        # frank cannot even create ClusterRoles (admin grants roles, not clusterroles)
        self.assertEqual(reply.code, 403)
        await self.client.post(f"{RBAC}/clusterroles", {
            "metadata": {"name": "clusterrole-writer"},
            "rules": [{"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["create"]}]})
        await self.grant("frank-writes", "clusterrole-writer", {"kind": "User", "name": "frank"}, namespace="")
        reply = await self.client.post(f"{RBAC}/clusterroles", agg, headers=as_user("frank"))
        self.assertEqual((reply.code, reply.body.get("message")),
                         (403, 'clusterroles.rbac.authorization.k8s.io "mine" is forbidden: must have cluster-admin '
                               'privileges to use the aggregationRule'))
        await self.client.post(f"{RBAC}/clusterroles", {
            "metadata": {"name": "escalator"},
            "rules": [{"apiGroups": [GROUP], "resources": ["clusterroles"], "verbs": ["escalate"]}]})
        await self.grant("frank-escalates", "escalator", {"kind": "User", "name": "frank"}, namespace="")
        reply = await self.client.post(f"{RBAC}/clusterroles", agg, headers=as_user("frank"))
        self.assertEqual(reply.code, 201, reply.body)


class BootstrapTests(RBACTestCase):
    @run
    async def test_aggregated_roles_follow_labels(self):
        async def view_rules():
            return (await self.client.get(f"{RBAC}/clusterroles/view")).body.get("rules") or []
        rules = await self.wait_for(view_rules)
        self.assertIn({"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["namespaces"]}, rules)
        self.assertFalse(any("secrets" in r.get("resources", []) for r in rules))
        widgets = {"verbs": ["get", "list"], "apiGroups": ["example.com"], "resources": ["widgets"]}
        reply = await self.client.post(f"{RBAC}/clusterroles", {
            "metadata": {"name": "widget-viewer", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [widgets]})
        self.assertEqual(reply.code, 201)

        async def propagated():
            roles = [(await self.client.get(f"{RBAC}/clusterroles/{n}")).body for n in ("view", "edit", "admin")]
            return all(widgets in (r.get("rules") or []) for r in roles)
        await self.wait_for(propagated)
        await self.client.delete(f"{RBAC}/clusterroles/widget-viewer")

        async def withdrawn():
            return widgets not in await view_rules()
        await self.wait_for(withdrawn)

    @run
    async def test_restart_reconciles_keeping_user_changes(self):
        roles = self.server.api.served.store(GROUP, "v1", "clusterroles")
        basic = await roles.get("", "system:basic-user")
        extra = {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}
        basic["rules"] = [extra]  # a user dropped the bootstrap rules and added one
        await roles.update("", "system:basic-user", basic)
        public = await roles.get("", "system:public-info-viewer")
        public["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"] = "false"
        public["rules"] = []
        await roles.update("", "system:public-info-viewer", public)
        await roles.delete("", "system:discovery", DeleteOptions())
        await ensure_bootstrap_policy(self.server.api.served.store, reactor)
        basic = await roles.get("", "system:basic-user")
        self.assertEqual(basic["rules"][0], extra)
        self.assertEqual(len(basic["rules"]), 4)  # the three bootstrap resources, broken down, came back
        self.assertEqual((await roles.get("", "system:public-info-viewer"))["rules"], [])  # protected
        self.assertEqual((await roles.get("", "system:discovery"))["metadata"]["labels"],
                         {"kubernetes.io/bootstrapping": "rbac-defaults"})
