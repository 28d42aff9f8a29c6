"""``serviceaccounts/<name>/token``: authentication.k8s.io/v1 TokenRequest (``kubectl create token``).

As upstream's TokenREST: the ServiceAccount must exist; ``spec.audiences``
defaults to the API's audiences, ``spec.expirationSeconds`` to 3600 (at least
600 and at most 2^32; longer than the configured maximum is shortened, with a
warning); ``spec.boundObjectRef`` may name a Pod (running as this
ServiceAccount), a Secret or a Node, whose uid must match if given (409
otherwise).  The answer carries the signed token and its expiration time.
Nothing is stored: the token stays valid while its ServiceAccount and bound
object exist and it has not expired.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Optional

from kapiserver.auth.serviceaccount import (EXPIRATION_EXTENSION_SECONDS, WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
                                            ServiceAccountTokens, bound_claims)
from kapiserver.machinery import errors
from kapiserver.registry.context import Context
from kapiserver.registry.subresources import StoreLookup, Subresource, SubresourceRequest

GROUP = "authentication.k8s.io"
VERSION = "v1"
KIND = "TokenRequest"
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600
MAX_EXPIRATION_SECONDS = 1 << 32


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _invalid(name: str, path: str, value: Any, detail: str) -> errors.StatusError:
    return errors.invalid(KIND, GROUP, name, [errors.field_invalid(path, value, detail)])


def _decode_error(detail: str) -> errors.StatusError:
    return errors.bad_request(f'TokenRequest in version "v1" cannot be handled as a TokenRequest: {detail}')


def _spec(body: dict) -> dict:
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequest.spec of type "
                            "v1.TokenRequestSpec")
    audiences = spec.get("audiences")
    if audiences is not None and (not isinstance(audiences, list) or
                                  not all(isinstance(a, str) for a in audiences)):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.audiences of "
                            "type []string")
    seconds = spec.get("expirationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.expirationSeconds "
                            "of type int64")
    ref = spec.get("boundObjectRef")
    if ref is not None and (not isinstance(ref, dict) or
                            not all(isinstance(ref.get(k, ""), str) for k in ("kind", "apiVersion", "name", "uid"))):
        raise _decode_error("json: cannot unmarshal into Go struct field TokenRequestSpec.spec.boundObjectRef of "
                            "type v1.BoundObjectReference")
    return spec


def subresource(tokens: ServiceAccountTokens) -> Subresource:
    """The ``token`` subresource of ServiceAccounts, signing with ``tokens``."""
    requests = TokenRequests(tokens)

    async def create(request: SubresourceRequest) -> tuple[int, dict]:
        return 201, await requests.create(request.namespace, request.name, request.body, request.ctx,
                                          request.stores)
    return Subresource(name="token", verbs=("create",), kind=KIND, group=GROUP, version=VERSION, create=create,
                       body_schema="io.k8s.api.authentication.v1.TokenRequest",
                       description="create token of a ServiceAccount")


class TokenRequests:
    """Issues TokenRequests; ``store(group, version, plural)`` finds the ServiceAccount and the bound object."""

    def __init__(self, tokens: ServiceAccountTokens) -> None:
        self.tokens = tokens

    async def create(self, namespace: str, name: str, body: Any, ctx: Context,
                     store: StoreLookup) -> dict:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be a TokenRequest object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if (api_version and api_version != f"{GROUP}/{VERSION}") or (kind and kind != KIND):
            raise errors.bad_request(f"the body of the request must be a {KIND} ({GROUP}/{VERSION}), got "
                                     f"{api_version or ''} {kind or ''}".rstrip())
        md = body.get("metadata") or {}
        if not isinstance(md, dict):
            raise _decode_error("json: cannot unmarshal into Go struct field TokenRequest.metadata of type "
                                "v1.ObjectMeta")
        spec = dict(_spec(body))
        if md.get("name") and md["name"] != name:
            raise _invalid(name, "metadata.name", md["name"], "must match the service account name if specified")
        if md.get("namespace") and md["namespace"] != namespace:
            raise _invalid(name, "metadata.namespace", md["namespace"],
                           "must match the service account namespace if specified")
        sa = await store("", "v1", "serviceaccounts").get(namespace, name)
        if not spec.get("audiences"):
            spec["audiences"] = list(self.tokens.api_audiences)
        if spec.get("expirationSeconds") is None:
            spec["expirationSeconds"] = DEFAULT_EXPIRATION_SECONDS
        seconds = spec["expirationSeconds"]
        now = self.tokens.clock()
        if seconds < MIN_EXPIRATION_SECONDS:
            raise _invalid("", "spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes")
        if seconds > MAX_EXPIRATION_SECONDS:
            raise _invalid("", "spec.expirationSeconds", seconds, "may not specify a duration larger than 2^32 "
                                                                  "seconds")
        pod = secret = node = None
        ref = spec.get("boundObjectRef")
        if ref:
            pod, secret, node = await self._bound_objects(namespace, name, ref, store)
        limit = self.tokens.max_expiration_seconds
        if limit and seconds > limit:
            ctx.warnings.append(f"requested expiration of {seconds} seconds shortened to {limit} seconds")
            spec["expirationSeconds"] = seconds = limit
        lifetime, warn_after = seconds, 0
        if (self.tokens.extend_expiration and pod is not None and seconds == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS
                and all(a in self.tokens.api_audiences for a in spec["audiences"])):
            lifetime, warn_after = EXPIRATION_EXTENSION_SECONDS, seconds
        claims = bound_claims(sa, spec["audiences"], lifetime, int(now), pod=pod, secret=secret, node=node,
                              warn_after_seconds=warn_after)
        token = self.tokens.signer.sign(claims)
        return {
            "kind": KIND, "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": _rfc3339(now)},
            "spec": spec,
            "status": {"token": token, "expirationTimestamp": _rfc3339(now + seconds)},
        }

    @staticmethod
    async def _bound_objects(namespace: str, name: str, ref: dict, store: StoreLookup
                             ) -> tuple[Optional[dict], Optional[dict], Optional[dict]]:
        api_version, kind = ref.get("apiVersion", ""), ref.get("kind", "")
        group, _, version = api_version.rpartition("/")
        pod = secret = node = None
        if group == "" and kind == "Pod":
            pod = obj = await store("", "v1", "pods").get(namespace, ref.get("name", ""))
            if (pod.get("spec") or {}).get("serviceAccountName") != name:
                raise errors.bad_request(f'cannot bind token for serviceaccount "{name}" to pod running with '
                                         f'different serviceaccount name.')
            node_name = (pod.get("spec") or {}).get("nodeName")
            if node_name:
                nodes = store("", "v1", "nodes")
                try:
                    node = await nodes.get("", node_name, "0")
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
                    node = {"metadata": {"name": node_name}}  # the pod's node is gone: its name alone
        elif group == "" and kind == "Node":
            node = obj = await store("", "v1", "nodes").get("", ref.get("name", ""))
        elif group == "" and kind == "Secret":
            secret = obj = await store("", "v1", "secrets").get(namespace, ref.get("name", ""))
        else:
            raise errors.bad_request(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
        uid = obj["metadata"].get("uid", "")
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.conflict(kind, "", ref.get("name", ""),
                                  f"the UID in the bound object reference ({ref['uid']}) does not match the UID in "
                                  f"record. The object might have been deleted and then recreated")
        return pod, secret, node
