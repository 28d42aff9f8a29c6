"""CRD conversion webhooks: a ConversionReview v1 client (upstream's webhookConverter).

A CRD with ``spec.conversion.strategy: Webhook`` has its custom resources
converted by an external HTTPS service: the server POSTs a
``apiextensions.k8s.io/v1`` ``ConversionReview`` with the objects to convert
and the desired apiVersion, and checks the answer the way upstream does (uid,
``result.status``, object count, apiVersion and kind, name/namespace/uid
unchanged; only labels and annotations may change in metadata, anything else
there is restored).  One call converts a whole batch (a list page, a run of
watch events); objects already in the desired version are not sent.

TLS is verified against ``clientConfig.caBundle`` (base64 PEM, the system
roots without it) and the host of the URL.  Only ``clientConfig.url`` can be
called: kapiserver runs no cluster Services or DNS, so a ``clientConfig.service``
reference fails every conversion with a 500 saying so.

Every failure is a 500 Status naming the kind (``conversion webhook for
example.com/v1, Kind=Widget failed: ...``), as upstream reports it; reads
answer it without a reason (upstream's plain error), writes as InternalError.
"""
from __future__ import annotations

from typing import Any, Optional
from urllib.parse import urlsplit

import orjson
import treq
from treq.client import HTTPClient
from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.web.client import Agent, BrowserLikePolicyForHTTPS, HTTPConnectionPool

from kapiserver.machinery import errors, validation
from kapiserver.machinery.duration import format_go_duration
from kapiserver.machinery.go_http_client import CLIENT_TIMEOUT, describe_post_failure, trust_root_from_ca_bundle
from kapiserver.machinery.meta import new_uid

log = Logger()

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"
# Upstream's webhook client timeout (the ``?timeout=30s`` its requests carry).
# A module global so tests can shorten it.
TIMEOUT_SECONDS = 30.0
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class ConversionFailed(Exception):
    """Why one webhook call failed, worded like upstream's Go errors."""


def _trust_root(ca_bundle: str) -> Any:
    """The trust root a caBundle names (base64 of one or more PEM certificates)."""
    try:
        return trust_root_from_ca_bundle(ca_bundle)
    except ValueError as e:
        raise ConversionFailed(f"invalid caBundle: {e}") from None


