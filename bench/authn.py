"""What authentication costs per request: the same GET with each kind of credential.

``python3 bench/authn.py [--count 3000]``

One SQLite server with a static token file; keep-alive HTTPS GETs of one
ConfigMap at 1 and 16 concurrent clients, authenticated by the admin client
certificate (verified once per connection), a static token, a ServiceAccount
token (RS256 signature checked and the ServiceAccount looked up in the watch
cache on every request) and a Pod-bound one (the Pod looked up too).  Prints
requests/s and p50/p99 latency in ms per credential.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import (Client, configmap, machine, print_table, run_parallel, server_config,  # noqa: E402
                     start_server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="GETs per measurement")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="kapi-bench-authn-")
    tokens = os.path.join(workdir, "tokens.csv")
    with open(tokens, "w") as f:
        f.write("bench-static-token,bench-user,1,bench\n")
    server = start_server("sqlite", workdir=workdir,
                          config=server_config("sqlite", authentication={"token_auth_file": tokens}))
    try:
        admin = Client(server)
        admin.json("POST", "/api/v1/namespaces/default/configmaps", configmap("target"))
        admin.json("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bench"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
        sa_token = admin.json("POST", "/api/v1/namespaces/default/serviceaccounts/default/token",
                              request)["status"]["token"]
        pod_token = admin.json("POST", "/api/v1/namespaces/default/serviceaccounts/default/token", {
            **request, "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "bench"}}})[
            "status"]["token"]
        admin.close()
        path = "/api/v1/namespaces/default/configmaps/target"
        rows = []
        for label, token in (("admin client certificate", ""), ("static token", "bench-static-token"),
                             ("ServiceAccount token", sa_token), ("Pod-bound ServiceAccount token", pod_token)):
            for clients in (1, 16):
                result = run_parallel(server, clients, args.count, lambda c, i: c.request("GET", path)[0],
                                      token=token)
                rows.append([label, clients, result.rate, result.pct(0.5), result.pct(0.99), result.errors])
                print(f"{label} x{clients}: {result.rate:.0f}/s", file=sys.stderr)
        print_table(["credential", "clients", "GET/s", "p50 ms", "p99 ms", "errors"], rows,
                    f"Authenticated GETs of one ConfigMap ({machine()})")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
