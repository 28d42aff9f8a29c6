"""Malformed requests against a running kapiserver: nothing a client sends may crash, stall or poison it.

``python3 bench/fuzz.py [--kubeconfig FILE | --start] [--cases N] [--seed S] [--quiet] [--no-depth]
[--hang-seconds S]``

Cases are generated from what the server serves (discovery and the
OpenAPI v3 schemas of every kind) and a corpus of nasty values: wrong JSON
types, numbers at and past int32/int64, huge and unicode strings, nesting
50,000 and 1,000,000 levels deep in every body encoding (JSON, YAML,
protobuf, the three patch types), YAML 1.1 scalars, tags and alias bombs,
truncated and bit-flipped protobuf, label/field selectors, continue tokens,
resource versions, and request options (dryRun, fieldValidation,
gracePeriodSeconds, propagationPolicy, timeoutSeconds).  Writes go to the
namespace ``fuzz`` and to names starting with ``fuzz-``.

It prints the count of answers by status class and every 5xx, every answer
slower than 5 s (a hang; ``--hang-seconds``), every connection failure, and
whether the server is still alive at the end (``/readyz``); the exit status is
1 when any of those happened.  ``--start`` runs a throw-away server process
first.  (The test suite's sample runs with ``--hang-seconds 60``: a test does
not time the server, it only catches what never answers.)
"""
from __future__ import annotations

import argparse
import base64
import collections
import copy
import http.client
import json
import os
import random
import socket
import ssl
import sys
import tempfile
import time
import urllib.parse
from typing import Any, Callable, Iterator, Optional

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

HANG_SECONDS = 5.0
NAMESPACE = "fuzz"
JSON, YAML, PROTOBUF = "application/json", "application/yaml", "application/vnd.kubernetes.protobuf"
MERGE, JSON_PATCH, SMP = ("application/merge-patch+json", "application/json-patch+json",
                          "application/strategic-merge-patch+json")
APPLY = "application/apply-patch+yaml"

# ------------------------------------------------------------------ the corpus

NASTY_SCALARS: list[Any] = [
    None, True, False, 0, -1, 1.5, -0.0, 1e308, 2 ** 31, -2 ** 31 - 1, 2 ** 63, 2 ** 64, 10 ** 30,
    "", " ", "a" * 70_000, "\u0000", "\u202eevil", "😀" * 50, "é", "\\", '"', "${x}", "../../etc",
    "yes", "0x10", ".nan", "null", "true", "1e3", "-", "a" * 254, "A_B", "x/y", "a,b", "!=", "=",
    "2024-13-45T99:99:99Z", "1Gi", "1.5.5", "∞", "\ud7ff",
]
NASTY_CONTAINERS: list[Any] = [[], {}, [None], [1, "a", {}], {"": ""}, {"a": None}, {"$patch": "delete"},
                               {"$patch": "bogus"}, [[[]]], {"a": {"b": {"c": []}}}, ["x"] * 1000]
NASTY_SELECTORS = ["a in (", "a notin ()", "!!a", "a==b==c", "a=" + "b" * 100_000, "a,,b", "=", "a in (b,c",
                   "metadata.name===x", "spec.nothing=1", "a!=", "()", "a in (" + ",".join("x" * 1000) + ")",
                   "\u0000", "a=\u00e9", "metadata.name=" + "x" * 300, "a,b,c,d=e,!f", "a.b/c=d", "x>1", "x<y"]
NASTY_QUERY_VALUES = ["", "-1", "0", "abc", "1e9", "99999999999999999999", "All", "all", "true", "Strict",
                      "Bogus", "%00", "\u00e9", "Orphan", "Sometimes", "1.5", "-9223372036854775809"]
QUERY_PARAMS = ["dryRun", "fieldValidation", "gracePeriodSeconds", "propagationPolicy", "timeoutSeconds",
                "limit", "continue", "resourceVersion", "resourceVersionMatch", "labelSelector",
                "fieldSelector", "allowWatchBookmarks", "sendInitialEvents", "orphanDependents", "pretty",
                "fieldManager"]  # watches: only with timeoutSeconds=1 first (see random_case)


def deep_json(levels: int, opener: bytes = b"[", closer: bytes = b"]") -> bytes:
    return opener * levels + closer * levels


