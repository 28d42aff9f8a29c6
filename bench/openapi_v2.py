"""``/openapi/v2``: what building and encoding the document costs, in-process.

``python3 bench/openapi_v2.py [--runs 5]``

Prints one table: milliseconds (median of ``--runs``) to build the swagger
document of every built-in kind, to serialize it as JSON, and to encode it as
gnostic's protobuf ``Document`` (what kubectl asks for; done once per
document, in a thread), with the size of each encoding.  The server caches
both encodings until the served types change (CRDs).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import orjson  # noqa: E402

from kapiserver.apis.builtin import builtin_resource_types  # noqa: E402
from kapiserver.endpoints.openapi import build_openapi_v2  # noqa: E402
from kapiserver.machinery import openapi_v2_protobuf  # noqa: E402
from kapiserver.machinery.openapi_definitions import load_definitions  # noqa: E402


def timed(fn, runs: int):
    samples, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    defs, types = load_definitions(), builtin_resource_types()
    build_ms, doc = timed(lambda: build_openapi_v2(types, defs), args.runs)
    json_ms, body = timed(lambda: orjson.dumps(doc), args.runs)
    proto_ms, encoded = timed(lambda: openapi_v2_protobuf.encode_document(orjson.loads(body)), args.runs)
    print("| step | ms (median) | bytes |")
    print("|---|---:|---:|")
    print(f"| build the document ({len(types)} kinds, {len(doc['paths'])} paths) | {build_ms:.1f} | |")
    print(f"| JSON | {json_ms:.1f} | {len(body):,} |")
    print(f"| protobuf Document (incl. parsing the JSON) | {proto_ms:.1f} | {len(encoded):,} |")


if __name__ == "__main__":
    main()
