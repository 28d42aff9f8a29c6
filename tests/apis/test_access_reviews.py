"""Access reviews, SelfSubjectReview and impersonation on an in-process server:
what ``kubectl auth can-i`` and ``kubectl auth whoami`` (and ``--as``) rely on."""
from __future__ import annotations

from kapiserver.auth.authorizer import AlwaysAllow, Decision
from kapiserver.testing.cases import ServerTestCase, run

AUTHZ = "/apis/authorization.k8s.io/v1"
SELF_REVIEW = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
POD_GET = {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}


class DenySecrets(AlwaysAllow):
    """Allows everything but secrets and impersonating "root"."""

    def authorize(self, user, attributes):
        if attributes.resource == "secrets":
            return Decision(False, "no secrets for you")
        if attributes.verb == "impersonate" and attributes.name == "root":
            return Decision(False)
        return Decision(True)


def review(kind: str, spec: dict) -> dict:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec}


def messages(reply) -> list[str]:
    return [f"{c.get('field', '')}: {c['message']}" for c in reply.body["details"]["causes"]]


class AccessReviewTests(ServerTestCase):
    @run
    async def test_self_subject_access_review_answers_from_the_authorizer(self):
        reply = await self.client.post(f"{AUTHZ}/selfsubjectaccessreviews", review("SelfSubjectAccessReview", POD_GET))
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["status"], {"allowed": True})
        self.assertEqual(reply.body["metadata"], {"creationTimestamp": None})
        self.assertEqual(reply.body["spec"], POD_GET)

    @run
    async def test_reviews_are_validated_and_create_only(self):
        reply = await self.client.post(f"{AUTHZ}/selfsubjectaccessreviews", review("SelfSubjectAccessReview", {}))
        self.assertEqual(reply.code, 422)
        self.assertEqual(messages(reply), ["spec.resourceAttributes: Invalid value: \"null\": exactly one of "
                                           "nonResourceAttributes or resourceAttributes must be specified"])
        reply = await self.client.post(f"{AUTHZ}/subjectaccessreviews", review("SubjectAccessReview", POD_GET))
        self.assertEqual(messages(reply), ['spec.user: Invalid value: "": at least one of user or group '
                                           'must be specified'])
        listed = await self.client.get(f"{AUTHZ}/selfsubjectaccessreviews")
        self.assertEqual((listed.code, listed.body["reason"]), (405, "MethodNotAllowed"))

    @run
    async def test_access_reviews_validate_selectors_and_metadata(self):
        """Upstream's ValidateSelfSubjectAccessReview (a review names no object: its metadata must be empty) and
        validateResourceAttributes; kube-apiserver v1.32.13 answers these 422s (its metadata's value is Go's
        rendering of the whole ObjectMeta, not compared here)."""
        spec = {"resourceAttributes": {"verb": "get", "fieldSelector": {}, "labelSelector": {
            "rawSelector": "a", "requirements": [{"key": "a", "operator": "In"}]}}}
        body = {**review("SelfSubjectAccessReview", spec), "metadata": {"name": "x", "labels": {"a": "b"}}}
        reply = await self.client.post(f"{AUTHZ}/selfsubjectaccessreviews", body)
        self.assertEqual((reply.code, reply.body["reason"]), (422, "Invalid"))
        self.assertTrue(reply.body["message"].startswith('.authorization.k8s.io "" is invalid: ['), reply.body)
        self.assertEqual([(c["field"], c["reason"]) for c in reply.body["details"]["causes"]], [
            ("spec.resourceAttributes.fieldSelector.requirements", "FieldValueRequired"),
            ("spec.resourceAttributes.labelSelector.rawSelector", "FieldValueInvalid"),
            ("spec.resourceAttributes.labelSelector.requirements[0].values", "FieldValueRequired"),
            ("metadata", "FieldValueInvalid")])
        self.assertEqual(messages(reply)[:3], [
            "spec.resourceAttributes.fieldSelector.requirements: Required value: when "
            "spec.resourceAttributes.fieldSelector is specified, requirements or rawSelector is required",
            'spec.resourceAttributes.labelSelector.rawSelector: Invalid value: "a": may not specified at the same '
            'time as requirements',
            "spec.resourceAttributes.labelSelector.requirements[0].values: Required value: must be specified when "
            "`operator` is 'In' or 'NotIn'"])
        self.assertTrue(messages(reply)[3].endswith(": must be empty"))
        # empty metadata fields are no metadata; the server's own managedFields do not count
        body = {**review("SelfSubjectAccessReview", POD_GET), "metadata": {"labels": {}, "name": ""}}
        reply = await self.client.post(f"{AUTHZ}/selfsubjectaccessreviews", body)
        self.assertEqual(reply.code, 201, reply.body)
        local = {**review("LocalSubjectAccessReview", {"user": "alice"}), "metadata": {"labels": {"a": "b"}}}
        reply = await self.client.post(f"{AUTHZ}/namespaces/other/localsubjectaccessreviews", local)
        self.assertEqual([(c["field"], c["message"].rsplit(": ", 1)[-1]) for c in reply.body["details"]["causes"]], [
            ("spec.resourceAttributes", "exactly one of nonResourceAttributes or resourceAttributes must be "
                                        "specified"),
            ("metadata", "must be empty except for namespace")])

    @run
    async def test_rules_review_lists_what_the_authorizer_allows(self):
        reply = await self.client.post(f"{AUTHZ}/selfsubjectrulesreviews",
                                       review("SelfSubjectRulesReview", {"namespace": "default"}))
        self.assertEqual(reply.code, 201, reply.body)
        self.assertEqual(reply.body["status"], {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False})

    @run
    async def test_whoami_and_impersonation(self):
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        me = await self.client.post(SELF_REVIEW, body)
        self.assertEqual(me.code, 201, me.body)
        self.assertEqual(me.body["status"]["userInfo"], {"username": "system:anonymous",
                                                        "groups": ["system:unauthenticated"]})
        bob = await self.client.post(SELF_REVIEW, body, headers={
            "Impersonate-User": "bob", "Impersonate-Group": "dev", "Impersonate-Extra-Scopes": "view"})
        self.assertEqual(bob.body["status"]["userInfo"], {"username": "bob", "groups": ["dev", "system:authenticated"],
                                                         "extra": {"scopes": ["view"]}})
        robot = await self.client.post(SELF_REVIEW, body, headers={"Impersonate-User": "system:serviceaccount:ci:bot"})
        self.assertEqual(robot.body["status"]["userInfo"]["groups"],
                         ["system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"])
        no_user = await self.client.post(SELF_REVIEW, body, headers={"Impersonate-Group": "dev"})
        self.assertEqual(no_user.code, 400)


