"""What admission adds to a request: no webhooks or policies, one local webhook, one policy.

``python3 bench/admission.py [--requests 400] [--tmpfs]``

One server; ConfigMap creates one at a time over a keep-alive HTTPS
connection, written and ``dryRun=All`` (no storage write: the request
handling alone), in four configurations applied in turn:

1. no webhook configurations and no policies (the chain still runs
   NamespaceLifecycle and finds nothing to call);
2. one validating webhook (HTTPS on 127.0.0.1, a plain-Python server in this
   process, answering allowed at once);
3. one mutating webhook adding a label (a JSON patch applied and decoded);
4. one ValidatingAdmissionPolicy with a binding (two validations and a
   variable, on the ConfigMap's data).

Prints p50/mean/p99 in milliseconds per configuration, and each one's
overhead over the first; then the policy evaluation alone, in process
(µs per request: matching, parameters, CEL).  The webhook server runs in this
process and shares the CPUs with the client and the server: on a small
machine the webhook numbers are an upper bound of what the server adds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import Client, ensure_namespace, machine, print_table, scratch_dir, server_config  # noqa: E402
from _common import ServerProcess  # noqa: E402

NS = "bench-admission"
PATH = f"/api/v1/namespaces/{NS}/configmaps"
GROUP = "/apis/admissionregistration.k8s.io/v1"
RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def configmap(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "labels": {"app": "bench"}},
            "data": {f"key-{k}": f"value-{k}" for k in range(8)}}


def timed(client: Client, n: int, start: int, query: str) -> list[float]:
    out = []
    for i in range(start, start + n):
        body = json.dumps(configmap(i)).encode()
        t0 = time.perf_counter()
        status, data = client.request("POST", PATH + query, body)
        out.append(time.perf_counter() - t0)
        if status >= 400:
            raise RuntimeError(f"create: {status} {data[:300]!r}")
    return out


def stats(samples: list[float]) -> tuple[float, float, float]:
    ordered = sorted(samples)
    return (statistics.median(ordered) * 1000, statistics.mean(ordered) * 1000,
            ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000)


def webhook_configuration(kind: str, url: str, ca_bundle: str) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "bench"},
            "webhooks": [{"name": "bench.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                          "clientConfig": {"url": url, "caBundle": ca_bundle}, "rules": RULES}]}


POLICY = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
          "metadata": {"name": "bench"},
          "spec": {"matchConstraints": {"resourceRules": RULES},
                   "variables": [{"name": "keys", "expression": "object.data.size()"}],
                   "validations": [{"expression": "variables.keys <= 16", "message": "too many keys"},
                                   {"expression": "object.data.all(k, object.data[k].size() < 1024)"}]}}
BINDING = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
           "metadata": {"name": "bench"}, "spec": {"policyName": "bench", "validationActions": ["Deny"]}}


def server_rows(n: int, tmpfs: bool) -> list[list]:
    from kapiserver.testing.webhook import AdmissionWebhookServer, WebhookCertificates, allow, patch
    certs = WebhookCertificates.create(tempfile.mkdtemp(prefix="bench-webhook-"), ["127.0.0.1"])
    hooks = AdmissionWebhookServer({"/validate": allow, "/mutate": lambda r: patch(
        r, [{"op": "add", "path": "/metadata/labels/seen", "value": "yes"}])}, certs).start()
    server = ServerProcess(extra_config=server_config("sqlite"), workdir=scratch_dir(tmpfs)).start()
    rows: list[list] = []
    counter = [0]
    try:
        client = Client(server)
        ensure_namespace(client, NS)

        def measure(label: str) -> None:
            timed(client, 30, counter[0], "?dryRun=All")  # warm up (connections, caches)
            counter[0] += 30
            for mode, query in (("written", ""), ("dryRun=All", "?dryRun=All")):
                samples = timed(client, n, counter[0], query)
                counter[0] += n
                rows.append([label, mode, *stats(samples)])
            print(f"measured {label}", file=sys.stderr)

        measure("no webhooks, no policies")
        for kind, path, label in (("ValidatingWebhookConfiguration", "/validate", "one validating webhook"),
                                  ("MutatingWebhookConfiguration", "/mutate", "one mutating webhook (patch)")):
            plural = kind.lower() + "s"
            client.json("POST", f"{GROUP}/{plural}", webhook_configuration(kind, hooks.url(path), certs.ca_bundle))
            time.sleep(0.5)
            before = len(hooks.reviews)
            measure(label)
            if len(hooks.reviews) <= before:
                raise RuntimeError(f"{label}: the webhook was never called")
            client.json("DELETE", f"{GROUP}/{plural}/bench", ok=(200,))
            time.sleep(0.5)
        client.json("POST", f"{GROUP}/validatingadmissionpolicies", POLICY)
        client.json("POST", f"{GROUP}/validatingadmissionpolicybindings", BINDING)
        time.sleep(0.5)
        measure("one ValidatingAdmissionPolicy")
    finally:
        server.cleanup()
        hooks.stop()
    base = {mode: p50 for label, mode, p50, *_ in rows if label.startswith("no webhooks")}
    for row in rows:
        row.append(f"{row[2] - base[row[1]]:+.2f}")
    return rows


def in_process_rows(n: int) -> list[list]:
    """The policy plugin's work for one request, without HTTP or storage."""
    from twisted.internet import defer

    from kapiserver.registry.admission import CREATE, Attributes
    from kapiserver.admission.policy.compiled import compile_policy
    from kapiserver.admission.cel import authz
    from kapiserver.admission.cel.evaluation import Inputs, request_value
    from kapiserver.admission.policy.validator import validate
    from kapiserver.admission.resources import ResourceMapper
    from kapiserver.registry.groups import FixedTypes
    from kapiserver.apis.builtin import builtin_resource_types
    from kapiserver.auth.authorizer import AlwaysAllow

    types = builtin_resource_types()
    mapper = ResourceMapper(FixedTypes(types))
    policy = compile_policy(POLICY, mapper)
    rtype = next(t for t in types if t.kind == "ConfigMap")
    obj = configmap(0)
    attrs = Attributes(CREATE, rtype, NS, "cm-0", obj)

    async def once() -> None:
        inputs = Inputs(object=obj, request=request_value(attrs, attrs.resource, attrs.gvk),
                        authz=authz.AuthzSession(AlwaysAllow(), None))
        result = await validate(policy, inputs)
        assert all(d.action == "Admit" for d in result.decisions)

    async def run() -> float:
        for _ in range(50):
            await once()
        t0 = time.perf_counter()
        for _ in range(n):
            await once()
        return (time.perf_counter() - t0) / n * 1e6

    # nothing here waits for I/O, so the coroutine runs to its end at once
    result: list[float] = []
    defer.Deferred.fromCoroutine(run()).addCallback(result.append)
    assert result, "the evaluation waited for something"
    return [["ValidatingAdmissionPolicy: build inputs, two validations, a variable", result[0]]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--tmpfs", action="store_true", help="SQLite data in /dev/shm")
    args = parser.parse_args()
    print(f"# Admission overhead per request ({machine()})")
    print_table(["configuration", "requests", "p50 ms", "mean ms", "p99 ms", "p50 over none, ms"],
                server_rows(args.requests, args.tmpfs),
                title=f"ConfigMap creates through a server (sqlite{' on tmpfs' if args.tmpfs else ''}), "
                      f"{args.requests} sequential requests each")
    print_table(["in process", "µs per request"], in_process_rows(args.requests * 5),
                title="The policy evaluation alone")


if __name__ == "__main__":
    main()
