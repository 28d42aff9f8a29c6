#!/usr/bin/env python3
"""Pod start latency on a real node: one pod at a time, then a Deployment's replicas, against any kubeconfig.

Run it against kapiserver and kube-apiserver with the same node (the node kit,
``shared/anchor/node/``) and compare: the API server's share of a pod start is
the scheduler's watch and bind, the kubelet's watch, its status patches and the
controllers' round trips.  Times are taken from this client's clock: from the
create call to the first watch event that shows the pod Ready (and, for the
Deployment, all replicas Ready).

    bench/pod_start.py KUBECONFIG [--single 10] [--replicas 100] [--image IMAGE]

Prints one line per figure: median, min and max of the single-pod starts; the
Deployment's time to all Ready and its per-pod median; and when each phase of a
single start was seen (scheduled, running, ready).
"""
from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

from kubernetes import client, config, watch

IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.37.0-1"


def ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


class PodWatcher:
    """Watches a namespace's pods; records when each was first scheduled, running and Ready."""

    def __init__(self, core: client.CoreV1Api, namespace: str) -> None:
        self.core = core
        self.namespace = namespace
        self.seen: dict[str, dict[str, float]] = {}
        self.lock = threading.Condition()
        self.stopped = False
        self.watcher = watch.Watch()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped:
            try:
                for event in self.watcher.stream(self.core.list_namespaced_pod, self.namespace, timeout_seconds=300):
                    pod = event["object"]
                    now = time.monotonic()
                    with self.lock:
                        marks = self.seen.setdefault(pod.metadata.name, {})
                        if pod.spec.node_name and "scheduled" not in marks:
                            marks["scheduled"] = now
                        if pod.status.phase == "Running" and "running" not in marks:
                            marks["running"] = now
                        if ready(pod) and "ready" not in marks:
                            marks["ready"] = now
                        self.lock.notify_all()
                    if self.stopped:
                        return
            except Exception:  # a watch that ended: watch again
                if not self.stopped:
                    time.sleep(0.1)

    def wait(self, names, mark: str = "ready", timeout: float = 600.0) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                found = {n: self.seen.get(n, {}).get(mark) for n in names}
                if all(v is not None for v in found.values()):
                    return {n: v for n, v in found.items() if v is not None}
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{sum(v is None for v in found.values())} pods not {mark} in {timeout}s")
                self.lock.wait(remaining)

    def stop(self) -> None:
        self.stopped = True
        self.watcher.stop()


def pod_manifest(name: str, image: str, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": image, "command": ["sleep", "3600"],
                                     "imagePullPolicy": "IfNotPresent"}]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfig")
    parser.add_argument("--single", type=int, default=10, help="single pods started one after another")
    parser.add_argument("--replicas", type=int, default=100, help="replicas of the Deployment (0: none)")
    parser.add_argument("--image", default=IMAGE)
    args = parser.parse_args()
    config.load_kube_config(args.kubeconfig)
    core, apps = client.CoreV1Api(), client.AppsV1Api()
    namespace = "podstart-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": namespace}})
    deadline = time.monotonic() + 60
    while True:  # the namespace's default ServiceAccount (kube-controller-manager)
        try:
            core.read_namespaced_service_account("default", namespace)
            break
        except client.ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    watcher = PodWatcher(core, namespace)
    try:
        starts, phases = [], {"scheduled": [], "running": [], "ready": []}
        for i in range(args.single):
            name = f"single-{i}"
            t0 = time.monotonic()
            core.create_namespaced_pod(namespace, pod_manifest(name, args.image))
            marks = watcher.wait([name])
            with watcher.lock:
                seen = dict(watcher.seen[name])
            starts.append(marks[name] - t0)
            for phase in phases:
                if phase in seen:
                    phases[phase].append(seen[phase] - t0)
            core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        if starts:
            print(f"single pod create->Ready: median {statistics.median(starts):.3f}s min {min(starts):.3f}s "
                  f"max {max(starts):.3f}s over {len(starts)}")
            for phase, values in phases.items():
                if values:
                    print(f"  {phase:9s} median {statistics.median(values):.3f}s")
        if args.replicas:
            labels = {"app": "podstart"}
            deployment = {"metadata": {"name": "many"},
                          "spec": {"replicas": args.replicas, "selector": {"matchLabels": labels},
                                   "template": {"metadata": {"labels": labels},
                                                "spec": pod_manifest("x", args.image)["spec"]}}}
            t0 = time.monotonic()
            apps.create_namespaced_deployment(namespace, deployment)
            names: list[str] = []
            wait_until = time.monotonic() + 120
            while len(names) < args.replicas and time.monotonic() < wait_until:
                with watcher.lock:
                    names = [n for n in watcher.seen if n.startswith("many-")]
                time.sleep(0.05)
            marks = watcher.wait(names, timeout=900)
            times = sorted(v - t0 for v in marks.values())
            print(f"deployment of {args.replicas}: all Ready {times[-1]:.2f}s after create; "
                  f"per pod median {statistics.median(times):.2f}s, first {times[0]:.2f}s")
    finally:
        watcher.stop()
        core.delete_namespace(namespace)


if __name__ == "__main__":
    main()
