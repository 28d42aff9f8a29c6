"""ServiceAccount (upstream's admission plugin of that name, on by default).

On Pod create (mutating):

* a pod without ``spec.serviceAccountName`` gets ``default`` (the deprecated
  ``spec.serviceAccount`` has already become ``serviceAccountName``, as v1
  conversion does it);
* the ServiceAccount must exist: it is read from an informer, else live from
  the store, and for ``default`` (which the serviceaccount controller creates
  just after its namespace) live up to ten times, 100-200 ms apart; missing ->
  403 ``error looking up service account NS/NAME: serviceaccount "NAME" not found``;
* unless the pod (``automountServiceAccountToken``), else the ServiceAccount,
  says not to, the projected token volume ``kube-api-access-xxxxx`` (a bound
  token, the cluster CA and the namespace) is added and mounted read-only at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` in every container and init
  container that has nothing mounted there (ephemeral containers are left
  alone); a volume already named ``kube-api-access-...`` is mounted instead of
  adding one;
* a pod without ``imagePullSecrets`` gets the ServiceAccount's.

Validating, as upstream: mirror pods (``kubernetes.io/config.mirror``) are not
changed and may reference no service account, no secret and no
ServiceAccountToken projection; other new pods must name an existing service
account, and when it is annotated ``kubernetes.io/enforce-mountable-secrets:
"true"`` reference only the secrets it lists (volumes, env, envFrom,
imagePullSecrets).  Updates through ``pods/ephemeralcontainers`` are held to
the same mountable secrets (env, envFrom of the ephemeral containers); that
refusal is a plain error upstream, so a 500 without a reason.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Optional

from twisted.internet import task
from twisted.internet.interfaces import IReactorTime

from kapiserver.admission.errors import admission_forbidden
from kapiserver.admission.lister import Lister, ListingPlugin
from kapiserver.apis.core.configmaps import ROOT_CA_CONFIGMAP
from kapiserver.machinery.pod_references import as_dict, as_list, pod_secret_names, ref_name
from kapiserver.machinery import errors, meta, strconv
from kapiserver.registry.admission import CREATE, UPDATE, Attributes

PLUGIN_NAME = "ServiceAccount"
DEFAULT_SERVICE_ACCOUNT_NAME = "default"
ENFORCE_MOUNTABLE_SECRETS_ANNOTATION = "kubernetes.io/enforce-mountable-secrets"
SERVICE_ACCOUNT_VOLUME_NAME = "kube-api-access"
DEFAULT_API_TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
EPHEMERAL_CONTAINERS = "ephemeralcontainers"
# upstream's serviceaccount.WarnOnlyBoundTokenExpirationSeconds: 1 h + 7 s, so that the
# kubelet's tokens are recognisable (the extended-expiration warning)
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 3607
DEFAULT_SERVICE_ACCOUNT_ATTEMPTS = 10

def token_volume_source() -> dict:
    """upstream's TokenVolumeSource: a bound token, the cluster CA and the pod's namespace."""
    return {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
                                     "path": "token"}},
            {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ],
        "defaultMode": 420,  # set explicitly, as upstream does (kubernetes#104464)
    }


def should_automount(sa: dict, spec: dict) -> bool:
    """The pod's preference wins, then the ServiceAccount's; true by default."""
    if spec.get("automountServiceAccountToken") is not None:
        return bool(spec["automountServiceAccountToken"])
    if sa.get("automountServiceAccountToken") is not None:
        return bool(sa["automountServiceAccountToken"])
    return True


def _parse_bool(value: Any) -> bool:
    """Go's strconv.ParseBool, false for what it does not parse."""
    return value in strconv.TRUE_VALUES


def enforce_mountable_secrets(sa: dict) -> bool:
    annotations = as_dict(as_dict(sa.get("metadata")).get("annotations"))
    return _parse_bool(annotations.get(ENFORCE_MOUNTABLE_SECRETS_ANNOTATION))


def _mountable(sa: dict) -> set[str]:
    return {ref_name(s) for s in as_list(sa.get("secrets"))}


