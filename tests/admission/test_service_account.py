"""The ServiceAccount admission plugin on plain objects: the default service account, the
projected token volume and its mounts, the automount opt-outs, image pull secrets, mirror
pods, mountable secrets and the refusals worded as upstream's."""
from __future__ import annotations

import re
from typing import Optional

from twisted.internet import task
from twisted.trial import unittest

from kapiserver.machinery.pod_references import pod_secret_names
from kapiserver.admission.service_account import DEFAULT_API_TOKEN_MOUNT_PATH, ServiceAccount
from kapiserver.apis.builtin import builtin_resource_types
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE, Attributes
from kapiserver.testing.cases import ServerTestCase, run

TYPES = {(t.group, t.version, t.plural): t for t in builtin_resource_types()}
PODS = TYPES[("", "v1", "pods")]
TOKEN_VOLUME = re.compile(r"^kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}$")
# upstream's projected kube-api-access volume, as kube-apiserver 1.32 adds it
TOKEN_VOLUME_PROJECTION = {
    "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ],
    "defaultMode": 420}


class FakeServiceAccounts:
    """The Lister's interface over a dict; ``appear_after`` live reads make an absent one appear."""

    def __init__(self, *accounts: dict) -> None:
        self.accounts = {(a["metadata"]["namespace"], a["metadata"]["name"]): a for a in accounts}
        self.live_reads = 0
        self.pending: Optional[tuple[int, dict]] = None

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    async def get(self, name: str, namespace: str = "") -> Optional[dict]:
        return await self.get_live(name, namespace)

    async def get_live(self, name: str, namespace: str = "") -> Optional[dict]:
        self.live_reads += 1
        if self.pending is not None and self.live_reads >= self.pending[0]:
            sa = self.pending[1]
            self.accounts[(sa["metadata"]["namespace"], sa["metadata"]["name"])] = sa
        return self.accounts.get((namespace, name))


def sa(name: str = "default", namespace: str = "ns", **fields) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace},
            **fields}