def deep_yaml_block(levels: int) -> bytes:
    return b"".join(b"  " * min(i, 2000) + b"- \n" for i in range(min(levels, 5000))) + b"[" * levels


def _nested(number: int, levels: int, limit: int = 3_000_000) -> bytes:
    """Field ``number`` (length-delimited) nested ``levels`` deep around nothing, at most ``limit`` bytes
    (built inside out in linear time)."""
    tag = _varint(number << 3 | 2)
    prefixes, size = [], 0
    for _ in range(levels):
        prefix = tag + _varint(size)
        if size + len(prefix) > limit:
            break
        prefixes.append(prefix)
        size += len(prefix)
    return b"".join(reversed(prefixes))


def deep_protobuf(levels: int) -> bytes:
    """A runtime.Unknown envelope whose raw message nests length-delimited field 1 ``levels`` deep."""
    return _envelope("v1", "ConfigMap", _nested(1, levels))


def deep_protobuf_crd(levels: int) -> bytes:
    """A CustomResourceDefinition whose schema nests ``not`` (JSONSchemaProps field 28) ``levels`` deep."""
    props = _nested(28, levels)
    version = _field(1, b"v1") + _field(4, _field(1, props))
    spec = _field(1, b"deep.example.com") + _field(7, version)
    raw = _field(1, _field(1, b"fuzzes.deep.example.com")) + _field(2, spec)
    return _envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", raw)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _field(1, api_version.encode()) + _field(2, kind.encode())
    return b"k8s\x00" + _field(1, type_meta) + _field(2, raw) + _field(3, b"") + _field(4, b"")


