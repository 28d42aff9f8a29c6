"""RBAC against a real kapiserver process (the default authorization.modes [RBAC], anonymous enabled).

Users are client certificates signed by the cluster CA; the service account uses its own bound token.  Every case of the matrix is asked three ways:
``kubectl auth can-i`` impersonating the user (as an administrator would), the user's own request over raw
HTTPS (2xx or a 403 worded as upstream's), and, for some, the official Python client.  The expected answers
are derived from upstream's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy, v1.32) and the
custom roles below, never from kapiserver's output.
"""
from __future__ import annotations

import json
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from typing import Any, Optional

from twisted.trial import unittest

from kapiserver.testing.cases import wait_for
from kapiserver.testing.process import E2E_CONFIG, ServerProcess, kubectl_binary, shared_server

NS, OTHER = "demo", "elsewhere"
API_PATHS = {"": "/api/v1", "apps": "/apis/apps/v1", "rbac.authorization.k8s.io": "/apis/rbac.authorization.k8s.io/v1",
             "authorization.k8s.io": "/apis/authorization.k8s.io/v1"}

SETUP = f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: {OTHER}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: {NS}}}
spec:
  containers: [{{name: web, image: nginx}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {NS}}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: nginx}}]}}
---
apiVersion: v1
kind: Secret
metadata: {{name: s, namespace: {NS}}}
stringData: {{password: hunter2}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: app-config, namespace: {NS}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: other-config, namespace: {NS}}}
---
# alice: a read-only Role
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: read-only, namespace: {NS}}}
rules:
- apiGroups: [""]
  resources: [secrets, configmaps]
  verbs: [get, list, watch]
---
# gina: one ConfigMap by name, pods and their logs
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: app-config-editor, namespace: {NS}}}
rules:
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [app-config]
  verbs: [get, update, patch]
- apiGroups: [""]
  resources: [pods, pods/log]
  verbs: [get]