def _container_secret_refs(containers: Any, what: str, sa_name: str, mountable: set[str]) -> Optional[str]:
    """The first env or envFrom secret reference of ``containers`` the ServiceAccount does not list."""
    for c in as_list(containers):
        c = as_dict(c)
        for var in as_list(c.get("env")):
            ref = as_dict(as_dict(var).get("valueFrom")).get("secretKeyRef")
            if ref is not None and ref_name(ref) not in mountable:
                return (f'{what} {c.get("name", "")} with envVar {as_dict(var).get("name", "")} referencing '
                        f'secret.secretName="{ref_name(ref)}" is not allowed because service account {sa_name} '
                        f'does not reference that secret')
        for env_from in as_list(c.get("envFrom")):
            ref = as_dict(env_from).get("secretRef")
            if ref is not None and ref_name(ref) not in mountable:
                return (f'{what} {c.get("name", "")} with envFrom referencing secret.secretName="{ref_name(ref)}" '
                        f'is not allowed because service account {sa_name} does not reference that secret')
    return None


def limit_secret_references(sa: dict, spec: dict) -> Optional[str]:
    """upstream's limitSecretReferences: why the pod may not be created, or None."""
    sa_name = as_dict(sa.get("metadata")).get("name", "")
    mountable = _mountable(sa)
    for volume in as_list(spec.get("volumes")):
        source = as_dict(volume).get("secret")
        if source is None:
            continue
        secret_name = as_dict(source).get("secretName") or ""
        if secret_name not in mountable:
            return (f'volume with secret.secretName="{secret_name}" is not allowed because service account '
                    f'{sa_name} does not reference that secret')
    for key, what in (("initContainers", "init container"), ("containers", "container")):
        problem = _container_secret_refs(spec.get(key), what, sa_name, mountable)
        if problem:
            return problem
    pull_secrets = {ref_name(s) for s in as_list(sa.get("imagePullSecrets"))}
    for i, ref in enumerate(as_list(spec.get("imagePullSecrets"))):
        if ref_name(ref) not in pull_secrets:
            return (f'imagePullSecrets[{i}].name="{ref_name(ref)}" is not allowed because service account {sa_name} '
                    f'does not reference that imagePullSecret')
    return None


def mount_service_account_token(spec: dict, generate_name: Callable[[str], str] = meta.generate_name) -> None:
    """upstream's mountServiceAccountToken: the projected token volume, mounted by every container and
    init container with nothing at the token path."""
    volumes = as_list(spec.get("volumes"))
    token_volume_name = ""
    for volume in volumes:
        name = as_dict(volume).get("name")
        if isinstance(name, str) and name.startswith(SERVICE_ACCOUNT_VOLUME_NAME + "-"):
            token_volume_name = name
            break
    has_token_volume = bool(token_volume_name)
    if not token_volume_name:
        token_volume_name = generate_name(SERVICE_ACCOUNT_VOLUME_NAME + "-")
    needs_token_volume = False
    for key in ("initContainers", "containers"):
        for c in as_list(spec.get(key)):
            if not isinstance(c, dict):
                continue
            mounts = c.get("volumeMounts")
            if any(as_dict(m).get("mountPath") == DEFAULT_API_TOKEN_MOUNT_PATH for m in as_list(mounts)):
                continue  # a mount there already keeps the token out of this container
            c["volumeMounts"] = as_list(mounts) + [
                {"name": token_volume_name, "readOnly": True, "mountPath": DEFAULT_API_TOKEN_MOUNT_PATH}]
            needs_token_volume = True
    if not has_token_volume and needs_token_volume:
        spec["volumes"] = volumes + [{"name": token_volume_name, "projected": token_volume_source()}]