class WebhookConverter:
    """Converts custom resources of one CRD through its conversion webhook."""

    def __init__(self, crd: dict, reactor: Optional[IReactorTime] = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        spec = crd.get("spec") or {}
        self.group = spec.get("group", "")
        self.kind = ((crd.get("status") or {}).get("acceptedNames") or {}).get("kind") or spec["names"]["kind"]
        webhook = (spec.get("conversion") or {}).get("webhook") or {}
        self.review_versions = list(webhook.get("conversionReviewVersions") or ["v1"])
        config = webhook.get("clientConfig") or {}
        self.url: str = config.get("url") or ""
        self.service: Optional[dict] = config.get("service")
        self.ca_bundle: str = config.get("caBundle") or ""
        self._client: Optional[HTTPClient] = None
        self.calls = 0  # webhook requests made (tests, metrics)

    # ------------------------------------------------------------ the hooks

    def hook(self, desired_api_version: str, on_write: bool):
        """A ``ResourceType.convert_*_async`` hook converting to ``desired_api_version``."""
        async def convert(objs: list[dict]) -> list[dict]:
            try:
                return await self.convert(objs, desired_api_version)
            except ConversionFailed as e:
                source = next((o.get("apiVersion", "") for o in objs if o.get("apiVersion") != desired_api_version),
                              desired_api_version)
                message = f"conversion webhook for {source}, Kind={self.kind} {e}"
                if on_write:
                    raise errors.internal_error(message) from None
                # upstream's plain error here has reason Unknown (""); a Status here always names one
                raise errors.StatusError(500, "InternalError", message) from None
        return convert

    async def convert(self, objs: list[dict], desired_api_version: str) -> list[dict]:
        """``objs`` in ``desired_api_version``: a new list; the inputs are not changed.

        Raises :class:`ConversionFailed` with a message starting ``failed:`` or
        ``returned ...``, the rest of upstream's wording.
        """
        todo = [i for i, o in enumerate(objs) if o.get("apiVersion") != desired_api_version]
        out = list(objs)
        if not todo:
            return out
        sent = [objs[i] for i in todo]
        converted = await self._call(sent, desired_api_version)
        if len(converted) != len(sent):
            raise ConversionFailed(f"returned {len(converted)} objects, expected {len(sent)}")
        for index, (i, original, got) in enumerate(zip(todo, sent, converted)):
            out[i] = self._checked(index, original, got, desired_api_version)
        return out

    # ------------------------------------------------------------ the call

    def _http(self) -> HTTPClient:
        if self._client is None:
            trust = _trust_root(self.ca_bundle) if self.ca_bundle else None
            policy = BrowserLikePolicyForHTTPS(trustRoot=trust) if trust is not None else BrowserLikePolicyForHTTPS()
            # no persistent connections: nothing stays open when the CRD changes or the server stops
            pool = HTTPConnectionPool(self.reactor, persistent=False)
            self._client = HTTPClient(Agent(self.reactor, contextFactory=policy, pool=pool))
        return self._client

    def _target(self, timeout: float) -> str:
        if not self.url:
            if self.service is not None:
                svc = self.service
                raise ConversionFailed(
                    f"failed: service reference {svc.get('namespace', '')}/{svc.get('name', '')} cannot be "
                    "resolved: kapiserver runs no cluster Services, so a conversion webhook needs "
                    "spec.conversion.webhook.clientConfig.url")
            raise ConversionFailed("failed: no webhook clientConfig url")
        parts = urlsplit(self.url)
        if parts.scheme != "https":
            raise ConversionFailed(f'failed: webhook url must use the https scheme: "{self.url}"')
        query = (parts.query + "&" if parts.query else "") + f"timeout={format_go_duration(timeout)}"
        return parts._replace(query=query).geturl()

    async def _call(self, objs: list[dict], desired_api_version: str) -> list:
        if "v1" not in self.review_versions:
            raise ConversionFailed("failed: no supported conversion review versions")
        timeout = TIMEOUT_SECONDS
        url = self._target(timeout)
        try:
            client = self._http()
        except ConversionFailed as e:
            raise ConversionFailed(f"failed: {e}") from None
        uid = new_uid()
        body = orjson.dumps({"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview",
                             "request": {"uid": uid, "desiredAPIVersion": desired_api_version,
                                         "objects": objs}})
        self.calls += 1

        async def post() -> tuple[int, str, bytes]:
            headers: dict[bytes | str, list[bytes | str]] = {
                "Content-Type": ["application/json"], "Accept": ["application/json, */*"],
                "User-Agent": ["kapiserver-conversion"]}
            response = await client.post(url, data=body, headers=headers)
            content = await treq.content(response)
            ctype = (response.headers.getRawHeaders("content-type") or [""])[0]
            return response.code, ctype, content

        d = defer.Deferred.fromCoroutine(post())
        d.addTimeout(timeout, self.reactor)
        try:
            code, ctype, content = await d
        except Exception as e:  # transport failures, TLS, timeout
            raise ConversionFailed(f"failed: {describe_post_failure(e, url, CLIENT_TIMEOUT)}") from None
        return self._review_objects(uid, code, ctype, content)

    def _review_objects(self, uid: str, code: int, ctype: str, content: bytes) -> list:
        """Check the ConversionReview the webhook answered; its convertedObjects."""
        if not 200 <= code <= 206:
            detail = content.decode("utf-8", "replace").strip()
            try:
                status = orjson.loads(content)
                if isinstance(status, dict) and status.get("kind") == "Status" and status.get("message"):
                    raise ConversionFailed(f"failed: {status['message']}")
            except orjson.JSONDecodeError:
                pass
            raise ConversionFailed(f'failed: an error on the server ("{detail[:256]}") has prevented the request '
                                   "from succeeding")
        if not content:
            raise ConversionFailed(f"failed: 0-length response with status code: {code} and content type: {ctype}")
        try:
            review = orjson.loads(content)
        except orjson.JSONDecodeError as e:
            raise ConversionFailed(f"failed: cannot decode the webhook response: {e}") from None
        if not isinstance(review, dict):
            raise ConversionFailed("failed: the webhook response is not a JSON object")
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != "ConversionReview":
            raise ConversionFailed(f"failed: expected webhook response of {REVIEW_API_VERSION}, "
                                   f"Kind=ConversionReview, got {got}")
        response = review.get("response")
        if not isinstance(response, dict):
            raise ConversionFailed("failed: no response provided")
        if response.get("uid", "") != uid:
            raise ConversionFailed(f'failed: expected response.uid="{uid}", got "{response.get("uid", "")}"')
        result = response.get("result") or {}
        if result.get("status") != "Success":
            if result.get("message"):
                raise ConversionFailed(f"failed: {result['message']}")
            raise ConversionFailed(f"failed: response.result.status was '{result.get('status', '')}', "
                                   "not 'Success'")
        converted = response.get("convertedObjects") or []
        if not isinstance(converted, list):
            raise ConversionFailed("failed: response.convertedObjects is not a list")
        return converted

    # ------------------------------------------------------------ checking one object

    def _checked(self, index: int, original: dict, got: Any, desired_api_version: str) -> dict:
        """One converted object, validated, with the original metadata restored
        (but the webhook's labels and annotations)."""
        bad = f"returned invalid converted object at index {index}"
        if not isinstance(got, dict):
            raise ConversionFailed(f"{bad}: not an object")
        if got.get("apiVersion") != desired_api_version:
            raise ConversionFailed(f"{bad}: invalid groupVersion (expected {desired_api_version}, "
                                   f"received {got.get('apiVersion', '')})")
        if got.get("kind") != original.get("kind"):
            raise ConversionFailed(f"{bad}: invalid kind (expected {original.get('kind', '')}, "
                                   f"received {got.get('kind', '')})")
        old_md = original.get("metadata") or {}
        new_md = got.get("metadata")
        if new_md is None:
            raise ConversionFailed(f"returned invalid metadata in object at index {index}: "
                                   "missing metadata in converted object")
        if not isinstance(new_md, dict):
            raise ConversionFailed(f"returned invalid metadata in object at index {index}: invalid metadata "
                                   "in converted object")
        for fieldname, label in (("name", "name"), ("namespace", "namespace"), ("uid", "UID")):
            if old_md.get(fieldname, "") != new_md.get(fieldname, ""):
                raise ConversionFailed(f"{bad}: must have the same {label}: {old_md.get(fieldname, '')} != "
                                       f"{new_md.get(fieldname, '')}")
        md = orjson.loads(orjson.dumps(old_md))  # a private copy of the original metadata
        for fieldname in ("labels", "annotations"):
            value = new_md.get(fieldname)
            if value is None:
                md.pop(fieldname, None)
                continue
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise ConversionFailed(f"returned invalid metadata in object at index {index}: "
                                       f"metadata.{fieldname} must be a map of strings")
            if value != (old_md.get(fieldname) or {}):
                check = (validation.validate_labels if fieldname == "labels"
                         else validation.validate_annotations)
                causes = check(value, f"metadata.{fieldname}")
                if causes:
                    raise ConversionFailed(f"returned invalid metadata in object at index {index}: "
                                           + "; ".join(f"{c.field}: {c.message}" for c in causes))
            md[fieldname] = value
        out = dict(got)
        out["metadata"] = md
        return out