---
# ivy: lists and watches one ConfigMap (as kube-scheduler its extension-apiserver-authentication)
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: app-config-reader, namespace: {NS}}}
rules:
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [app-config]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: ivy-app-config, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-config-reader}}
subjects: [{{kind: User, name: ivy}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: alice-read-only, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-only}}
subjects: [{{kind: User, name: alice}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: victor-view, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
subjects: [{{kind: User, name: victor}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: bob-edit, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}}
subjects: [{{kind: User, name: bob}}, {{kind: ServiceAccount, name: builder}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: carol-admin, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}}
subjects: [{{kind: User, name: carol}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: gina-app-config, namespace: {NS}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: app-config-editor}}
subjects: [{{kind: User, name: gina}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: e2e-dave-cluster-admin}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects: [{{kind: User, name: dave}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: e2e-qa-view}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
subjects: [{{kind: Group, name: qa}}]
"""

# users: name -> groups in their client certificate
USERS = {"alice": (), "victor": (), "bob": (), "carol": (), "dave": (), "eve": ("qa",), "frank": (), "gina": (),
         "harry": ("system:masters",), "ivy": (), "system:kube-scheduler": ()}
SA = f"system:serviceaccount:{NS}:builder"
ANONYMOUS = "system:anonymous"

# (user, verb, group, resource, subresource, name, namespace, allowed) -- from upstream's bootstrap policy
MATRIX: list[tuple[str, str, str, str, str, str, str, bool]] = [
    # a read-only Role
    ("alice", "get", "", "secrets", "", "s", NS, True),
    ("alice", "list", "", "configmaps", "", "", NS, True),
    ("alice", "delete", "", "secrets", "", "s", NS, False),
    ("alice", "create", "", "secrets", "", "", NS, False),
    ("alice", "list", "", "pods", "", "", NS, False),
    ("alice", "list", "", "secrets", "", "", OTHER, False),
    # view: reads everything but Secrets; no writes; not RBAC objects
    ("victor", "get", "", "pods", "", "web", NS, True),
    ("victor", "list", "", "secrets", "", "", NS, False),
    ("victor", "get", "", "secrets", "", "s", NS, False),
    ("victor", "create", "", "configmaps", "", "", NS, False),
    ("victor", "list", "apps", "deployments", "", "", NS, True),
    ("victor", "get", "apps", "deployments", "scale", "web", NS, True),
    ("victor", "patch", "apps", "deployments", "scale", "web", NS, False),
    ("victor", "list", "rbac.authorization.k8s.io", "rolebindings", "", "", NS, False),
    ("victor", "get", "", "namespaces", "", NS, NS, True),  # "read access to namespaces at the namespace scope"
    ("victor", "list", "", "pods", "", "", OTHER, False),
    # edit: writes workloads, Secrets included; no RBAC, no quotas
    ("bob", "create", "", "secrets", "", "", NS, True),
    ("bob", "list", "", "secrets", "", "", NS, True),
    ("bob", "delete", "", "pods", "", "web", NS, True),
    ("bob", "create", "apps", "deployments", "", "", NS, True),
    ("bob", "patch", "apps", "deployments", "scale", "web", NS, True),
    ("bob", "create", "rbac.authorization.k8s.io", "rolebindings", "", "", NS, False),
    ("bob", "create", "", "resourcequotas", "", "", NS, False),
    ("bob", "list", "", "resourcequotas", "", "", NS, True),
    ("bob", "list", "", "events", "", "", NS, True),
    ("bob", "create", "", "configmaps", "", "", OTHER, False),
    ("bob", "create", "", "namespaces", "", "", "", False),
    # admin: edit plus Roles and RoleBindings in its namespace
    ("carol", "create", "rbac.authorization.k8s.io", "rolebindings", "", "", NS, True),
    ("carol", "create", "rbac.authorization.k8s.io", "roles", "", "", NS, True),
    ("carol", "delete", "", "secrets", "", "s", NS, True),
    ("carol", "create", "", "resourcequotas", "", "", NS, False),
    ("carol", "list", "", "pods", "", "", OTHER, False),
    ("carol", "list", "", "nodes", "", "", "", False),
    # cluster-admin, bound to a user and through system:masters
    ("dave", "create", "", "namespaces", "", "", "", True),
    ("dave", "list", "", "nodes", "", "", "", True),
    ("dave", "delete", "", "secrets", "", "s", NS, True),
    ("harry", "delete", "", "pods", "", "web", NS, True),
    ("harry", "list", "rbac.authorization.k8s.io", "clusterroles", "", "", "", True),
    # view for a group, cluster-wide
    ("eve", "list", "", "pods", "", "", OTHER, True),
    ("eve", "list", "", "configmaps", "", "", "kube-system", True),
    ("eve", "list", "", "secrets", "", "", OTHER, False),
    ("eve", "create", "", "pods", "", "", NS, False),
    # no binding at all: system:basic-user and system:discovery only
    ("frank", "list", "", "pods", "", "", NS, False),
    ("frank", "create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", "", True),
    ("frank", "list", "", "namespaces", "", "", "", False),
    # a custom Role with resourceNames and a subresource
    ("gina", "get", "", "configmaps", "", "app-config", NS, True),
    ("gina", "patch", "", "configmaps", "", "app-config", NS, True),
    ("gina", "get", "", "configmaps", "", "other-config", NS, False),
    ("gina", "list", "", "configmaps", "", "", NS, False),
    ("gina", "get", "", "pods", "", "web", NS, True),
    ("gina", "delete", "", "pods", "", "web", NS, False),
    # a service account subject (namespace defaulted to the RoleBinding's)
    (SA, "create", "", "configmaps", "", "", NS, True),
    (SA, "list", "", "secrets", "", "", OTHER, False),
    # anonymous: nothing but system:public-info-viewer
    (ANONYMOUS, "list", "", "secrets", "", "", "", False),
    (ANONYMOUS, "list", "", "pods", "", "", NS, False),
    (ANONYMOUS, "get", "", "namespaces", "", NS, NS, False),
]

# what the real request sends when it creates something (dry run: nothing is kept)
CREATE_BODIES = {
    "secrets": {"metadata": {"name": "matrix-new"}},
    "configmaps": {"metadata": {"name": "matrix-new"}},
    "resourcequotas": {"metadata": {"name": "matrix-new"}, "spec": {"hard": {"pods": "1"}}},
    "namespaces": {"metadata": {"name": "matrix-new"}},
    "pods": {"metadata": {"name": "matrix-new"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
    "deployments": {"metadata": {"name": "matrix-new"}, "spec": {
        "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
    "roles": {"metadata": {"name": "matrix-new"}, "rules": [{"apiGroups": [""], "resources": ["pods"],
                                                             "verbs": ["get"]}]},
    "rolebindings": {"metadata": {"name": "matrix-new"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "someone"}]},
    "selfsubjectaccessreviews": {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                 "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}},
}


def forbidden_message(user: str, verb: str, group: str, resource: str, subresource: str, namespace: str) -> str:
    """responsewriters.forbiddenMessage, written from upstream's format."""
    what = f"{resource}/{subresource}" if subresource else resource
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return f'User "{user}" cannot {verb} resource "{what}" in API group "{group}" {where}'


_prepared: dict[str, Any] = {}


def rbac_server() -> ServerProcess:
    server = shared_server("rbac", extra_config=E2E_CONFIG)
    if _prepared.get("server") is not server:
        path = os.path.join(server.workdir, "rbac-setup.yaml")
        with open(path, "w") as f:
            f.write(SETUP)
        server.kubectl("apply", "-f", path)
        for user, groups in USERS.items():
            server.kubeconfig_for(user, groups)
        # the authorizer's informers see the bindings a moment later
        wait_for(lambda: server.kubectl("auth", "can-i", "list", "pods", "-n", OTHER, "--as", "eve", "--as-group", "qa",
                                        check=False).stdout.strip() == "yes")
        wait_for(lambda: server.kubectl("auth", "can-i", "delete", "pods", "-n", NS, "--as", "bob",
                                        check=False).stdout.strip() == "yes")
        # admin, edit and view get their rules from the aggregation controller
        wait_for(lambda: server.kubectl("auth", "can-i", "delete", "pods", "-n", NS, "--as", "carol",
                                        check=False).stdout.strip() == "yes")
        _prepared["server"] = server
    return server


class HTTPSClient:
    """Raw HTTPS as one user: a client certificate, or none (anonymous)."""

    def __init__(self, server: ServerProcess, user: Optional[str] = None) -> None:
        self.base = server.server_url
        self.context = ssl.create_default_context(cafile=os.path.join(server.workdir, "certs", "ca.crt"))
        self.headers = {"Accept": "application/json"}
        if user is not None:
            kubeconfig = server.kubeconfig_for(user, USERS.get(user, ()))
            self.context.load_cert_chain(kubeconfig.replace(".kubeconfig", ".crt"),
                                         kubeconfig.replace(".kubeconfig", ".key"))

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json"
                ) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=30) as resp:
                raw = resp.read()
                code = resp.status
        except urllib.error.HTTPError as e:
            raw, code = e.read(), e.code
        try:
            return code, json.loads(raw) if raw else None
        except ValueError:
            return code, raw.decode("utf-8", "replace")


def client_for(server: ServerProcess, user: str) -> HTTPSClient:
    if user == ANONYMOUS:
        return HTTPSClient(server)
    if user.startswith("system:serviceaccount:"):  # its own bound token (TokenRequest)
        namespace, name = user.split(":")[2:]
        if user not in _prepared:
            server.kubectl("-n", namespace, "create", "serviceaccount", name, check=False)
            _prepared[user] = server.kubectl("-n", namespace, "create", "token", name).stdout.strip()
        client = HTTPSClient(server)
        client.headers["Authorization"] = f"Bearer {_prepared[user]}"
        return client
    return HTTPSClient(server, user)


def real_request(client: HTTPSClient, verb: str, group: str, resource: str, subresource: str, name: str,
                 namespace: str) -> tuple[int, Any]:
    path = API_PATHS[group] + (f"/namespaces/{namespace}" if namespace and resource != "namespaces" else "")
    path += f"/{resource}" + (f"/{name}" if name else "") + (f"/{subresource}" if subresource else "")
    if verb in ("get", "list"):
        return client.request("GET", path)
    if verb == "create":
        return client.request("POST", path + "?dryRun=All", CREATE_BODIES[resource])
    if verb == "delete":
        return client.request("DELETE", path + "?dryRun=All")
    if verb == "patch":
        return client.request("PATCH", path + "?dryRun=All", {"metadata": {"annotations": {"touched": "yes"}}}
                              if not subresource else {"spec": {"replicas": 2}}, "application/merge-patch+json")
    raise AssertionError(verb)


class RBACMatrixTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = rbac_server()

    def can_i(self, user: str, verb: str, group: str, resource: str, subresource: str, name: str,
              namespace: str) -> subprocess.CompletedProcess:
        target = resource + (f".{group}" if group else "") + (f"/{name}" if name else "")
        args = ["auth", "can-i", verb, target]
        if subresource:
            args.append(f"--subresource={subresource}")
        args += ["-n", namespace] if namespace else []
        args += ["--as", user, *(a for g in USERS.get(user, ()) for a in ("--as-group", g))]
        return self.server.kubectl(*args, check=False)

    def test_matrix_kubectl_can_i_and_real_requests(self) -> None:
        self.assertGreaterEqual(len(MATRIX), 40)
        problems = []
        for case in MATRIX:
            user, verb, group, resource, subresource, name, namespace, allowed = case
            if user != ANONYMOUS:  # anonymous cannot create the review can-i sends
                answer = self.can_i(user, verb, group, resource, subresource, name, namespace)
                if answer.stdout.strip() != ("yes" if allowed else "no"):
                    problems.append(f"can-i {case}: {answer.stdout.strip()} {answer.stderr.strip()}")
            code, body = real_request(client_for(self.server, user), verb, group, resource, subresource, name,
                                      namespace)
            if allowed and not 200 <= code < 300:
                problems.append(f"request {case}: {code} {body}")
            if not allowed:
                message = forbidden_message(user, verb, group, resource, subresource,
                                            name if resource == "namespaces" and name else namespace)
                if code != 403 or not isinstance(body, dict) or message not in body.get("message", ""):
                    problems.append(f"request {case}: {code} {body}")
        self.assertEqual(problems, [])

    def test_subject_access_reviews_for_anonymous_and_subresources(self) -> None:
        from kubernetes import client as k8s
        api = k8s.AuthorizationV1Api(self.server.python_client())
        cases = [  # (user, groups, attributes, allowed) -- including what the real request cannot show
            (ANONYMOUS, ["system:unauthenticated"], {"verb": "get", "resource": "pods", "namespace": NS}, False),
            ("gina", [], {"verb": "get", "resource": "pods", "subresource": "log", "namespace": NS}, True),
            ("victor", [], {"verb": "get", "resource": "pods", "subresource": "log", "namespace": NS}, True),
            ("victor", [], {"verb": "get", "resource": "pods", "subresource": "exec", "namespace": NS}, False),
            ("bob", [], {"verb": "create", "resource": "pods", "subresource": "exec", "namespace": NS}, True),
            ("bob", [], {"verb": "impersonate", "resource": "serviceaccounts", "namespace": NS}, True),
            ("bob", [], {"verb": "impersonate", "resource": "users", "name": "dave"}, False),
        ]
        for user, groups, attributes, allowed in cases:
            review = api.create_subject_access_review(k8s.V1SubjectAccessReview(spec=k8s.V1SubjectAccessReviewSpec(
                user=user, groups=groups, resource_attributes=k8s.V1ResourceAttributes(**attributes))))
            self.assertEqual(review.status.allowed, allowed, (user, attributes, review.status))
        non_resource = [(ANONYMOUS, ["system:unauthenticated"], "/healthz", True),
                        (ANONYMOUS, ["system:unauthenticated"], "/api", False),
                        ("frank", ["system:authenticated"], "/apis/apps/v1", True),
                        ("frank", ["system:authenticated"], "/metrics", False)]
        for user, groups, path, allowed in non_resource:
            review = api.create_subject_access_review(k8s.V1SubjectAccessReview(spec=k8s.V1SubjectAccessReviewSpec(
                user=user, groups=groups, non_resource_attributes=k8s.V1NonResourceAttributes(path=path,
                                                                                               verb="get"))))
            self.assertEqual(review.status.allowed, allowed, (user, path))


class RBACUserTests(unittest.TestCase):
    def setUp(self) -> None:
        self.server = rbac_server()

    def as_user(self, user: str, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        return self.server.kubectl("--kubeconfig", self.server.kubeconfig_for(user, USERS[user]), *args, check=check)

    def test_read_only_user_cannot_delete_secrets(self) -> None:
        self.assertIn("s", self.as_user("alice", "-n", NS, "get", "secrets", "-o", "name", check=True).stdout)
        out = self.as_user("alice", "-n", NS, "delete", "secret", "s")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn('Error from server (Forbidden): secrets "s" is forbidden: User "alice" cannot delete resource '
                      '"secrets" in API group "" in the namespace "demo"', out.stderr)
        # the same through the Python client
        from kubernetes import client as k8s
        from kubernetes.client.exceptions import ApiException
        core = k8s.CoreV1Api(self.server.python_client(self.server.kubeconfig_for("alice")))
        self.assertEqual([s.metadata.name for s in core.list_namespaced_secret(NS).items], ["s"])
        with self.assertRaises(ApiException) as caught:
            core.delete_namespaced_secret("s", NS)
        self.assertEqual(caught.exception.status, 403)
        status = json.loads(caught.exception.body)
        self.assertEqual((status["reason"], status["message"]), (
            "Forbidden", 'secrets "s" is forbidden: User "alice" cannot delete resource "secrets" in API group "" in '
                         'the namespace "demo"'))
        self.assertEqual(self.server.kubectl("-n", NS, "get", "secret", "s", "-o", "name").stdout.strip(), "secret/s")

    def test_can_i_as_oneself_and_list(self) -> None:
        self.assertEqual(self.as_user("bob", "auth", "can-i", "create", "deployments.apps", "-n", NS).stdout.strip(),
                         "yes")
        self.assertEqual(self.as_user("bob", "auth", "can-i", "create", "rolebindings", "-n", NS).stdout.strip(), "no")
        listing = self.as_user("gina", "auth", "can-i", "--list", "-n", NS, check=True).stdout
        rows = [line.split() for line in listing.splitlines()]
        self.assertEqual(rows[0], ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"])
        self.assertIn(["configmaps", "[]", "[app-config]", "[get", "update", "patch]"], rows)
        self.assertIn(["pods/log", "[]", "[]", "[get]"], rows)
        self.assertIn(["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"], rows)
        self.assertIn(["[/version]", "[]", "[get]"], rows)
        self.assertFalse(any(r and r[0] == "secrets" for r in rows))

    def test_escalation_is_refused(self) -> None:
        # edit cannot create RoleBindings at all
        out = self.as_user("bob", "-n", NS, "create", "rolebinding", "mine", "--clusterrole=cluster-admin",
                           "--user=bob")
        self.assertIn('User "bob" cannot create resource "rolebindings" in API group "rbac.authorization.k8s.io" in '
                      'the namespace "demo"', out.stderr)
        # admin can, but not to a role holding more than admin does
        out = self.as_user("carol", "-n", NS, "create", "rolebinding", "mine", "--clusterrole=cluster-admin",
                           "--user=carol")
        self.assertIn('rolebindings.rbac.authorization.k8s.io "mine" is forbidden: user "carol" (groups=['
                      '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
                      '{APIGroups:["*"], Resources:["*"], Verbs:["*"]}\n{NonResourceURLs:["*"], Verbs:["*"]}',
                      out.stderr)
        out = self.as_user("carol", "-n", NS, "create", "role", "everything", "--verb=*", "--resource=*.*")
        self.assertIn('roles.rbac.authorization.k8s.io "everything" is forbidden: user "carol" (groups=['
                      '"system:authenticated"]) is attempting to grant RBAC permissions not currently held:',
                      out.stderr)
        self.assertIn('{APIGroups:["*"], Resources:["*"], Verbs:["*"]}', out.stderr)
        self.assertNotEqual(self.server.kubectl("-n", NS, "get", "role", "everything", check=False).returncode, 0)
        # within what carol holds it works
        ok = self.as_user("carol", "-n", NS, "create", "role", "pod-reader", "--verb=get,list", "--resource=pods")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        # server-side apply goes through the same check
        path = os.path.join(self.server.workdir, "applied-role.yaml")
        for verbs, allowed in (("[get, list, watch]", True), ("[get, list, watch, escalate]", False)):
            with open(path, "w") as f:
                f.write(f"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: applied, "
                        f"namespace: {NS}}}\nrules:\n- apiGroups: ['']\n  resources: [configmaps]\n  verbs: {verbs}\n")
            out = self.as_user("carol", "apply", "--server-side", "-f", path)
            self.assertEqual(out.returncode == 0, allowed, out.stderr)
            if not allowed:
                self.assertIn('is attempting to grant RBAC permissions not currently held:\n{APIGroups:[""], '
                              'Resources:["configmaps"], Verbs:["escalate"]}', out.stderr)

    def test_impersonation_needs_the_impersonate_verb(self) -> None:
        out = self.as_user("bob", "-n", NS, "get", "pods", "--as", "dave")
        self.assertIn('Error from server (Forbidden): users "dave" is forbidden: User "bob" cannot impersonate '
                      'resource "users" in API group "" at the cluster scope', out.stderr)
        # even oneself: each impersonated attribute is checked, the user first
        out = self.as_user("bob", "-n", NS, "get", "pods", "--as", "bob", "--as-group", "system:masters")
        self.assertIn('users "bob" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at '
                      'the cluster scope', out.stderr)
        # edit may impersonate service accounts of its namespace (upstream's edit role)
        self.server.kubectl("-n", NS, "create", "serviceaccount", "builder", check=False)
        out = self.as_user("bob", "-n", NS, "get", "configmaps", "--as", SA, "-o", "name")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("configmap/app-config", out.stdout)

    def test_anonymous_health_and_version_but_not_secrets(self) -> None:
        anonymous = HTTPSClient(self.server)
        for path in ("/readyz", "/livez", "/healthz"):
            self.assertEqual(anonymous.request("GET", path), (200, "ok"))
        code, version = anonymous.request("GET", "/version")
        self.assertEqual((code, version["major"]), (200, "1"))
        code, body = anonymous.request("GET", "/api/v1/secrets")
        self.assertEqual((code, body["message"]), (403, 'secrets is forbidden: User "system:anonymous" cannot list '
                                                        'resource "secrets" in API group "" at the cluster scope'))
        code, body = anonymous.request("GET", "/api")
        self.assertEqual((code, body["message"]), (403, 'forbidden: User "system:anonymous" cannot get path "/api"'))
        code, body = anonymous.request("GET", "/readyz/etcd")
        self.assertEqual(code, 403)  # public-info-viewer covers /readyz, not its single checks
        # whoami, as upstream, needs authentication
        code, body = anonymous.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        self.assertEqual(code, 403)

    def test_bootstrap_policy_is_served(self) -> None:
        roles = json.loads(self.server.kubectl("get", "clusterroles", "-o", "json").stdout)["items"]
        by_name = {r["metadata"]["name"]: r for r in roles}
        for name in ("cluster-admin", "admin", "edit", "view", "system:basic-user", "system:discovery",
                     "system:public-info-viewer", "system:auth-delegator", "system:kube-scheduler",
                     "system:kube-controller-manager", "system:service-account-issuer-discovery",
                     "system:controller:clusterrole-aggregation-controller"):
            self.assertEqual(by_name[name]["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"],
                             "true")
        view_rules = by_name["view"]["rules"]
        self.assertIn({"apiGroups": ["apps"], "resources": ["controllerrevisions", "daemonsets", "daemonsets/status",
                                                            "deployments", "deployments/scale", "deployments/status",
                                                            "replicasets", "replicasets/scale", "replicasets/status",
                                                            "statefulsets", "statefulsets/scale",
                                                            "statefulsets/status"],
                       "verbs": ["get", "list", "watch"]}, view_rules)
        out = self.server.kubectl("get", "clusterrolebinding", "system:public-info-viewer", "-o", "wide").stdout
        self.assertIn("system:authenticated, system:unauthenticated", out)


class NamedListWatchTests(unittest.TestCase):
    """A list or watch whose field selector is ``metadata.name=X`` is a request about X (upstream's
    request info names it), so a rule with ``resourceNames: [X]`` allows it; anything else is a 403."""

    def setUp(self) -> None:
        self.server = rbac_server()
        wait_for(lambda: self.server.kubectl("auth", "can-i", "list", "configmaps/app-config", "-n", NS, "--as", "ivy",
                                             check=False).stdout.strip() == "yes")
        self.ivy = HTTPSClient(self.server, "ivy")

    def watch(self, client: HTTPSClient, path: str) -> tuple[int, Any]:
        """A watch the server ends after a second: its code, and its events (or its Status)."""
        code, body = client.request("GET", path + ("&" if "?" in path else "?") + "timeoutSeconds=1")
        if code != 200:
            return code, body
        lines = body if isinstance(body, str) else json.dumps(body)
        return code, [(e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, lines.splitlines())]

    def forbidden(self, verb: str, name: str = "", user: str = "ivy", namespace: str = NS) -> str:
        subject = f'configmaps "{name}"' if name else "configmaps"
        return f"{subject} is forbidden: " + forbidden_message(user, verb, "", "configmaps", "", namespace)

    def test_list_and_watch_of_the_named_configmap(self) -> None:
        cms = f"/api/v1/namespaces/{NS}/configmaps"
        code, body = self.ivy.request("GET", cms + "?fieldSelector=metadata.name%3Dapp-config")
        self.assertEqual((code, [i["metadata"]["name"] for i in body["items"]]), (200, ["app-config"]))
        self.assertEqual(self.watch(self.ivy, cms + "?watch=true&fieldSelector=metadata.name%3Dapp-config"),
                         (200, [("ADDED", "app-config")]))
        # the deprecated watch path names the object in the path only
        self.assertEqual(self.watch(self.ivy, f"/api/v1/watch/namespaces/{NS}/configmaps/app-config"),
                         (200, [("ADDED", "app-config")]))

    def test_everything_else_is_forbidden_in_upstreams_words(self) -> None:
        cms = f"/api/v1/namespaces/{NS}/configmaps"
        cases = [  # (path, verb, the name the request is about)
            (cms, "list", ""),
            (cms + "?watch=true", "watch", ""),
            (cms + "?fieldSelector=metadata.name%3Dother-config", "list", "other-config"),
            (cms + "?fieldSelector=metadata.name!%3Dother-config", "list", ""),
            # a selector that does not parse names nothing (the handler's 400 never comes)
            (cms + "?fieldSelector=metadata.name%3Dapp-config,foo", "list", ""),
            (cms + "?fieldSelector=metadata.name%3Dapp-config&limit=x", "list", ""),
            # upstream reads no selector on the deprecated watch paths
            (f"/api/v1/watch/namespaces/{NS}/configmaps?fieldSelector=metadata.name%3Dapp-config", "watch", ""),
        ]
        for path, verb, name in cases:
            code, body = self.ivy.request("GET", path + ("&" if "?" in path else "?") + "timeoutSeconds=1")
            self.assertEqual((code, body.get("reason"), body.get("message")),
                             (403, "Forbidden", self.forbidden(verb, name)), path)

    def test_kube_scheduler_reads_its_authentication_configmap(self) -> None:
        scheduler = HTTPSClient(self.server, "system:kube-scheduler")
        cms = "/api/v1/namespaces/kube-system/configmaps"
        code, body = scheduler.request("GET", cms + "?fieldSelector=metadata.name%3Dextension-apiserver-authentication"
                                       "&limit=500&resourceVersion=0")
        self.assertEqual((code, [i["metadata"]["name"] for i in body["items"]]),
                         (200, ["extension-apiserver-authentication"]))
        code, body = scheduler.request("GET", cms)
        self.assertEqual((code, body["message"]),
                         (403, self.forbidden("list", user="system:kube-scheduler", namespace="kube-system")))