def enforcing_account(**fields) -> dict:
    """The ``default`` account, asking for its mountable secrets to be enforced."""
    return sa(metadata={"name": "default", "namespace": "ns",
                        "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}}, **fields)


def pod(spec: Optional[dict] = None, name: str = "p", annotations: Optional[dict] = None) -> dict:
    md: dict = {"name": name, "namespace": "ns"}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": spec if spec is not None else {"containers": [{"name": "c", "image": "nginx"}]}}


def attrs(obj: dict, operation: str = CREATE, subresource: str = "") -> Attributes:
    return Attributes(operation, PODS, "ns", obj["metadata"]["name"], obj, None, subresource)


class ServiceAccountAdmissionTests(unittest.TestCase):
    def setUp(self):
        self.clock = task.Clock()
        self.accounts = FakeServiceAccounts(sa())
        self.plugin = ServiceAccount(self.accounts, self.clock)  # type: ignore[arg-type]

    async def admit(self, obj: dict, operation: str = CREATE, subresource: str = "") -> dict:
        a = attrs(obj, operation, subresource)
        await self.plugin.admit(a)
        await self.plugin.validate(a)
        return obj

    async def refused(self, obj: dict, operation: str = CREATE, subresource: str = "") -> errors.StatusError:
        try:
            await self.admit(obj, operation, subresource)
        except errors.StatusError as e:
            return e
        self.fail("admitted")

    @run
    async def test_default_service_account_and_the_token_volume(self):
        p = await self.admit(pod({"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}],
                                  "initContainers": [{"name": "i", "image": "x"}]}))
        spec = p["spec"]
        self.assertEqual(spec["serviceAccountName"], "default")
        self.assertEqual(len(spec["volumes"]), 1)
        volume = spec["volumes"][0]
        self.assertRegex(volume["name"], TOKEN_VOLUME)
        self.assertEqual(volume["projected"], TOKEN_VOLUME_PROJECTION)
        mount = {"name": volume["name"], "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        for c in spec["containers"] + spec["initContainers"]:
            self.assertEqual(c["volumeMounts"], [mount])
        self.assertNotIn("imagePullSecrets", spec)

    @run
    async def test_volume_names_are_random(self):
        names = {(await self.admit(pod()))["spec"]["volumes"][0]["name"] for _ in range(10)}
        self.assertGreater(len(names), 1)

    @run
    async def test_named_service_account_is_kept(self):
        self.accounts.accounts[("ns", "robot")] = sa("robot")
        p = await self.admit(pod({"serviceAccountName": "robot", "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(p["spec"]["serviceAccountName"], "robot")
        self.assertEqual(len(p["spec"]["volumes"]), 1)

    @run
    async def test_missing_service_account_is_forbidden(self):
        e = await self.refused(pod({"serviceAccountName": "nobody", "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual((e.code, e.reason), (403, "Forbidden"))
        self.assertEqual(e.message, 'pods "p" is forbidden: error looking up service account ns/nobody: '
                                    'serviceaccount "nobody" not found')
        self.assertEqual(self.accounts.live_reads, 1)  # a named one is looked up once

    @run
    async def test_missing_default_is_retried_ten_times(self):
        self.accounts.accounts.clear()
        d = defer_admit(self, pod())
        for _ in range(10):
            self.clock.advance(0.2)
        e = self.failureResultOf(d, errors.StatusError).value
        self.assertEqual(e.message, 'pods "p" is forbidden: error looking up service account ns/default: '
                                    'serviceaccount "default" not found')
        self.assertEqual(self.accounts.live_reads, 10)

    @run
    async def test_default_created_meanwhile_is_found(self):
        self.accounts.accounts.clear()
        self.accounts.pending = (3, sa())
        d = defer_admit(self, pod())
        for _ in range(3):
            self.clock.advance(0.2)
        p = self.successResultOf(d)
        self.assertEqual(p["spec"]["serviceAccountName"], "default")

    @run
    async def test_pod_opts_out_of_automount(self):
        p = await self.admit(pod({"automountServiceAccountToken": False, "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(p["spec"]["serviceAccountName"], "default")
        self.assertNotIn("volumes", p["spec"])
        self.assertNotIn("volumeMounts", p["spec"]["containers"][0])

    @run
    async def test_service_account_opts_out_and_the_pod_overrides_it(self):
        self.accounts.accounts[("ns", "default")] = sa(automountServiceAccountToken=False)
        self.assertNotIn("volumes", (await self.admit(pod()))["spec"])
        p = await self.admit(pod({"automountServiceAccountToken": True, "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(len(p["spec"]["volumes"]), 1)

    @run
    async def test_containers_with_a_mount_at_the_token_path_keep_it(self):
        own = {"name": "mine", "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}
        p = await self.admit(pod({"volumes": [{"name": "mine", "emptyDir": {}}],
                                  "containers": [{"name": "a", "image": "x", "volumeMounts": [own]}]}))
        self.assertEqual(p["spec"]["volumes"], [{"name": "mine", "emptyDir": {}}])  # nobody needs the token
        self.assertEqual(p["spec"]["containers"][0]["volumeMounts"], [own])
        p = await self.admit(pod({"volumes": [{"name": "mine", "emptyDir": {}}],
                                  "containers": [{"name": "a", "image": "x", "volumeMounts": [own]},
                                                 {"name": "b", "image": "x"}]}))
        self.assertEqual(len(p["spec"]["volumes"]), 2)
        self.assertEqual(p["spec"]["containers"][0]["volumeMounts"], [own])
        self.assertEqual(p["spec"]["containers"][1]["volumeMounts"][0]["name"], p["spec"]["volumes"][1]["name"])

    @run
    async def test_an_existing_kube_api_access_volume_is_mounted_not_added(self):
        existing = {"name": "kube-api-access-abcde", "emptyDir": {}}
        p = await self.admit(pod({"volumes": [existing], "containers": [{"name": "a", "image": "x"}]}))
        self.assertEqual(p["spec"]["volumes"], [existing])
        self.assertEqual(p["spec"]["containers"][0]["volumeMounts"][0]["name"], "kube-api-access-abcde")

    @run
    async def test_ephemeral_containers_are_not_mounted(self):
        p = await self.admit(pod({"containers": [{"name": "a", "image": "x"}],
                                  "ephemeralContainers": [{"name": "e", "image": "x"}]}))
        self.assertNotIn("volumeMounts", p["spec"]["ephemeralContainers"][0])

    @run
    async def test_image_pull_secrets_come_from_the_service_account_when_the_pod_has_none(self):
        self.accounts.accounts[("ns", "default")] = sa(imagePullSecrets=[{"name": "reg"}, {"name": "other"}])
        p = await self.admit(pod())
        self.assertEqual(p["spec"]["imagePullSecrets"], [{"name": "reg"}, {"name": "other"}])
        p = await self.admit(pod({"imagePullSecrets": [{"name": "own"}], "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(p["spec"]["imagePullSecrets"], [{"name": "own"}])

    @run
    async def test_mirror_pods_are_left_alone_but_may_reference_nothing(self):
        mirror = {"kubernetes.io/config.mirror": "hash"}
        p = await self.admit(pod(annotations=mirror))
        self.assertEqual(p["spec"], {"containers": [{"name": "c", "image": "nginx"}]})
        e = await self.refused(pod({"serviceAccountName": "default", "containers": [{"name": "c", "image": "x"}]},
                                   annotations=mirror))
        self.assertEqual(e.message, 'pods "p" is forbidden: a mirror pod may not reference service accounts')
        e = await self.refused(pod({"containers": [{"name": "c", "image": "x", "envFrom": [{"secretRef": {
            "name": "s"}}]}]}, annotations=mirror))
        self.assertEqual(e.message, 'pods "p" is forbidden: a mirror pod may not reference secrets')
        e = await self.refused(pod({"containers": [{"name": "c", "image": "x"}], "volumes": [
            {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}, annotations=mirror))
        self.assertEqual(e.message, 'pods "p" is forbidden: a mirror pod may not use ServiceAccountToken '
                                    'volume projections')

    @run
    async def test_mountable_secrets_are_enforced_when_the_service_account_asks(self):
        self.accounts.accounts[("ns", "default")] = enforcing_account(
            secrets=[{"name": "ok"}], imagePullSecrets=[{"name": "pull"}])
        await self.admit(pod({"volumes": [{"name": "v", "secret": {"secretName": "ok"}}],
                              "containers": [{"name": "c", "image": "x", "env": [
                                  {"name": "E", "valueFrom": {"secretKeyRef": {"name": "ok", "key": "k"}}}]}]}))
        e = await self.refused(pod({"volumes": [{"name": "v", "secret": {"secretName": "no"}}],
                                    "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(e.message, 'pods "p" is forbidden: volume with secret.secretName="no" is not allowed '
                                    'because service account default does not reference that secret')
        e = await self.refused(pod({"initContainers": [{"name": "i", "image": "x", "envFrom": [
            {"secretRef": {"name": "no"}}]}], "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(e.message, 'pods "p" is forbidden: init container i with envFrom referencing '
                                    'secret.secretName="no" is not allowed because service account default does '
                                    'not reference that secret')
        e = await self.refused(pod({"imagePullSecrets": [{"name": "pull"}, {"name": "no"}],
                                    "containers": [{"name": "c", "image": "x"}]}))
        self.assertEqual(e.message, 'pods "p" is forbidden: imagePullSecrets[1].name="no" is not allowed because '
                                    'service account default does not reference that imagePullSecret')

    @run
    async def test_ephemeral_containers_update_is_held_to_mountable_secrets(self):
        self.accounts.accounts[("ns", "default")] = enforcing_account(secrets=[{"name": "ok"}])
        debug = {"name": "debug", "image": "x", "env": [
            {"name": "E", "valueFrom": {"secretKeyRef": {"name": "no", "key": "k"}}}]}
        p = pod({"serviceAccountName": "default", "containers": [{"name": "c", "image": "x"}],
                 "ephemeralContainers": [debug]})
        e = await self.refused(p, UPDATE, "ephemeralcontainers")
        self.assertEqual((e.code, e.reason), (500, ""))
        self.assertEqual(e.message, 'ephemeral container debug with envVar E referencing secret.secretName="no" is '
                                    'not allowed because service account default does not reference that secret')
        # a plain update of the pod is not looked at
        await self.admit(p, UPDATE)
        e = await self.refused(pod({"containers": [{"name": "c", "image": "x"}]}), UPDATE, "ephemeralcontainers")
        self.assertEqual(e.message, 'pods "p" is forbidden: no service account specified for pod ns/p')

    @run
    async def test_other_resources_and_subresources_are_ignored(self):
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        a = Attributes(CREATE, TYPES[("", "v1", "configmaps")], "ns", "c", cm)
        await self.plugin.admit(a)
        self.assertEqual(cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        p = pod()
        await self.admit(p, UPDATE, "status")
        self.assertNotIn("serviceAccountName", p["spec"])

    def test_secret_names_of_a_pod(self):
        spec = {"imagePullSecrets": [{"name": "pull"}],
                "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "from"}}],
                                "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "key"}}}]}],
                "volumes": [{"name": "a", "azureFile": {"secretName": ""}}, {"name": "b", "secret": {}},
                            {"name": "c", "projected": {"sources": [{"secret": {"name": "proj"}}]}},
                            {"name": "d", "csi": {"driver": "x", "nodePublishSecretRef": {"name": "csi"}}}]}
        self.assertEqual(list(pod_secret_names(spec)), ["pull", "from", "key", "", "proj", "csi"])


def defer_admit(case: ServiceAccountAdmissionTests, obj: dict):
    from twisted.internet import defer
    return defer.Deferred.fromCoroutine(case.admit(obj))


class InProcessTests(ServerTestCase):
    """The plugin in the chain of an in-process server."""

    async def create_pod(self, spec: dict, name: str = "p", code: int = 201) -> dict:
        r = await self.client.post("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
        self.assertEqual(r.code, code, r.body)
        return r.body

    @run
    async def test_the_deprecated_alias_names_the_service_account(self):
        r = await self.client.post("/api/v1/namespaces/default/serviceaccounts", {
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
        self.assertEqual(r.code, 201, r.body)
        pod = await self.create_pod({"serviceAccount": "robot", "containers": [{"name": "c", "image": "x"}]})
        self.assertEqual((pod["spec"]["serviceAccountName"], pod["spec"]["serviceAccount"]), ("robot", "robot"))
        status = await self.create_pod({"serviceAccount": "gone", "containers": [{"name": "c", "image": "x"}]},
                                       "q", 403)
        self.assertEqual(status["message"], 'pods "q" is forbidden: error looking up service account default/gone: '
                                            'serviceaccount "gone" not found')


class DisabledTests(ServerTestCase):
    settings = {"disable_admission_plugins": ["ServiceAccount"]}

    @run
    async def test_without_the_plugin_pods_get_no_service_account(self):
        r = await self.client.post("/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}})
        self.assertEqual(r.code, 201, r.body)
        spec = r.body["spec"]
        self.assertNotIn("serviceAccountName", spec)
        self.assertNotIn("volumes", spec)
