"""EventRateLimit (upstream's opt-in admission plugin of that name).

Limits how fast core/v1 Events are created or updated, with token buckets
(``qps`` refill, ``burst`` capacity) per limit ``type``: ``Server`` (one
bucket), ``Namespace``, ``User`` and ``SourceAndObject`` (one bucket per
key, the ``cacheSize`` most recent keys kept, 4096 by default).  A request
over any limit is answered 429 ``Too many requests: limit reached on type
Namespace for key default``.  Dry runs are not counted.  The limits come from
the plugin's configuration, which upstream requires::

    apiVersion: eventratelimit.admission.k8s.io/v1alpha1
    kind: Configuration
    limits:
    - type: Namespace
      qps: 50
      burst: 100
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Optional

import yaml

from kapiserver.admission.errors import PluginError
from kapiserver.machinery import errors
from kapiserver.registry.admission import CREATE, UPDATE, AdmissionPlugin, Attributes

PLUGIN_NAME = "EventRateLimit"
LIMIT_TYPES = ("Server", "Namespace", "User", "SourceAndObject")
DEFAULT_CACHE_SIZE = 4096
API_VERSION = "eventratelimit.admission.k8s.io/v1alpha1"


class EventRateLimitConfigError(ValueError):
    """The configuration cannot be used; ``str()`` is one line, as upstream's aggregate."""


class TokenBucket:
    """client-go's token bucket rate limiter (TryAccept): starts full."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float]) -> None:
        self.qps, self.burst, self.clock = qps, burst, clock
        self.tokens = float(burst)
        self.last = clock()

    def try_accept(self) -> bool:
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.last) * self.qps)
        self.last = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def _key(limit_type: str, attrs: Attributes) -> str:
    if limit_type == "Server":
        return ""
    if limit_type == "Namespace":
        return attrs.namespace
    if limit_type == "User":
        return attrs.user.name if attrs.user is not None else ""
    event = attrs.obj if isinstance(attrs.obj, dict) else {}
    source, involved = event.get("source") or {}, event.get("involvedObject") or {}
    return "".join(str(x or "") for x in (source.get("component"), source.get("host"), involved.get("kind"),
                                          involved.get("namespace"), involved.get("name"), involved.get("uid"),
                                          involved.get("apiVersion")))


class _Limit:
    def __init__(self, config: dict, clock: Callable[[], float]) -> None:
        self.type = config["type"]
        self.qps, self.burst = float(config["qps"]), int(config["burst"])
        self.size = int(config.get("cacheSize") or DEFAULT_CACHE_SIZE)
        self.clock = clock
        self.buckets: "OrderedDict[str, TokenBucket]" = OrderedDict()

    def accept(self, attrs: Attributes) -> Optional[str]:
        key = _key(self.type, attrs)
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = TokenBucket(self.qps, self.burst, self.clock)
            if len(self.buckets) > self.size:
                self.buckets.popitem(last=False)
        else:
            self.buckets.move_to_end(key)
        if bucket.try_accept():
            return None
        return f"limit reached on type {self.type} for key {key}"


def parse_configuration(data: Optional[bytes]) -> list[dict]:
    """The limits, validated as upstream's ValidateConfiguration."""
    config: Any = {}
    if data:
        try:
            config = yaml.safe_load(data) or {}
        except yaml.YAMLError as e:
            raise EventRateLimitConfigError(f"EventRateLimit configuration: invalid YAML: {e}") from None
        if not isinstance(config, dict) or config.get("kind") != "Configuration" or \
                config.get("apiVersion") != API_VERSION:
            raise EventRateLimitConfigError(f"EventRateLimit configuration: expected apiVersion {API_VERSION}, "
                                            f"kind Configuration")
    limits = config.get("limits") or []
    problems = []
    if not isinstance(limits, list) or not limits:
        problems.append("limits: Invalid value: []eventratelimit.Limit(nil): must not be empty")
        limits = []
    for i, limit in enumerate(limits):
        limit = limit if isinstance(limit, dict) else {}
        where = f"limits[{i}]"
        if limit.get("type") not in LIMIT_TYPES:
            problems.append(f'{where}.type: Unsupported value: "{limit.get("type") or ""}": supported values: '
                            + ", ".join(f'"{t}"' for t in LIMIT_TYPES))
        for name, what in (("burst", "must be positive"), ("qps", "must be positive")):
            value = limit.get(name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                problems.append(f"{where}.{name}: Invalid value: {value or 0}: {what}")
        size = limit.get("cacheSize", 0)
        if limit.get("type") != "Server" and (not isinstance(size, int) or size < 0):
            problems.append(f"{where}.cacheSize: Invalid value: {size}: must not be negative")
    if problems:
        raise EventRateLimitConfigError(problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
    return limits


class EventRateLimit(AdmissionPlugin):
    name = PLUGIN_NAME
    validating = True
    operations = (CREATE, UPDATE)

    def __init__(self, limits: list[dict], clock: Callable[[], float]) -> None:
        self.limits = [_Limit(limit, clock) for limit in limits]

    async def validate(self, attrs: Attributes) -> None:
        if attrs.gvk.group != "" or attrs.gvk.kind != "Event" or attrs.dry_run:
            return
        refused = [why for why in (limit.accept(attrs) for limit in self.limits) if why]
        if refused:
            text = refused[0] if len(refused) == 1 else "[" + ", ".join(refused) + "]"
            # upstream's NewTooManyRequestsError: no Retry-After, no details
            raise errors.StatusError(429, "TooManyRequests", f"Too many requests: {text}")


def event_rate_limit(config: Optional[bytes], deps: Any) -> EventRateLimit:
    try:
        limits = parse_configuration(config)
    except EventRateLimitConfigError as e:
        raise PluginError(str(e)) from None
    return EventRateLimit(limits, deps.reactor.seconds)
