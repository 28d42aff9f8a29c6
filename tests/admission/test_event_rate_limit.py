"""EventRateLimit (opt-in): token buckets per limit type, upstream's 429 message and
configuration errors, and on an in-process server configured through the admission file."""
from __future__ import annotations

import os
import tempfile

import yaml
from twisted.trial import unittest

from kapiserver.admission.event_rate_limit import (EventRateLimit, EventRateLimitConfigError, TokenBucket,
                                                   parse_configuration)
from kapiserver.testing.cases import ServerTestCase, run

CONFIG = {"apiVersion": "eventratelimit.admission.k8s.io/v1alpha1", "kind": "Configuration",
          "limits": [{"type": "Namespace", "qps": 1, "burst": 3}]}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class PieceTests(unittest.TestCase):
    def test_bucket_starts_full_and_refills_at_qps(self):
        clock = Clock()
        bucket = TokenBucket(2.0, 2, clock)
        self.assertEqual([bucket.try_accept() for _ in range(3)], [True, True, False])
        clock.now += 0.5  # one token back
        self.assertEqual([bucket.try_accept() for _ in range(2)], [True, False])

    def test_configuration_is_required_and_validated(self):
        with self.assertRaises(EventRateLimitConfigError) as caught:
            parse_configuration(None)
        self.assertEqual(str(caught.exception), "limits: Invalid value: []eventratelimit.Limit(nil): must not be "
                                                "empty")
        bad = dict(CONFIG, limits=[{"type": "Pod", "qps": 0, "burst": 1}])
        with self.assertRaises(EventRateLimitConfigError) as caught:
            parse_configuration(yaml.safe_dump(bad).encode())
        self.assertIn('limits[0].type: Unsupported value: "Pod"', str(caught.exception))
        self.assertIn("limits[0].qps: Invalid value: 0: must be positive", str(caught.exception))
        self.assertEqual(len(parse_configuration(yaml.safe_dump(CONFIG).encode())), 1)


def event(name: str, namespace: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
            "reason": "Test", "message": "m", "type": "Normal"}


class InProcessTests(ServerTestCase):
    def setUp(self):
        directory = tempfile.mkdtemp(prefix="kapiserver-erl-")
        path = os.path.join(directory, "admission.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                            "plugins": [{"name": "EventRateLimit", "configuration": CONFIG}]}, f)
        self.settings = {"enable_admission_plugins": ["EventRateLimit"], "admission_config_file": path}
        return super().setUp()

    @run
    async def test_events_over_the_burst_get_429(self):
        self.assertIsInstance(self.server.api.admission.plugin("EventRateLimit"), EventRateLimit)
        codes = []
        for i in range(4):
            reply = await self.client.post("/api/v1/namespaces/default/events", event(f"e{i}"))
            codes.append(reply.code)
        self.assertEqual(codes[:3], [201, 201, 201])
        self.assertEqual(codes[3], 429)
        self.assertEqual(reply.body["reason"], "TooManyRequests")
        self.assertEqual(reply.body["message"], "Too many requests: limit reached on type Namespace for key default")
        # another namespace has its own bucket; other kinds are not limited
        reply = await self.client.post("/api/v1/namespaces/kube-public/events", event("x", "kube-public"))
        self.assertEqual(reply.code, 201)
        reply = await self.client.post("/api/v1/namespaces/default/configmaps",
                                       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})
        self.assertEqual(reply.code, 201)