class ServiceAccount(ListingPlugin):
    name = PLUGIN_NAME
    mutating = True
    validating = True
    operations = (CREATE, UPDATE)
    resources = frozenset({("", "pods")})

    def __init__(self, service_accounts: Lister, reactor: IReactorTime, *, mount_service_account_token: bool = True,
                 limit_secret_references: bool = False,
                 generate_name: Callable[[str], str] = meta.generate_name) -> None:
        self.service_accounts = service_accounts
        self.listers = (service_accounts,)
        self.reactor = reactor
        self.mount_service_account_token = mount_service_account_token
        self.limit_secret_references = limit_secret_references
        self.generate_name = generate_name

    @staticmethod
    def _pod(attrs: Attributes) -> Optional[dict]:
        """upstream's shouldIgnore: pods (or their ephemeralcontainers) with a Pod to look at."""
        if (attrs.rtype.group, attrs.rtype.plural) != ("", "pods"):
            return None
        if attrs.subresource not in ("", EPHEMERAL_CONTAINERS):
            return None
        obj = attrs.obj
        if not isinstance(obj, dict) or obj.get("kind") not in (None, "Pod"):
            return None
        return obj

    @staticmethod
    def _is_mirror(pod: dict) -> bool:
        return MIRROR_POD_ANNOTATION in as_dict(as_dict(pod.get("metadata")).get("annotations"))

    async def admit(self, attrs: Attributes) -> None:
        pod = self._pod(attrs)
        if pod is None or attrs.operation != CREATE:
            return
        if self._is_mirror(pod):
            return await self.validate(attrs)  # mirror pods are never changed
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            spec = pod["spec"] = {}
        if not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = DEFAULT_SERVICE_ACCOUNT_NAME
        sa = await self._service_account(attrs, spec["serviceAccountName"])
        if self.mount_service_account_token and should_automount(sa, spec):
            mount_service_account_token(spec, self.generate_name)
        if not spec.get("imagePullSecrets"):
            spec["imagePullSecrets"] = [{"name": ref_name(ref)} for ref in as_list(sa.get("imagePullSecrets"))]
            if not spec["imagePullSecrets"]:
                del spec["imagePullSecrets"]  # an empty list is not written (omitempty)
        await self.validate(attrs)

    async def validate(self, attrs: Attributes) -> None:
        pod = self._pod(attrs)
        if pod is None:
            return
        spec = as_dict(pod.get("spec"))
        if attrs.operation == UPDATE and attrs.subresource == EPHEMERAL_CONTAINERS:
            return await self._limit_ephemeral_container_secret_references(attrs, pod, spec)
        if attrs.operation != CREATE:
            return
        if self._is_mirror(pod):
            if spec.get("serviceAccountName"):
                raise admission_forbidden(attrs, "a mirror pod may not reference service accounts")
            if next(pod_secret_names(spec), None) is not None:
                raise admission_forbidden(attrs, "a mirror pod may not reference secrets")
            for volume in as_list(spec.get("volumes")):
                projected = as_dict(volume).get("projected")
                if projected is not None and any(as_dict(s).get("serviceAccountToken") is not None
                                                 for s in as_list(as_dict(projected).get("sources"))):
                    raise admission_forbidden(attrs,
                                              "a mirror pod may not use ServiceAccountToken volume projections")
            return
        sa = await self._required_service_account(attrs, pod, spec)
        if self.limit_secret_references or enforce_mountable_secrets(sa):
            problem = limit_secret_references(sa, spec)
            if problem:
                raise admission_forbidden(attrs, problem)

    async def _required_service_account(self, attrs: Attributes, pod: dict, spec: dict) -> dict:
        if not spec.get("serviceAccountName"):
            raise admission_forbidden(attrs, f"no service account specified for pod {attrs.namespace}/"
                                             f"{as_dict(pod.get('metadata')).get('name', '')}")
        return await self._service_account(attrs, spec["serviceAccountName"])

    async def _limit_ephemeral_container_secret_references(self, attrs: Attributes, pod: dict, spec: dict) -> None:
        sa = await self._required_service_account(attrs, pod, spec)
        if not (self.limit_secret_references or enforce_mountable_secrets(sa)):
            return
        problem = _container_secret_refs(spec.get("ephemeralContainers"), "ephemeral container",
                                         as_dict(sa.get("metadata")).get("name", ""), _mountable(sa))
        if problem:
            # a plain error upstream (not an API status): a 500 with no reason
            raise errors.StatusError(500, "", problem)

    async def _service_account(self, attrs: Attributes, name: str) -> dict:
        """upstream's getServiceAccount, refusing the request when it is not there."""
        try:
            sa = await self.get_service_account(attrs.namespace, name)
        except errors.StatusError as e:
            why = e.message
        else:
            if sa is not None:
                return sa
            why = f'serviceaccount "{name}" not found'
        raise admission_forbidden(attrs, f"error looking up service account {attrs.namespace}/{name}: {why}")

    async def get_service_account(self, namespace: str, name: str) -> Optional[dict]:
        """The informer's copy, else live; ``default`` (created by a controller just after its
        namespace) is looked up live up to ten times."""
        found = await self.service_accounts.get(name, namespace)  # live when the informer misses it
        if found is not None:
            return found
        attempts = DEFAULT_SERVICE_ACCOUNT_ATTEMPTS if name == DEFAULT_SERVICE_ACCOUNT_NAME else 1
        interval = (random.randrange(100) + 100) / 1000.0
        for _ in range(attempts - 1):
            await task.deferLater(self.reactor, interval, lambda: None)
            found = await self.service_accounts.get_live(name, namespace)
            if found is not None:
                return found
        return None


def service_account(config: Optional[bytes], deps: Any) -> ServiceAccount:
    return ServiceAccount(Lister(lambda: deps.store("", "v1", "serviceaccounts"), deps.reactor), deps.reactor)
