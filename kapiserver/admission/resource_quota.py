"""ResourceQuota (upstream's admission plugin of that name, the last of the chain).

A create or update in a namespace with ResourceQuotas is charged against
every quota that tracks what the object uses (``quota/evaluators.py``): when
the sum would go over ``status.hard`` the request is refused with upstream's
403 (``exceeded quota: q, requested: pods=1, used: pods=2, limited:
pods=2``); otherwise the new usage is written to the quota's ``status.used``
before the object is stored, as upstream does, with an optimistic-concurrency
update of the quota's status: of two creates racing for the last slot (on one
server or on several), one write of the quota wins and the other is checked
again against the winner's usage.  On one server the requests of a namespace
are checked one at a time (upstream's per-namespace work queue), so they do
not even conflict.  The quota controller (``controllers/resource_quota.py``,
or kube-controller-manager's) recomputes ``status.used`` from what exists and
gives back what deleted objects used.

Also as upstream: a quota whose ``status.used`` does not yet count a tracked
resource refuses ("status unknown for quota") until the controller filled it;
a quota tracking cpu or memory requests or limits refuses pods whose
containers do not set them ("must specify ..."); ``limitedResources`` in the
plugin's configuration (a ``ResourceQuotaConfiguration``) makes some
resources consumable only where a quota covers them.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from twisted.internet import defer
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from kapiserver.admission.errors import PluginError, admission_forbidden
from kapiserver.machinery import codec, errors
from kapiserver.machinery.fields import parse_field_selector
from kapiserver.machinery.labels import parse_label_selector
from kapiserver.quota import resources as rl
from kapiserver.quota.evaluators import Evaluator, Registry, scope_selectors, scope_text
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes

log = Logger()
PLUGIN_NAME = "ResourceQuota"
CONFIG_KINDS = {("apiserver.config.k8s.io/v1", "ResourceQuotaConfiguration"),
                ("resourcequota.admission.k8s.io/v1beta1", "Configuration"),
                ("resourcequota.admission.k8s.io/v1alpha1", "Configuration")}
# what upstream's evaluator does before it gives up on a quota that keeps changing under it
UPDATE_RETRIES = 3


class QuotaConfigError(ValueError):
    """The plugin configuration cannot be used; ``str()`` is one line."""


def parse_configuration(data: Optional[bytes]) -> list[dict]:
    """``limitedResources`` of a ResourceQuotaConfiguration (empty without one)."""
    if not data:
        return []
    import yaml  # (with a plugin configuration only)

    try:
        config = yaml.safe_load(data)
    except yaml.YAMLError as e:
        raise QuotaConfigError(f"ResourceQuota configuration: invalid YAML: {e}") from None
    if not isinstance(config, dict):
        raise QuotaConfigError("ResourceQuota configuration: must be a ResourceQuotaConfiguration object")
    if (config.get("apiVersion"), config.get("kind")) not in CONFIG_KINDS:
        raise QuotaConfigError(f"ResourceQuota configuration: unexpected apiVersion {config.get('apiVersion')!r} "
                               f"kind {config.get('kind')!r}")
    limited = config.get("limitedResources") or []
    if not isinstance(limited, list):
        raise QuotaConfigError("ResourceQuota configuration: limitedResources must be a list")
    for i, entry in enumerate(limited):
        if not isinstance(entry, dict) or not entry.get("resource"):
            raise QuotaConfigError(f"limitedResources[{i}].resource: Required value")
    return limited


def _limited_names(usage: rl.ResourceList, limited: list[dict]) -> set[str]:
    """upstream's limitedByDefault: used names containing one of ``matchContains``."""
    out = set()
    for entry in limited:
        for name, value in usage.items():
            if value.sign() > 0 and any(part in name for part in entry.get("matchContains") or []):
                out.add(name)
    return out


