"""The bootstrap token controllers: expired token Secrets deleted, ``cluster-info`` signed with tokens.

kube-controller-manager's ``tokencleaner`` and ``bootstrapsigner``
(``pkg/controller/bootstrap``), in process and on the leader only; both are off
unless named in ``controllers.names``, as upstream (kubeadm passes
``--controllers=*,bootstrapsigner,tokencleaner``).

* :class:`TokenCleaner`: a Secret of type ``bootstrap.kubernetes.io/token`` in
  ``kube-system`` whose ``expiration`` has passed (or cannot be parsed) is
  deleted, with its uid as precondition; one that expires later is looked at
  again then.
* :class:`BootstrapSigner`: the ``kubeconfig`` of the ConfigMap
  ``kube-public/cluster-info`` gets, for each valid token Secret (named after
  its id, not expired, ``usage-bootstrap-signing: "true"``), a detached JWS
  under ``jws-kubeconfig-<id>``, and signatures of tokens that are gone are
  removed.  kubeadm's discovery reads the ConfigMap anonymously and checks the
  signature of the token it was given: the cluster it found is the one that
  holds the token.  A token Secret or the ConfigMap changing signs again.

The token helpers are the authenticator's (``auth/bootstrap_token.py``).
"""
from __future__ import annotations

import copy
from typing import Hashable, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.auth.bootstrap_token import (CLUSTER_INFO, CLUSTER_INFO_NAMESPACE, ID_KEY, JWS_SIGNATURE_PREFIX,
                                             KUBECONFIG_KEY, SECRET_KEY, SECRET_NAMESPACE, SECRET_PREFIX,
                                             SECRET_TYPE, USAGE_SIGNING, detached_signature, has_expired,
                                             id_from_secret_name, secret_data, seconds_until_expiry)
from kapiserver.controllers.informer_controller import InformerController
from kapiserver.machinery import errors
from kapiserver.registry.context import CONTROLLER_MANAGER, Context
from kapiserver.registry.informer import Informer
from kapiserver.registry.options import DeleteOptions
from kapiserver.registry.queue import ReconcileQueue
from kapiserver.registry.store import Store

log = Logger()

TOKEN_SECRETS = f"type={SECRET_TYPE}"


def _key(obj: dict) -> tuple[str, str]:
    md = obj.get("metadata") or {}
    return str(md.get("namespace") or ""), str(md.get("name") or "")


class TokenCleaner(InformerController):
    """Deletes bootstrap token Secrets once they expire (upstream's TokenCleaner)."""

    queue_name = "token_cleaner"

    def __init__(self, secrets: Store, reactor: IReactorTime) -> None:
        super().__init__(secrets, reactor, field_selector=TOKEN_SECRETS)
        self.secrets = secrets
        self.clock = reactor.seconds  # expirations are compared with the reactor's time, as it schedules

    def on_event(self, event_type: str, obj: dict) -> None:
        key = _key(obj)
        if event_type != "DELETED" and key[0] == SECRET_NAMESPACE:
            self.queue.add(key)

    async def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        secret = self.informer.objects.get(key)
        if secret is None or secret.get("type") != SECRET_TYPE:
            return
        remaining = seconds_until_expiry(secret, self.clock())
        if remaining is None:
            return
        if remaining > 0:
            self.queue.add(key, remaining)
            return
        namespace, name = key
        log.info("Deleting expired bootstrap token secret {ns}/{name}", ns=namespace, name=name)
        try:
            await self.secrets.delete(namespace, name,
                                      DeleteOptions(precondition_uid=secret["metadata"].get("uid", "")),
                                      Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise


def token_for_signing(secret: dict, now: float) -> Optional[tuple[str, str]]:
    """(id, secret) of a token Secret that may sign ``cluster-info``, else None
    (upstream's validateSecretForSigning)."""
    md = secret.get("metadata") or {}
    name_id = id_from_secret_name(str(md.get("name") or ""))
    if name_id is None:
        log.debug("Invalid secret name {name}, must be of the form {prefix}<secret-id>", name=md.get("name"),
                  prefix=SECRET_PREFIX)
        return None
    token_id = secret_data(secret, ID_KEY)
    if token_id != name_id:
        return None
    token_secret = secret_data(secret, SECRET_KEY)
    if not token_secret or has_expired(secret, now):
        return None
    if secret_data(secret, USAGE_SIGNING) != "true":
        return None
    return token_id, token_secret


class BootstrapSigner:
    """Keeps ``kube-public/cluster-info`` signed by every signing token (upstream's Signer)."""

    KEY = (CLUSTER_INFO_NAMESPACE, CLUSTER_INFO)

    def __init__(self, configmaps: Store, secrets: Store, reactor: IReactorTime) -> None:
        self.configmaps = configmaps
        self.clock = reactor.seconds
        self.queue = ReconcileQueue("bootstrap_signer_queue", self.reconcile, reactor)
        self.configmap_informer = Informer(
            configmaps, self._on_configmap, reactor,
            field_selector=f"metadata.namespace={CLUSTER_INFO_NAMESPACE},metadata.name={CLUSTER_INFO}")
        self.secret_informer = Informer(secrets, self._on_secret, reactor, field_selector=TOKEN_SECRETS)

    def start(self) -> None:
        self.configmap_informer.start()
        self.secret_informer.start()

    def stop(self) -> None:
        self.configmap_informer.stop()
        self.secret_informer.stop()
        self.queue.stop()

    def _on_configmap(self, event_type: str, obj: dict) -> None:
        if event_type != "DELETED" and _key(obj) == self.KEY:
            self.queue.add(self.KEY)

    def _on_secret(self, event_type: str, obj: dict) -> None:
        if _key(obj)[0] == SECRET_NAMESPACE:
            self.queue.add(self.KEY)

    def tokens(self) -> dict[str, str]:
        """token id -> token secret of every token that signs; the first Secret of an id wins."""
        found: dict[str, str] = {}
        now = self.clock()
        for (namespace, name), secret in sorted(self.secret_informer.objects.items()):
            if namespace != SECRET_NAMESPACE or secret.get("type") != SECRET_TYPE:
                continue
            token = token_for_signing(secret, now)
            if token is None:
                continue
            if token[0] in found:
                log.info("Duplicate bootstrap tokens found for id {id}, ignoring on the duplicate secret {name}",
                         id=token[0], name=name)
                continue
            found[token[0]] = token[1]
        return found

    async def reconcile(self, key: Hashable) -> None:
        configmap = self.configmap_informer.objects.get(self.KEY)
        if configmap is None:
            return
        data = configmap.get("data")
        content = data.get(KUBECONFIG_KEY) if isinstance(data, dict) else None
        if not isinstance(content, str):
            log.debug("No {key} key in ConfigMap {ns}/{name}", key=KUBECONFIG_KEY, ns=self.KEY[0], name=self.KEY[1])
            return
        assert isinstance(data, dict)
        signed = {k: v for k, v in data.items() if not k.startswith(JWS_SIGNATURE_PREFIX)}
        for token_id, token_secret in self.tokens().items():
            signed[JWS_SIGNATURE_PREFIX + token_id] = detached_signature(content, token_id, token_secret)
        if signed == data:
            return
        updated = copy.deepcopy(configmap)  # the informer's copy stays as stored
        updated["data"] = signed
        try:
            # compare-and-swap on the version the informer saw; a conflict means a newer one is on its way
            await self.configmaps.update(self.KEY[0], self.KEY[1], updated,
                                         ctx=Context(field_manager=CONTROLLER_MANAGER))
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
