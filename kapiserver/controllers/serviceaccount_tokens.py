"""Legacy ServiceAccount token Secrets, filled as upstream's tokens controller fills them.

A Secret of type ``kubernetes.io/service-account-token`` annotated
``kubernetes.io/service-account.name: <sa>`` gets ``data.token`` (a
non-expiring token of issuer ``kubernetes/serviceaccount`` naming the Secret),
``data["ca.crt"]`` (the cluster CA) and ``data.namespace``, and the
``kubernetes.io/service-account.uid`` annotation.  A token Secret whose
ServiceAccount does not exist (or has another uid) is deleted, and so are a
ServiceAccount's token Secrets when it is deleted; a deleted Secret is
removed from its ServiceAccount's ``secrets`` list.  The token stays valid
while the Secret holds it and the ServiceAccount exists
(auth/serviceaccount.py, LegacyTokenValidator).
"""
from __future__ import annotations

import base64
from typing import Hashable, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.auth.serviceaccount import TokenSigner, legacy_claims
from kapiserver.machinery import errors
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.informer import Informer
from kapiserver.registry.options import DeleteOptions
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()
TOKEN_TYPE = "kubernetes.io/service-account-token"
NAME_ANNOTATION = "kubernetes.io/service-account.name"
UID_ANNOTATION = "kubernetes.io/service-account.uid"
TOKEN_KEY, CA_KEY, NAMESPACE_KEY = "token", "ca.crt", "namespace"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ServiceAccountTokensController:
    def __init__(self, serviceaccounts: Store, secrets: Store, signer: TokenSigner, ca_pem: str, reactor: IReactorTime) -> None:
        self.serviceaccounts = serviceaccounts
        self.secrets = secrets
        self.signer = signer
        self.ca = ca_pem.encode()
        self.queue = ReconcileQueue("serviceaccount-tokens", self.reconcile, reactor)
        self.secret_informer = Informer(secrets, self._on_secret, reactor, field_selector=f"type={TOKEN_TYPE}")
        self.account_informer = Informer(serviceaccounts, self._on_account, reactor)

    def start(self) -> None:
        self.secret_informer.start()
        self.account_informer.start()

    def stop(self) -> None:
        self.secret_informer.stop()
        self.account_informer.stop()
        self.queue.stop()

    @staticmethod
    def _context() -> Context:
        """Writes of this controller are kube-controller-manager's, as upstream (managedFields)."""
        return Context(field_manager=CONTROLLER_MANAGER)

    def _on_secret(self, event_type: str, obj: dict) -> None:
        md = obj["metadata"]
        annotations = md.get("annotations") or {}
        if event_type == "DELETED":
            self.queue.add(("unreference", md.get("namespace", ""), annotations.get(NAME_ANNOTATION, ""),
                            annotations.get(UID_ANNOTATION, ""), md["name"]))
        else:
            self.queue.add(("secret", md.get("namespace", ""), md["name"]))

    def _on_account(self, event_type: str, obj: dict) -> None:
        if event_type == "DELETED":
            md = obj["metadata"]
            self.queue.add(("account-deleted", md.get("namespace", ""), md["name"], md.get("uid", "")))

    async def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "secret":
            await self._sync_secret(key[1], key[2])
        elif key[0] == "account-deleted":
            await self._delete_tokens(key[1], key[2], key[3])
        elif key[0] == "unreference":
            await self._remove_reference(*key[1:])

    async def _account(self, namespace: str, name: str, uid: str) -> Optional[dict]:
        try:
            sa = await self.serviceaccounts.get(namespace, name)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise
        return sa if not uid or sa["metadata"].get("uid") == uid else None

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        try:
            await self.secrets.delete(namespace, name, DeleteOptions(precondition_uid=uid), self._context())
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise

    def _needs(self, secret: dict) -> bool:
        data = secret.get("data") or {}
        return (data.get(CA_KEY) != _b64(self.ca) or not data.get(NAMESPACE_KEY) or not data.get(TOKEN_KEY))

    async def _sync_secret(self, namespace: str, name: str) -> None:
        try:
            secret = await self.secrets.get(namespace, name)
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise
        md = secret["metadata"]
        if secret.get("type") != TOKEN_TYPE or md.get("deletionTimestamp"):
            return
        annotations = md.get("annotations") or {}
        sa = await self._account(namespace, annotations.get(NAME_ANNOTATION, ""), annotations.get(UID_ANNOTATION, ""))
        if sa is None:
            log.info("deleting token secret {ns}/{name}: its ServiceAccount does not exist", ns=namespace, name=name)
            await self._delete(namespace, name, md.get("uid", ""))
            return
        if not self._needs(secret) and annotations.get(UID_ANNOTATION) == sa["metadata"].get("uid"):
            return

        def fill(current: Optional[dict]) -> dict:
            assert current is not None
            if current["metadata"].get("uid") != md.get("uid"):
                raise errors.StatusError(409, "Conflict", "the secret was replaced")
            data = current.get("data")
            if not isinstance(data, dict):
                data = current["data"] = {}
            if data.get(CA_KEY) != _b64(self.ca):
                data[CA_KEY] = _b64(self.ca)
            if not data.get(NAMESPACE_KEY):
                data[NAMESPACE_KEY] = _b64(namespace.encode())
            if not data.get(TOKEN_KEY):
                data[TOKEN_KEY] = _b64(self.signer.sign(legacy_claims(sa, current)).encode())
            cmd = current["metadata"]
            cmd.setdefault("annotations", {})
            cmd["annotations"][NAME_ANNOTATION] = sa["metadata"]["name"]
            cmd["annotations"][UID_ANNOTATION] = sa["metadata"].get("uid", "")
            return current
        try:
            await self.secrets.guaranteed_update(namespace, name, fill, ctx=self._context())
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise

    async def _delete_tokens(self, namespace: str, name: str, uid: str) -> None:
        for (ns, secret_name), secret in list(self.secret_informer.objects.items()):
            annotations = secret["metadata"].get("annotations") or {}
            if ns != namespace or annotations.get(NAME_ANNOTATION) != name:
                continue
            if annotations.get(UID_ANNOTATION) and uid and annotations[UID_ANNOTATION] != uid:
                continue
            if await self._account(namespace, name, "") is not None and not annotations.get(UID_ANNOTATION):
                continue  # a new ServiceAccount of that name took over the Secret
            await self._delete(namespace, secret_name, secret["metadata"].get("uid", ""))

    async def _remove_reference(self, namespace: str, account: str, uid: str, secret_name: str) -> None:
        sa = await self._account(namespace, account, uid)
        if sa is None or not any((r or {}).get("name") == secret_name for r in sa.get("secrets") or []):
            return

        def drop(current: Optional[dict]) -> dict:
            assert current is not None
            current["secrets"] = [r for r in current.get("secrets") or [] if (r or {}).get("name") != secret_name]
            return current
        try:
            await self.serviceaccounts.guaranteed_update(namespace, account, drop, ctx=self._context())
        except errors.StatusError as e:
            if e.code != 404:
                raise