ALIAS_BOMB = ("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n" + "".join(
    f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]\n" for p, c in zip("abcdefgh", "bcdefghi"))).encode()
NASTY_YAML = [
    b"metadata: {name: fuzz-y}\ndata: {a: yes, b: 0x10, c: .nan, d: ~, e: 2001-12-14}\n",
    b"metadata:\n  name: fuzz-y\n" + ALIAS_BOMB,
    b"metadata: &m {name: fuzz-y}\nspec: *m\nstatus: *m\n",
    b"metadata: {name: fuzz-y}\ndata: !!binary ////\n",
    b"metadata: {name: fuzz-y}\n? [a, b]\n: c\n",
    b"metadata: {name: fuzz-y}\n<<: {a: 1}\n",
    b"metadata: {name: fuzz-y}\ndata: *undefined\n",
    b"!!python/object:os.system {}\n",
    b"--- \n...\n---\nkind: ConfigMap\n",
    b"\t\tbad: indent\n",
    b"metadata: {name: fuzz-y, labels: {1: 2, true: false, 1.5: .inf}}\n",
    b"\xff\xfe\x00bad utf16",
    b"metadata:\n  name: fuzz-y\n" + b"x: " + b"{a: " * 2000 + b"1" + b"}" * 2000 + b"\n",
]


# ------------------------------------------------------------------ a client

class Connection:
    """HTTPS to the server with the admin client certificate of a kubeconfig."""

    def __init__(self, kubeconfig: str, timeout: float = HANG_SECONDS + 5) -> None:
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        url = urllib.parse.urlsplit(cluster["server"])
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 443
        self._dir = tempfile.mkdtemp(prefix="kapi-fuzz-")
        paths = {}
        for name, key in (("ca", "certificate-authority"), ("cert", "client-certificate"),
                          ("key", "client-key")):
            section = cluster if name == "ca" else user
            if section.get(key + "-data") is None and section.get(key):
                paths[name] = section[key]  # a kubeconfig naming files (kube-apiserver's admin.kubeconfig)
                continue
            paths[name] = os.path.join(self._dir, name + ".pem")
            with open(paths[name], "wb") as f:
                f.write(base64.b64decode(section[key + "-data"]))
        self.ctx = ssl.create_default_context(cafile=paths["ca"])
        self.ctx.load_cert_chain(paths["cert"], paths["key"])
        self.ctx.set_alpn_protocols(["http/1.1"])
        self.timeout = timeout
        self.conn: Optional[http.client.HTTPSConnection] = None

    def request(self, method: str, path: str, body: Optional[bytes] = None, content_type: str = JSON,
                accept: str = JSON) -> tuple[int, bytes, float]:
        """(status, body, seconds); status 0 when the connection failed or timed out."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        start = time.monotonic()
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx,
                                                        timeout=self.timeout)
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                data = resp.read()
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                return resp.status, data, time.monotonic() - start
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.BadStatusLine, ssl.SSLEOFError) as e:  # a kept-alive connection timed out
                self.close()
                if attempt:
                    return 0, repr(e).encode(), time.monotonic() - start
            except (socket.timeout, OSError, ssl.SSLError) as e:
                self.close()
                return 0, repr(e).encode(), time.monotonic() - start
        return 0, b"unreachable", time.monotonic() - start

    def json(self, path: str) -> Any:
        status, data, _ = self.request("GET", path)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {data[:200]!r}")
        return json.loads(data)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ------------------------------------------------------------------ what is served

class Resource:
    def __init__(self, group_version: str, name: str, kind: str, namespaced: bool, verbs: list[str]) -> None:
        self.group_version = group_version
        self.name = name
        self.kind = kind
        self.namespaced = namespaced
        self.verbs = verbs
        self.schema: dict = {}

    def collection(self, namespace: str = NAMESPACE) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        return f"{base}/namespaces/{namespace}/{self.name}" if self.namespaced else f"{base}/{self.name}"


def discover(conn: Connection) -> list[Resource]:
    """Every served resource (no subresources) with its OpenAPI v3 schema."""
    versions = ["v1"] + [v["groupVersion"] for g in conn.json("/apis")["groups"] for v in g["versions"]]
    out: list[Resource] = []
    for gv in versions:
        path = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        try:
            listing = conn.json(path)
        except RuntimeError:
            continue
        schemas: dict = {}
        try:
            schemas = conn.json(f"/openapi/v3/{path.lstrip('/')}").get("components", {}).get("schemas", {})
        except (RuntimeError, ValueError):
            pass
        for r in listing.get("resources", []):
            if "/" in r["name"]:
                continue
            res = Resource(gv, r["name"], r["kind"], r["namespaced"], r.get("verbs", []))
            for name, schema in schemas.items():
                for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                    if gvk.get("kind") == r["kind"] and gvk.get("version") == gv.rsplit("/", 1)[-1]:
                        res.schema = {"root": schema, "all": schemas}
            out.append(res)
    return out


def schema_paths(schema: dict, limit: int = 6) -> list[tuple[list[str], str]]:
    """(path, type) of fields reachable in a kind's schema, breadth first, a few levels deep."""
    if not schema:
        return []
    every = schema["all"]
    out: list[tuple[list[str], str]] = []
    todo = [([], schema["root"], 0)]
    while todo and len(out) < 400:
        path, node, depth = todo.pop(0)
        node = _deref(node, every)
        for name, sub in (node.get("properties") or {}).items():
            sub = _deref(sub, every)
            kind = sub.get("type") or ("object" if "properties" in sub else "any")
            out.append((path + [name], kind))
            if depth < limit and kind == "object":
                todo.append((path + [name], sub, depth + 1))
            elif depth < limit and kind == "array" and isinstance(sub.get("items"), dict):
                todo.append((path + [name, "0"], sub["items"], depth + 1))
    return out


def _deref(node: dict, every: dict) -> dict:
    for _ in range(5):
        ref = node.get("$ref")
        if not ref and len(node.get("allOf") or ()) == 1:
            ref = node["allOf"][0].get("$ref")
        if not ref:
            return node
        node = every.get(ref.rsplit("/", 1)[-1], {})
    return node


# ------------------------------------------------------------------ cases

class Case:
    def __init__(self, label: str, method: str, path: str, body: Optional[bytes] = None,
                 content_type: str = JSON, accept: str = JSON) -> None:
        self.label, self.method, self.path, self.body = label, method, path, body
        self.content_type, self.accept = content_type, accept

    def describe(self) -> str:
        size = f" ({len(self.body)} bytes {self.content_type})" if self.body is not None else ""
        path = self.path if len(self.path) < 160 else self.path[:160] + "..."
        return f"{self.label}: {self.method} {path}{size}"


def _set(obj: dict, path: list[str], value: Any) -> dict:
    try:
        return _set_path(obj, path, value)
    except (IndexError, KeyError, TypeError, AttributeError):
        return obj


def _set_path(obj: dict, path: list[str], value: Any) -> dict:
    node: Any = obj
    for i, key in enumerate(path[:-1]):
        nxt = path[i + 1]
        child: Any = [{}] if nxt == "0" else {}
        if key == "0" and isinstance(node, list):
            node = node[0]
            continue
        if not isinstance(node, dict):
            return obj
        node = node.setdefault(key, child)
    if isinstance(node, dict):
        node[path[-1]] = value
    elif isinstance(node, list) and node:
        node[0] = value
    return obj


def _name(rng: random.Random) -> str:
    return f"fuzz-{rng.randrange(10 ** 6)}"


def _base(res: Resource, rng: random.Random) -> dict:
    return {"apiVersion": res.group_version, "kind": res.kind, "metadata": {"name": _name(rng)}}


def _nasty(rng: random.Random) -> Any:
    pool = NASTY_SCALARS + NASTY_CONTAINERS
    value = copy.deepcopy(rng.choice(pool))
    if rng.random() < 0.05:
        value = json.loads(deep_json(rng.choice((99, 100, 101, 150))))  # at and past the depth limit
    return value


def _encode(obj: Any, rng: random.Random) -> tuple[bytes, str]:
    choice = rng.random()
    if choice < 0.7:
        return json.dumps(obj).encode("utf-8", "surrogatepass"), JSON
    try:
        return yaml.safe_dump(obj).encode("utf-8", "surrogatepass"), YAML
    except (yaml.YAMLError, RecursionError):
        return json.dumps(obj).encode("utf-8", "surrogatepass"), JSON


STRINGS = [s for s in NASTY_SCALARS if isinstance(s, str)] + ["Always", "TCP", "None", "IfNotPresent", "a-b",
                                                             "10.0.0.1", "::1", "300.1.1.1/99", "8080", "http"]
INTEGERS = [0, -1, 1, 65535, 65536, 2 ** 31 - 1, -2 ** 31, 2 ** 53, -2 ** 63]


def _nasty_of_type(kind: str, rng: random.Random) -> Any:
    """A value of the right JSON type that validation code may still not expect."""
    if kind == "string":
        return rng.choice(STRINGS)
    if kind == "integer":
        return rng.choice(INTEGERS)
    if kind == "number":
        return rng.choice([0.5, -1e300, 1e-300, 3])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return rng.choice([[], [{}], [""], [{"name": ""}, {"name": ""}], [{"name": "a"}] * 3, [None], ["a"] * 300])
    if kind == "object":
        return rng.choice([{}, {"": ""}, {"a" * 300: "b"}, {"name": rng.choice(STRINGS)}, {"x": {"y": {}}}])
    return _nasty(rng)


def _typed_body(res: Resource, rng: random.Random) -> dict:
    obj = _base(res, rng)
    paths = schema_paths(res.schema)
    for _ in range(rng.randint(1, 4)):
        if paths and rng.random() < 0.9:
            path, kind = rng.choice(paths)
            _set(obj, path, _nasty_of_type(kind, rng) if rng.random() < 0.6 else _nasty(rng))
        else:
            obj[rng.choice(["bogus", "spec", "status", "metadata", "kind", "apiVersion"])] = _nasty(rng)
    return obj


def _query(rng: random.Random, n: int) -> str:
    pairs = []
    for _ in range(n):
        name = rng.choice(QUERY_PARAMS)
        if name in ("labelSelector", "fieldSelector"):
            value = rng.choice(NASTY_SELECTORS)
        elif name == "continue":
            value = rng.choice(["garbage", base64.urlsafe_b64encode(b'{"v":"meta.k8s.io/v1","rv":-5,"start":1}')
                                .decode(), base64.b64encode(b"\x00" * 10).decode(), "%%%", "a" * 5000])
        elif name == "timeoutSeconds":
            value = rng.choice(["-1", "0", "1", "abc", "99999999999999999999"])
        else:
            value = rng.choice(NASTY_QUERY_VALUES)
        pairs.append((name, value))
    return urllib.parse.urlencode(pairs)


def depth_cases() -> Iterator[Case]:
    """50,000- and 1,000,000-level bodies in every content type and verb that takes a body."""
    cm = "/api/v1/namespaces/fuzz/configmaps"
    for levels in (50_000, 1_000_000):
        yield Case(f"json {levels} levels", "POST", cm, deep_json(levels))
        yield Case(f"json object {levels} levels", "POST", cm,
                   b'{"metadata":{"name":"fuzz-d"},"data":' + b'{"a":' * levels + b"1" + b"}" * (levels + 1))
        yield Case(f"yaml flow {levels} levels", "POST", cm, deep_json(levels), YAML)
        yield Case(f"yaml block {levels} levels", "POST", cm, deep_yaml_block(levels), YAML)
        yield Case(f"protobuf {levels} levels", "POST", cm, deep_protobuf(levels), PROTOBUF)
        yield Case(f"protobuf crd {levels} levels", "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                   deep_protobuf_crd(levels), PROTOBUF)
        for patch_type in (MERGE, SMP):
            yield Case(f"{patch_type} {levels} levels", "PATCH", cm + "/fuzz-anchor",
                       b'{"data":' + b'{"a":' * levels + b"1" + b"}" * (levels + 1), patch_type)
        yield Case(f"apply yaml {levels} levels", "PATCH", cm + "/fuzz-anchor?fieldManager=fuzz",
                   b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fuzz-anchor}\ndata: " + deep_json(levels),
                   APPLY)
        yield Case(f"json patch {levels} levels", "PATCH", cm + "/fuzz-anchor",
                   b'[{"op":"add","path":"/data","value":' + deep_json(levels) + b"}]", JSON_PATCH)
        yield Case(f"put {levels} levels", "PUT", cm + "/fuzz-anchor", deep_json(levels))
        yield Case(f"delete options {levels} levels", "DELETE", cm + "/fuzz-anchor",
                   b'{"kind":"DeleteOptions","preconditions":' + deep_json(levels) + b"}")
    crd = ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", b'{"apiVersion":"apiextensions.k8s.io/v1",'
           b'"kind":"CustomResourceDefinition","metadata":{"name":"fuzzes.fuzz.io"},"spec":' + deep_json(50_000)
           + b"}")
    yield Case("crd 50000 levels", "POST", crd[0], crd[1])


