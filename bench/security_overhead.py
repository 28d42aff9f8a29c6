"""What auditing and encryption at rest cost per request.

``python3 bench/security_overhead.py [--count 2000]``

Four SQLite servers, one after the other: nothing on; an audit policy at
``Metadata`` for everything, written to a log file; the same at
``RequestResponse`` (both bodies encoded into every record); Secrets
encrypted with ``aescbc``.  On each: keep-alive HTTPS creates and GETs of
Secrets at 1 and 16 clients.  Prints requests/s and p50/p99 latency in ms,
and the size of the audit log per request.
"""
from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import machine, print_table, run_parallel, server_config, start_server  # noqa: E402

POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: {level}\n"
ENCRYPTION = ("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n"
              "- resources: [secrets]\n  providers:\n  - aescbc: {{keys: [{{name: k, secret: {key}}}]}}\n")


def secret(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {"token": base64.b64encode(b"x" * 300).decode()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="requests per measurement")
    args = parser.parse_args()
    rows = []
    for label in ("nothing", "audit Metadata", "audit RequestResponse", "aescbc Secrets"):
        workdir = tempfile.mkdtemp(prefix="kapi-bench-security-")
        extra: dict = {}
        log_path = os.path.join(workdir, "audit.log")
        if label.startswith("audit"):
            policy = os.path.join(workdir, "policy.yaml")
            with open(policy, "w") as f:
                f.write(POLICY.format(level=label.split()[1]))
            extra["audit"] = {"policy_file": policy, "log_path": log_path}
        if label.startswith("aescbc"):
            path = os.path.join(workdir, "encryption.yaml")
            with open(path, "w") as f:
                f.write(ENCRYPTION.format(key=base64.b64encode(os.urandom(32)).decode()))
            extra["encryption_provider_config"] = path
        server = start_server("sqlite", workdir=workdir, config=server_config("sqlite", **extra))
        try:
            collection = "/api/v1/namespaces/default/secrets"
            requests = 0
            for clients in (1, 16):
                prefix = f"s{clients}"
                created = run_parallel(server, clients, args.count,
                                       lambda c, i: c.request("POST", collection, secret(f"{prefix}-{i:06d}"))[0])
                got = run_parallel(server, clients, args.count,
                                   lambda c, i: c.request("GET", f"{collection}/{prefix}-{i:06d}")[0])
                requests += 2 * args.count
                for verb, result in (("create", created), ("get", got)):
                    rows.append([label, verb, clients, result.rate, result.pct(0.5), result.pct(0.99),
                                 result.errors])
                    print(f"{label} {verb} x{clients}: {result.rate:.0f}/s", file=sys.stderr)
            if os.path.exists(log_path):
                rows.append([label, "audit bytes/request", "", os.path.getsize(log_path) / requests, "", "", ""])
        finally:
            server.cleanup()
    print_table(["configuration", "verb", "clients", "req/s", "p50 ms", "p99 ms", "errors"], rows,
                f"Secrets with auditing and encryption at rest ({machine()})")


if __name__ == "__main__":
    main()
