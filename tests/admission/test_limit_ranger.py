"""LimitRanger's defaulting and checks on plain objects, with upstream's messages."""
from __future__ import annotations

from twisted.trial import unittest

from kapiserver.admission.limit_ranger import apply_defaults, claim_problems, pod_problems


def pod(*containers: dict, init: tuple = ()) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": list(containers), "initContainers": list(init)}}


def container(name: str, requests: dict = None, limits: dict = None) -> dict:
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources}


def limit_range(*items: dict) -> dict:
    return {"metadata": {"name": "l"}, "spec": {"limits": list(items)}}


class LimitRangerTests(unittest.TestCase):
    def test_defaults_reach_init_containers_and_keep_what_is_set(self):
        p = pod(container("app", limits={"memory": "1Gi"}), init=(container("setup"),))
        apply_defaults(limit_range({"type": "Container", "default": {"cpu": "1", "memory": "512Mi"},
                                    "defaultRequest": {"cpu": "200m"}}), p)
        self.assertEqual(p["spec"]["containers"][0]["resources"],
                         {"requests": {"cpu": "200m"}, "limits": {"memory": "1Gi", "cpu": "1"}})
        self.assertEqual(p["spec"]["initContainers"][0]["resources"],
                         {"requests": {"cpu": "200m"}, "limits": {"cpu": "1", "memory": "512Mi"}})
        self.assertEqual(p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
                         "LimitRanger plugin set: cpu request for container app; cpu limit for container app; "
                         "cpu request for init container setup; cpu, memory limit for init container setup")

    def test_nothing_to_default_leaves_the_pod_alone(self):
        p = pod(container("app"))
        apply_defaults(limit_range({"type": "Pod", "max": {"cpu": "2"}}), p)
        self.assertNotIn("annotations", p["metadata"])

    def test_pod_items_count_the_sum_of_containers(self):
        lr = limit_range({"type": "Pod", "max": {"cpu": "1"}, "min": {"memory": "64Mi"}})
        p = pod(container("a", requests={"cpu": "600m", "memory": "32Mi"}, limits={"cpu": "600m"}),
                container("b", requests={"cpu": "600m", "memory": "32Mi"}, limits={"cpu": "600m"}))
        # memory: 32Mi + 32Mi meets the minimum; cpu: 600m + 600m is over the maximum
        self.assertEqual(pod_problems(lr, p), ["maximum cpu usage per Pod is 1, but limit is 1200m"])

    def test_container_min_without_a_request(self):
        lr = limit_range({"type": "Container", "min": {"cpu": "100m"}})
        self.assertEqual(pod_problems(lr, pod(container("a"))),
                         ["minimum cpu usage per Container is 100m.  No request is specified"])

    def test_claims_count_only_storage_requests(self):
        lr = limit_range({"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}})
        claim = {"spec": {"resources": {"requests": {"storage": "2Gi"}, "limits": {"storage": "500Mi"}}}}
        self.assertEqual(claim_problems(lr, claim),
                         ["maximum storage usage per PersistentVolumeClaim is 1Gi, but request is 2Gi"])
        self.assertEqual(claim_problems(limit_range({"type": "Container", "max": {"cpu": "1"}}), claim), [])
