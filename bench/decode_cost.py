"""CPU cost of decoding one request body, in process (no HTTP, no storage).

``python3 bench/decode_cost.py``

For a few bodies (a small ConfigMap, a Deployment, a Pod, a 100 KB ConfigMap)
it prints microseconds per body of:

* ``untyped``: what the server did before typed decoding: ``orjson.loads``
  and the ``fieldValidation=Warn`` unknown/duplicate field scan
  (``machinery/fieldvalidation.check_fields`` with the raw JSON);
* ``typed``: what it does now (``endpoints/request_decoder.py``): parse,
  type meta, the precompiled Go-type decoder (a checked, cleaned copy), and
  the duplicate-key count;
* ``yaml``: the same body sent as YAML (``machinery/yamljson.py``) then typed.
"""
from __future__ import annotations

import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import orjson  # noqa: E402
import yaml  # noqa: E402

from kapiserver.endpoints import request_decoder  # noqa: E402
from kapiserver.machinery import fieldvalidation, schema_decoder, yamljson  # noqa: E402
from kapiserver.machinery.openapi_definitions import load_definitions  # noqa: E402

BODIES = {
    "ConfigMap, 200 B of data": ("io.k8s.api.core.v1.ConfigMap", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-000001", "labels": {"app": "bench"}},
        "data": {"key": "v" * 200}}),
    "Deployment": ("io.k8s.api.apps.v1.Deployment", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "strategy": {
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                "name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": f"E{i}", "value": str(i)} for i in range(10)],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5}}]}}}}),
    "Pod, 3 containers": ("io.k8s.api.core.v1.Pod", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "b" * 100}},
        "spec": {"containers": [{"name": f"c{i}", "image": "busybox", "command": ["sh", "-c", "sleep 1d"],
                                 "volumeMounts": [{"name": "v", "mountPath": "/v"}]} for i in range(3)],
                 "volumes": [{"name": "v", "emptyDir": {}}], "tolerations": [
                     {"key": "k", "operator": "Exists", "effect": "NoSchedule"}]}}),
    "ConfigMap, 100 KB in 1,000 keys": ("io.k8s.api.core.v1.ConfigMap", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {f"k{i:04d}": "x" * 100 for i in range(1000)}}),
}


def per_call_us(fn, seconds: float = 0.5) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    defs = load_definitions()
    resolve = defs.resolve_ref
    print("| body | bytes | untyped µs | typed µs | typed / untyped | YAML → typed µs |")
    print("|---|---|---|---|---|---|")
    for label, (definition, obj) in BODIES.items():
        raw = orjson.dumps(obj)
        text = yaml.safe_dump(obj).encode()
        schema = {"$ref": f"#/definitions/{definition}"}
        schema_decoder.decoder_for(definition)  # compiled once, as on the first request of the kind

        def untyped() -> None:
            parsed = orjson.loads(raw)
            fieldvalidation.check_fields(parsed, raw, schema, resolve, "Warn")

        def typed() -> None:
            parsed = request_decoder.parse(raw, "application/json", obj["kind"])
            kind, version = parsed.obj["kind"], "v1"
            clean, unknown, members = request_decoder.decode_typed(parsed.obj, definition, kind, version, kind)
            request_decoder.json_duplicates(raw, members)

        def from_yaml() -> None:
            value = yamljson.yaml_to_json(text, [])
            request_decoder.decode_typed(value, definition, obj["kind"], "v1", obj["kind"])

        a, b, c = per_call_us(untyped), per_call_us(typed), per_call_us(from_yaml)
        print(f"| {label} | {len(raw):,} | {a:,.0f} | {b:,.0f} | {b / a:.2f} | {c:,.0f} |")
    print()
    print(json.dumps({"python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