def _protobuf_mutants(rng: random.Random) -> bytes:
    from kapiserver.machinery import protobuf

    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": _name(rng), "labels": {"a": "b"}},
           "data": {"k": "v"}}
    raw = bytearray(protobuf.encode_object(obj))
    mutation = rng.randrange(5)
    if mutation == 0 and len(raw) > 6:
        del raw[rng.randrange(4, len(raw)):]  # truncated
    elif mutation == 1:
        for _ in range(rng.randint(1, 8)):
            raw[rng.randrange(4, len(raw))] = rng.randrange(256)  # bit flips
    elif mutation == 2:
        raw += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif mutation == 3:
        raw = bytearray(_envelope("v1", rng.choice(["ConfigMap", "Pod", "Nope", ""]),
                                  bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))))
    else:
        raw = bytearray(_envelope("v1", "ConfigMap", _field(1, _field(11, _field(1, b"\xff\xfe") + _field(2, b"x")))))
    return bytes(raw)


def random_case(resources: list[Resource], rng: random.Random) -> Case:
    res = rng.choice(resources)
    coll = res.collection()
    item = f"{coll}/fuzz-anchor" if res.namespaced or res.name != "namespaces" else f"{coll}/fuzz"
    kind = rng.randrange(12)
    if kind <= 3 and "create" in res.verbs:
        body, ctype = _encode(_typed_body(res, rng), rng)
        query = "?" + _query(rng, 1) if rng.random() < 0.2 else ""
        return Case(f"create {res.kind} with a nasty field", "POST", coll + query, body, ctype)
    if kind == 4 and "update" in res.verbs:
        obj = _typed_body(res, rng)
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        obj["metadata"]["name"] = item.rsplit("/", 1)[-1] if rng.random() < 0.7 else _name(rng)
        body, ctype = _encode(obj, rng)
        return Case(f"update {res.kind} with a nasty field", "PUT", item, body, ctype)
    if kind == 5 and "patch" in res.verbs:
        ctype = rng.choice([MERGE, SMP, JSON_PATCH, APPLY])
        if ctype == JSON_PATCH:
            op = {"op": rng.choice(["add", "replace", "remove", "move", "copy", "test", "bogus"]),
                  "path": rng.choice(["/metadata/name", "/data/x", "/spec", "", "/", "/metadata/labels/~2",
                                      "/a/-", "/metadata/namespace", "/kind"]), "value": _nasty(rng)}
            if rng.random() < 0.3:
                op["from"] = rng.choice(["/metadata", "/x", ""])
            patch: Any = [op] if rng.random() < 0.9 else _nasty(rng)
        else:
            patch = _typed_body(res, rng)
            patch.pop("metadata", None) if rng.random() < 0.5 else None
            if rng.random() < 0.2:
                patch = {"metadata": {"name": _name(rng)}}
            elif rng.random() < 0.2:
                patch = _nasty(rng)
        if ctype == APPLY:
            if isinstance(patch, dict) and rng.random() < 0.7:
                patch.setdefault("apiVersion", res.group_version)
                patch.setdefault("kind", res.kind)
                if not isinstance(patch.get("metadata"), dict):
                    patch["metadata"] = {}
                patch["metadata"]["name"] = item.rsplit("/", 1)[-1]
            body = (json.dumps(patch) if rng.random() < 0.5 else yaml.safe_dump(patch)).encode("utf-8", "surrogatepass")
            if rng.random() < 0.1:
                body = rng.choice(NASTY_YAML)
            return Case(f"apply to {res.kind}", "PATCH", item + "?fieldManager=fuzz" + rng.choice(["", "&force=true"]),
                        body, ctype)
        return Case(f"{ctype} patch of {res.kind}", "PATCH", item, json.dumps(patch).encode("utf-8", "surrogatepass"),
                    ctype)
    if kind == 6 and "delete" in res.verbs:
        options = {"kind": "DeleteOptions", "apiVersion": "v1"}
        field = rng.choice(["dryRun", "gracePeriodSeconds", "propagationPolicy", "preconditions",
                            "orphanDependents", "kind", "bogus"])
        options[field] = _nasty(rng)
        body = json.dumps(options).encode("utf-8", "surrogatepass") if rng.random() < 0.8 else \
            rng.choice([b"not json", b"[]", b"\x00\x01", b"kind: DeleteOptions\ndryRun: [yes]\n"])
        return Case(f"delete {res.kind} with nasty options", "DELETE", item + "?" + _query(rng, 1), body)
    if kind == 7:
        watch = "watch=true&timeoutSeconds=1&" if rng.random() < 0.2 else ""
        accept = rng.choice([JSON, YAML, PROTOBUF, "application/json;as=Table;v=v1;g=meta.k8s.io",
                             "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", "*/*",
                             "text/html", "application/json;q=abc"])
        return Case(f"list {res.kind} with nasty options", "GET", coll + "?" + watch + _query(rng, rng.randint(1, 3)),
                    accept=accept)
    if kind == 8 and "create" in res.verbs:
        body = rng.choice(NASTY_YAML)
        return Case(f"create {res.kind} from nasty YAML", "POST", coll, body, YAML)
    if kind == 9 and "create" in res.verbs:
        return Case("protobuf mutant", "POST", "/api/v1/namespaces/fuzz/configmaps", _protobuf_mutants(rng),
                    PROTOBUF)
    if kind == 10:
        body = rng.choice([b"", b"null", b"0", b'"x"', b"[]", b"{", b"\xff\xff", b'{"kind": 1}',
                           b'{"apiVersion": "v1", "kind": "Pod"}', b"apiVersion: v1\nkind: Namespace\n",
                           b'{"metadata": {"name": "' + b"x" * 300 + b'"}}', b'{"a":1,"a":2,"a":3}',
                           b'{"metadata":{"name":"fuzz-dup","name":"fuzz-dup2"}}'])
        ctype = rng.choice([JSON, YAML, PROTOBUF, "text/plain", "application/json; charset=ebcdic", ""])
        return Case(f"create {res.kind} from a malformed body", "POST", coll, body, ctype)
    return Case(f"get {res.kind} with nasty options", "GET", item + "?" + _query(rng, 2), accept=rng.choice(
        [JSON, YAML, PROTOBUF]))


