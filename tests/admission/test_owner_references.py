"""OwnerReferencesPermissionEnforcement (opt-in) on an in-process server with RBAC: changing
ownerReferences needs delete on the object, a new blockOwnerDeletion needs update of the owner's
finalizers, with upstream's messages."""
from __future__ import annotations

from tests.auth.test_rbac_in_process import RBAC, RBACTestCase, as_user
from kapiserver.testing.cases import run

CMS = "/api/v1/namespaces/demo/configmaps"


def configmap(name: str, owners: list) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "ownerReferences": owners}}


def owner(uid: str, block: bool = False) -> dict:
    ref = {"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": uid}
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


class OwnerReferencesTests(RBACTestCase):
    settings = {"authorization_modes": ["RBAC"], "enable_admission_plugins": ["OwnerReferencesPermissionEnforcement"]}

    async def role(self, name: str, rules: list) -> None:
        reply = await self.client.post(f"{RBAC}/namespaces/demo/roles", {"metadata": {"name": name}, "rules": rules})
        self.assertEqual(reply.code, 201, reply.body)
        await self.grant(name, name, {"kind": "User", "name": name}, kind="Role")

    @run
    async def test_owner_changes_need_delete_and_blocking_needs_finalizers(self):
        await self.role("writer", [{"apiGroups": [""], "resources": ["configmaps"],
                                    "verbs": ["get", "create", "update", "patch"]}])
        who = as_user("writer")
        # a real owner, or the garbage collector would delete the dependents
        reply = await self.client.post("/api/v1/namespaces/demo/secrets", {"metadata": {"name": "owner"}})
        self.assertEqual(reply.code, 201, reply.body)
        uid = reply.body["metadata"]["uid"]
        reply = await self.client.post(CMS, configmap("a", [owner(uid)]), headers=who)
        self.assertEqual(reply.code, 201, reply.body)  # a create needs no delete
        changed = reply.body
        changed["metadata"]["ownerReferences"] = []
        reply = await self.client.put(f"{CMS}/a", changed, headers=who)
        self.assertEqual(reply.code, 403, reply.body)
        self.assertEqual(reply.body["message"], 'configmaps "a" is forbidden: cannot set an ownerRef on a resource '
                                                "you can't delete: , <nil>")
        # other changes of the object are not affected
        reply = await self.client.patch(f"{CMS}/a", {"data": {"k": "v"}}, headers=who)
        self.assertEqual(reply.code, 200, reply.body)

        reply = await self.client.post(CMS, configmap("b", [owner(uid, block=True)]), headers=who)
        self.assertEqual(reply.code, 403, reply.body)
        self.assertEqual(reply.body["message"], 'configmaps "b" is forbidden: cannot set blockOwnerDeletion if an '
                                                "ownerReference refers to a resource you can't set finalizers on: "
                                                ", <nil>")
        await self.role("finalizer", [{"apiGroups": [""], "resources": ["secrets/finalizers"], "verbs": ["update"]}])
        await self.grant("writer-finalizer", "finalizer", {"kind": "User", "name": "writer"}, kind="Role")
        reply = await self.client.post(CMS, configmap("b", [owner(uid, block=True)]), headers=who)
        self.assertEqual(reply.code, 201, reply.body)
        unknown = dict(owner(uid, block=True), apiVersion="example.com/v1", kind="Gadget")
        reply = await self.client.post(CMS, configmap("c", [unknown]), headers=who)
        self.assertEqual(reply.code, 403)
        self.assertIn('cannot find RESTMapping for APIVersion example.com/v1 Kind Gadget', reply.body["message"])