class DenyingAuthorizerTests(ServerTestCase):
    """Reviews, impersonation and real requests all ask the server's one authorizer."""

    settings = {"authorizer": DenySecrets()}

    @run
    async def test_self_subject_access_review_answers_from_the_authorizer(self):
        secret_get = {"resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "default"}}
        denied = await self.client.post(f"{AUTHZ}/selfsubjectaccessreviews",
                                        review("SelfSubjectAccessReview", secret_get))
        self.assertEqual(denied.body["status"], {"allowed": False, "reason": "no secrets for you"})
        # the same authorizer guards real requests
        listing = await self.client.get("/api/v1/namespaces/default/secrets")
        self.assertEqual((listing.code, listing.body["reason"]), (403, "Forbidden"))

    @run
    async def test_subject_and_local_reviews(self):
        spec = {"user": "alice", "groups": ["dev"],
                "resourceAttributes": {"verb": "list", "resource": "secrets", "namespace": "default"}}
        reply = await self.client.post(f"{AUTHZ}/subjectaccessreviews", review("SubjectAccessReview", spec))
        self.assertEqual((reply.code, reply.body["status"]["allowed"]), (201, False))
        local = await self.client.post(f"{AUTHZ}/namespaces/default/localsubjectaccessreviews",
                                       review("LocalSubjectAccessReview", {"user": "alice", **POD_GET}))
        self.assertEqual((local.code, local.body["status"]), (201, {"allowed": True}))
        elsewhere = await self.client.post(f"{AUTHZ}/namespaces/other/localsubjectaccessreviews",
                                           review("LocalSubjectAccessReview", {"user": "alice", **POD_GET}))
        # kube-apiserver v1.32.13: the object takes the URL's namespace, which the attributes' must match
        self.assertEqual((elsewhere.code, elsewhere.body["reason"], elsewhere.body["message"]), (
            422, "Invalid", '.authorization.k8s.io "" is invalid: spec.resourceAttributes.namespace: Invalid value: '
                            '"default": must match metadata.namespace'))

    @run
    async def test_impersonation_needs_the_authorizer_s_consent(self):
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        root = await self.client.post(SELF_REVIEW, body, headers={"Impersonate-User": "root"})
        self.assertEqual((root.code, root.body["message"]), (403, 'users "root" is forbidden: User "system:anonymous" '
                                                                  'cannot impersonate resource "users" in API group "" '
                                                                  'at the cluster scope'))