def cases(resources: list[Resource], count: int, seed: int, depth: bool = True) -> Iterator[Case]:
    rng = random.Random(seed)
    if depth:
        yield from depth_cases()
    for _ in range(count):
        yield random_case(resources, rng)


# ------------------------------------------------------------------ running

class Report:
    def __init__(self, hang_seconds: float = HANG_SECONDS) -> None:
        self.hang_seconds = hang_seconds
        self.classes: collections.Counter = collections.Counter()
        self.problems: list[str] = []
        self.slowest = 0.0

    def record(self, case: Case, status: int, body: bytes, seconds: float) -> None:
        self.slowest = max(self.slowest, seconds)
        self.classes[f"{status // 100}xx" if status else "no answer"] += 1
        if status == 504 and b"ResourceVersionTooLarge" in body:
            return  # upstream's answer to a resourceVersion from the future, not a fault
        if status >= 500 or status == 0:
            self.problems.append(f"{status} {case.describe()}: {body[:300]!r}")
        elif seconds > self.hang_seconds:
            self.problems.append(f"hang {seconds:.1f}s {case.describe()}")
        elif 400 <= status < 500 and status != 404:
            try:
                if not json.loads(body).get("reason") and status not in (404, 405):
                    self.problems.append(f"{status} without a reason: {case.describe()}: {body[:200]!r}")
            except (ValueError, AttributeError):
                pass


