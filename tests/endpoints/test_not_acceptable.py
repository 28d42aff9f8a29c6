"""``as=Table`` for kinds that do not print (create-only reviews) is 406 NotAcceptable,
written as upstream writes a Status it cannot negotiate: indented JSON."""
from __future__ import annotations

from kapiserver.testing.cases import InMemoryServerTestCase, run

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
REVIEW = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
          "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
# kube-apiserver v1.32.13's answer to the same request, byte for byte
UPSTREAM_406 = (b'{\n  "kind": "Status",\n  "apiVersion": "v1",\n  "metadata": {},\n  "status": "Failure",\n'
                b'  "message": "only the following media types are accepted: application/json, application/yaml, '
                b'application/vnd.kubernetes.protobuf",\n  "reason": "NotAcceptable",\n  "code": 406\n}')


class NotAcceptableTests(InMemoryServerTestCase):
    @run
    async def test_table_of_a_review_is_not_acceptable(self):
        r = await self.client.post(SSAR, REVIEW, headers={"Accept": TABLE})
        self.assertEqual(r.code, 406)
        self.assertEqual(r.raw, UPSTREAM_406)

    @run
    async def test_table_then_json_falls_back_to_the_object(self):
        r = await self.client.post(SSAR, REVIEW, headers={"Accept": f"{TABLE}, application/json"})
        self.assertEqual(r.code, 201)
        self.assertEqual((r.body["kind"], r.body["status"]["allowed"]), ("SelfSubjectAccessReview", True))

    @run
    async def test_kinds_that_print_still_answer_tables(self):
        r = await self.client.get("/api/v1/namespaces", headers={"Accept": TABLE})
        self.assertEqual((r.code, r.body["kind"]), (200, "Table"))