def check_request(quotas: list[dict], attrs: Attributes, evaluator: Evaluator,
                  limited: list[dict]) -> list[dict]:
    """upstream's CheckRequest: the quotas with the request's usage added (copies, for the
    ones it changes), or a StatusError refusing the request."""
    if not evaluator.handles(attrs.operation, attrs.subresource):
        return quotas
    obj = codec.copy_json(attrs.obj or {})
    md = obj.setdefault("metadata", {})
    if attrs.namespace and not md.get("namespace"):
        md["namespace"] = attrs.namespace
    limited_scopes = []
    for entry in limited:
        limited_scopes += evaluator.matching_scopes(obj, [s for s in entry.get("matchScopes") or []
                                                          if isinstance(s, dict)])
    limited_here = [e for e in limited
                    if (e.get("apiGroup") or "", e.get("resource")) == (attrs.rtype.group, attrs.rtype.plural)]
    limited_names = _limited_names(evaluator.usage(obj), limited_here) if limited_here else set()

    interesting: list[int] = []
    restricted: set[str] = set()
    restricted_scopes: list[dict] = []
    for i, quota in enumerate(quotas):
        restricted_scopes += evaluator.matching_scopes(obj, scope_selectors(quota))
        if not evaluator.matches(quota, obj):
            continue
        name = quota["metadata"]["name"]
        status = quota.get("status") or {}
        hard_names = list((status.get("hard") or {}).keys())
        tracked = evaluator.matching_resources(hard_names)
        why = evaluator.constraints(tracked, obj)
        if why:
            raise admission_forbidden(attrs, f"failed quota: {name}: {why}")
        used = status.get("used") or {}
        if any(r not in used for r in tracked):
            raise admission_forbidden(attrs, f"status unknown for quota: {name}, resources: "
                                             f"{','.join(sorted(tracked))}")
        interesting.append(i)
        restricted.update(tracked)

    delta = evaluator.usage(obj)
    below_zero = rl.negative(delta)
    if below_zero:
        raise admission_forbidden(attrs, "quota usage is negative for resource(s): " + ",".join(sorted(below_zero)))
    if attrs.operation == UPDATE:
        old = attrs.old_obj
        if old is None:
            raise admission_forbidden(attrs, "unable to get previous usage since prior version of object was not "
                                             "found")
        if (old.get("metadata") or {}).get("resourceVersion"):
            delta = rl.subtract_non_negative(delta, evaluator.usage(old))
    delta = rl.remove_zeros(delta)
    if not delta:
        return quotas
    uncovered = limited_names - restricted
    if uncovered:
        raise admission_forbidden(attrs, "insufficient quota to consume: " + ",".join(sorted(uncovered)))
    uncovered_scopes = evaluator.uncovered_scopes(limited_scopes, restricted_scopes)
    if uncovered_scopes:
        raise errors.StatusError(500, "", "insufficient quota to match these scopes: ["
                                 + " ".join(scope_text(s) for s in uncovered_scopes) + "]")
    if not interesting:
        return quotas

    out = list(quotas)
    for i in interesting:
        quota = codec.copy_json(quotas[i])
        status = quota.setdefault("status", {})
        hard = rl.parse_list(status.get("hard"))
        used = rl.parse_list(status.get("used"))
        requested = rl.mask(delta, hard)
        new_used = rl.add(used, requested)
        allowed, exceeded = rl.less_than_or_equal(rl.mask(new_used, requested), hard)
        if not allowed:
            raise admission_forbidden(attrs, f"exceeded quota: {quota['metadata']['name']}, "
                                             f"requested: {rl.pretty(rl.mask(requested, exceeded))}, "
                                             f"used: {rl.pretty(rl.mask(used, exceeded))}, "
                                             f"limited: {rl.pretty(rl.mask(hard, exceeded))}")
        status["used"] = rl.to_json(new_used)
        out[i] = quota
    return out


def _used_changed(old: dict, new: dict) -> bool:
    return not rl.equals(rl.parse_list((old.get("status") or {}).get("used")),
                         rl.parse_list((new.get("status") or {}).get("used")))


def _rv(obj: dict) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