def prepare(conn: Connection) -> None:
    conn.request("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": NAMESPACE}}).encode())
    conn.request("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                 json.dumps({"metadata": {"name": "fuzz-anchor"}, "data": {"a": "b"}}).encode())


def run(kubeconfig: str, count: int, seed: int, quiet: bool = False,
        progress: Optional[Callable[[int], None]] = None, depth: bool = True,
        hang_seconds: float = HANG_SECONDS) -> Report:
    conn = Connection(kubeconfig, timeout=hang_seconds + 5)
    prepare(conn)
    resources = [r for r in discover(conn) if r.name not in ("tokenreviews",)]
    report = Report(hang_seconds)
    for i, case in enumerate(cases(resources, count, seed, depth)):
        if case.method == "DELETE" and not case.path.rsplit("?", 1)[0].rsplit("/", 1)[-1].startswith("fuzz"):
            continue  # never delete what the fuzzer did not make
        status, body, seconds = conn.request(case.method, case.path, case.body, case.content_type, case.accept)
        report.record(case, status, body, seconds)
        if status == 0:
            alive, _, _ = conn.request("GET", "/readyz")
            if alive == 0:
                report.problems.append(f"the server stopped answering after: {case.describe()}")
                break
        if progress is not None:
            progress(i)
        if not quiet and i and i % 1000 == 0:
            print(f"... {i} cases, {dict(report.classes)}", file=sys.stderr, flush=True)
    alive, _, _ = conn.request("GET", "/readyz")
    if alive != 200:
        report.problems.append(f"/readyz answers {alive} after the run")
    conn.close()
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", help="admin kubeconfig of a running server")
    parser.add_argument("--start", action="store_true", help="start a throw-away server process")
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--no-depth", action="store_true", help="skip the deep-body cases")
    parser.add_argument("--hang-seconds", type=float, default=HANG_SECONDS,
                        help="an answer slower than this is a hang (default %(default)s)")
    args = parser.parse_args()
    server = None
    kubeconfig = args.kubeconfig
    if args.start or not kubeconfig:
        from kapiserver.testing.process import ServerProcess
        server = ServerProcess(extra_config={"log_level": "warn"}).start()
        kubeconfig = server.kubeconfig
    try:
        started = time.monotonic()
        report = run(kubeconfig, args.cases, args.seed, args.quiet, depth=not args.no_depth,
                     hang_seconds=args.hang_seconds)
        elapsed = time.monotonic() - started
        total = sum(report.classes.values())
        print(f"{total} requests in {elapsed:.0f} s (seed {args.seed}), slowest {report.slowest:.2f} s")
        for name in sorted(report.classes):
            print(f"  {name}: {report.classes[name]}")
        if server is not None and server.proc is not None and server.proc.poll() is not None:
            report.problems.append(f"the server process exited with {server.proc.returncode}")
        print(f"problems: {len(report.problems)}")
        for line in report.problems:
            print("  " + line)
        return 1 if report.problems else 0
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