class ResourceQuota(AdmissionPlugin):
    name = PLUGIN_NAME
    validating = True
    operations = (CREATE, UPDATE)

    def __init__(self, quota_store: Callable[[], Any], reactor: IReactorTime, limited: Optional[list[dict]] = None,
                 registry: Optional[Registry] = None) -> None:
        self._store = quota_store  # lazily: the Store of resourcequotas
        self.reactor = reactor
        self.limited = limited or []
        self.registry = registry or Registry()
        self._informer: Any = None
        self._by_namespace: dict[str, dict[str, dict]] = {}
        # quotas this plugin wrote, until the informer has caught up with them (upstream's updatedQuotas)
        self._written: dict[tuple[str, str], dict] = {}
        self._locks: dict[str, defer.DeferredLock] = {}

    async def start(self) -> None:
        from kapiserver.registry.informer import Informer
        self._informer = Informer(self._store(), self._on_event, self.reactor)
        self._informer.start()

    async def stop(self) -> None:
        if self._informer is not None:
            self._informer.stop()

    def _on_event(self, event_type: str, obj: dict) -> None:
        md = obj.get("metadata") or {}
        namespace, name = md.get("namespace", ""), md.get("name", "")
        if event_type == "DELETED":
            self._by_namespace.get(namespace, {}).pop(name, None)
            self._written.pop((namespace, name), None)
        else:
            self._by_namespace.setdefault(namespace, {})[name] = obj

    async def quotas(self, namespace: str) -> list[dict]:
        """The namespace's quotas: the informer's (a live list until it has synced), each replaced
        by the one this plugin last wrote when that is newer."""
        if self._informer is not None and self._informer.synced.called:
            items = list(self._by_namespace.get(namespace, {}).values())
        else:
            from kapiserver.registry.options import ListOptions
            listed = await self._store().list(namespace, ListOptions(parse_label_selector(""),
                                                                     parse_field_selector("")))
            items = listed["items"]
        out = []
        for item in items:
            key = (namespace, item["metadata"]["name"])
            written = self._written.get(key)
            if written is not None and _rv(written) > _rv(item):
                item = written
            else:
                self._written.pop(key, None)
            out.append(item)
        return sorted(out, key=lambda q: q["metadata"]["name"])

    async def validate(self, attrs: Attributes) -> None:
        if not attrs.namespace or not attrs.rtype.namespaced:
            return
        evaluator = self.registry.get(attrs.rtype.group, attrs.rtype.plural)
        if evaluator is None or not evaluator.handles(attrs.operation, attrs.subresource):
            return
        namespace = attrs.namespace
        if not self.limited and not await self.quotas(namespace):
            return
        lock = self._locks.get(namespace)
        if lock is None:
            lock = self._locks[namespace] = defer.DeferredLock()
        await lock.acquire()
        try:
            await self._charge(attrs, evaluator, await self.quotas(namespace))
        finally:
            lock.release()
            if not lock.locked and not lock.waiting:
                self._locks.pop(namespace, None)

    async def _charge(self, attrs: Attributes, evaluator: Evaluator, quotas: list[dict]) -> None:
        """Check the request against ``quotas`` and write the new usage; quotas whose write
        conflicted are read again and checked again (upstream's checkQuotas)."""
        from kapiserver.registry.context import Context
        store = self._store()
        for attempt in range(UPDATE_RETRIES + 1):
            charged = check_request(quotas, attrs, evaluator, self.limited)
            if attrs.dry_run:
                return
            changed = [new for old, new in zip(quotas, charged) if _used_changed(old, new)]
            failed: list[str] = []
            last_error: Optional[errors.StatusError] = None
            for quota in changed:
                md = quota["metadata"]
                try:
                    written, _ = await store.update(md["namespace"], md["name"], quota, "status", Context())
                except errors.StatusError as e:
                    if e.code not in (404, 409):
                        raise
                    failed.append(md["name"])
                    last_error = e
                    continue
                self._written[(md["namespace"], md["name"])] = written
            if not failed:
                return
            if attempt == UPDATE_RETRIES:
                assert last_error is not None
                raise last_error
            quotas = []
            for name in failed:
                try:
                    quotas.append(await store.get(attrs.namespace, name))
                except errors.StatusError as e:
                    if e.code != 404:  # a quota deleted meanwhile charges nothing
                        raise


def resource_quota(config: Optional[bytes], deps: Any) -> ResourceQuota:
    """The plugin factory (``admission/plugins.py``)."""
    try:
        limited = parse_configuration(config)
    except QuotaConfigError as e:
        raise PluginError(str(e)) from None
    return ResourceQuota(lambda: deps.store("", "v1", "resourcequotas"), deps.reactor, limited)
