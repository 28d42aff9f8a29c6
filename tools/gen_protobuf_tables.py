"""Generate kapiserver/machinery/protobuf_tables_generated.py from upstream's wire definitions.

Kubernetes numbers every field of its API types in ``generated.proto`` and
says in ``types.go`` how Go encodes each one as JSON (its name, ``omitempty``,
pointer or not, inlined).  The protobuf codec (machinery/protobuf.py) needs
both facts; this script reads them from k8s.io/api and k8s.io/apimachinery
checkouts and writes one table per message, for every message reachable from
the kinds listed in KINDS.  Hand-written tables in machinery/protobuf_types.py
(meta/v1 and the first kinds) are not generated again.

    python3 tools/gen_protobuf_tables.py --api <k8s.io/api git dir> \\
        --apimachinery <k8s.io/apimachinery git dir>

(the tag defaults to kapiserver.kube_version.API_MODULE_TAG, the version we emulate)

(``fetch github:kubernetes/api`` brings a bare git copy; files are read with
``git show <tag>:<path>``.)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field


OUTPUT = "kapiserver/machinery/protobuf_tables_generated.py"

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from kapiserver import kube_version  # noqa: E402
from kapiserver.machinery.protobuf_types import MESSAGES as HAND_WRITTEN  # noqa: E402  (not generated again)

# api package directory -> (group, version)
PACKAGES = {
    "core/v1": ("", "v1"), "apps/v1": ("apps", "v1"), "batch/v1": ("batch", "v1"),
    "rbac/v1": ("rbac.authorization.k8s.io", "v1"), "networking/v1": ("networking.k8s.io", "v1"),
    "policy/v1": ("policy", "v1"), "storage/v1": ("storage.k8s.io", "v1"),
    "scheduling/v1": ("scheduling.k8s.io", "v1"), "discovery/v1": ("discovery.k8s.io", "v1"),
    "autoscaling/v2": ("autoscaling", "v2"), "autoscaling/v1": ("autoscaling", "v1"),
    "authorization/v1": ("authorization.k8s.io", "v1"),
    "authentication/v1": ("authentication.k8s.io", "v1"),
    "node/v1": ("node.k8s.io", "v1"),
}
META = "pkg/apis/meta/v1"

# Top-level kinds to generate (their List kinds are added when the package has them).
KINDS = {
    "core/v1": ["Pod", "Service", "Endpoints", "PersistentVolumeClaim", "PersistentVolume", "Node", "PodTemplate",
                "ReplicationController", "ResourceQuota", "LimitRange", "Binding", "ComponentStatus"],
    "apps/v1": ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"],
    "batch/v1": ["Job", "CronJob"],
    "rbac/v1": ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"],
    "networking/v1": ["Ingress", "IngressClass", "NetworkPolicy"],
    "policy/v1": ["PodDisruptionBudget", "Eviction"],
    "storage/v1": ["StorageClass", "CSIDriver", "CSINode", "CSIStorageCapacity", "VolumeAttachment"],
    "scheduling/v1": ["PriorityClass"],
    "discovery/v1": ["EndpointSlice"],
    "autoscaling/v2": ["HorizontalPodAutoscaler"],
    "autoscaling/v1": ["HorizontalPodAutoscaler"],
    "authorization/v1": ["SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview",
                         "SelfSubjectRulesReview"],
    "authentication/v1": ["SelfSubjectReview", "TokenRequest", "TokenReview"],
    "node/v1": ["RuntimeClass"],
}

# proto types with a special JSON form -> the codec's field kind
SPECIAL = {
    ".k8s.io.apimachinery.pkg.apis.meta.v1.Time": "TIME",
    ".k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MICRO_TIME",
    ".k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "FIELDS_V1",
    ".k8s.io.apimachinery.pkg.util.intstr.IntOrString": "INT_OR_STRING",
    ".k8s.io.apimachinery.pkg.api.resource.Quantity": "QUANTITY",
}
SCALARS = {"string": "STRING", "bool": "BOOL", "int32": "INT32", "int64": "INT64", "bytes": "BYTES"}
MAPS = {"string": "MAP_STRING", "bytes": "MAP_BYTES", ".k8s.io.apimachinery.pkg.api.resource.Quantity": "MAP_QUANTITY",
        ".k8s.io.apimachinery.pkg.apis.meta.v1.Time": "MAP_TIME",
        # authentication's and authorization's ExtraValue: a message wrapping a string list
        "ExtraValue": "MAP_STRING_LIST"}


@dataclass
class ProtoField:
    name: str
    number: int
    type: str
    repeated: bool = False
    map_value: str = ""


@dataclass
class GoField:
    json_name: str
    pointer: bool
    omitempty: bool
    omitzero: bool
    inline: bool


@dataclass
class Message:
    package: str  # short name prefix: "core", "autoscaling.v2", "meta"
    name: str
    fields: list[ProtoField] = field(default_factory=list)


def git_show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def short_package(proto_package: str) -> str:
    """``k8s.io.api.apps.v1`` -> ``apps``; ``k8s.io.api.autoscaling.v2`` -> ``autoscaling.v2``."""
    parts = proto_package.split(".")
    group, version = parts[-2], parts[-1]
    return group if version == "v1" else f"{group}.{version}"


_MESSAGE = re.compile(r"^message (\w+) \{(.*?)^\}", re.S | re.M)
_FIELD = re.compile(r"^\s*(optional|repeated)\s+([\w.]+)\s+(\w+)\s*=\s*(\d+);", re.M)
_MAP = re.compile(r"^\s*map<\s*string\s*,\s*([\w.]+)\s*>\s+(\w+)\s*=\s*(\d+);", re.M)


def parse_proto(text: str) -> tuple[str, dict[str, Message]]:
    """The proto package and its messages (fields only; comments are skipped by the patterns)."""
    package = re.search(r"^package ([\w.]+);", text, re.M).group(1)
    short = short_package(package)
    messages = {}
    for m in _MESSAGE.finditer(text):
        body = "\n".join(line for line in m.group(2).splitlines() if not line.strip().startswith("//"))
        msg = Message(short, m.group(1))
        for f in _FIELD.finditer(body):
            msg.fields.append(ProtoField(f.group(3), int(f.group(4)), f.group(2), repeated=f.group(1) == "repeated"))
        for f in _MAP.finditer(body):
            msg.fields.append(ProtoField(f.group(2), int(f.group(3)), "map", map_value=f.group(1)))
        messages[m.group(1)] = msg
    return package, messages


_STRUCT = re.compile(r"^type (\w+) struct \{(.*?)^\}", re.S | re.M)
_GO_FIELD = re.compile(r"^\s*(?:(\w+)\s+)?(\*?[\w.\[\]*]+)\s+`([^`]*)`", re.M)


def parse_go(text: str) -> dict[str, dict[str, GoField]]:
    """struct name -> proto field name -> how Go writes it as JSON."""
    structs: dict[str, dict[str, GoField]] = {}
    for m in _STRUCT.finditer(text):
        fields: dict[str, GoField] = {}
        for line in m.group(2).splitlines():
            if line.strip().startswith("//"):
                continue
            f = _GO_FIELD.match(line)
            if not f:
                continue
            tags = dict(re.findall(r'(\w+):"([^"]*)"', f.group(3)))
            proto = tags.get("protobuf", "")
            name = re.search(r"name=(\w+)", proto)
            if not name:
                continue
            json_parts = tags.get("json", "").split(",")
            fields[name.group(1)] = GoField(json_name=json_parts[0], pointer=f.group(2).startswith("*"),
                                            omitempty="omitempty" in json_parts[1:],
                                            omitzero="omitzero" in json_parts[1:],
                                            inline="inline" in json_parts[1:])
        structs[m.group(1)] = fields
    return structs


def generate(args: argparse.Namespace) -> str:
    protos: dict[str, dict[str, Message]] = {}  # proto package -> messages
    go: dict[str, dict[str, dict[str, GoField]]] = {}
    for directory in list(PACKAGES) + [META]:
        repo = args.apimachinery if directory == META else args.api
        tag = args.apimachinery_tag or args.tag if directory == META else args.tag
        package, messages = parse_proto(git_show(repo, tag, f"{directory}/generated.proto"))
        protos[package] = messages
        go[package] = parse_go(git_show(repo, tag, f"{directory}/types.go"))
    tables: dict[str, list[str]] = {}
    unsupported: set[str] = set()

    def resolve(type_name: str, package: str) -> tuple[str, str]:
        if type_name in SPECIAL:
            return SPECIAL[type_name], ""
        if type_name in SCALARS:
            return SCALARS[type_name], ""
        if type_name.startswith("."):
            pkg, _, msg = type_name[1:].rpartition(".")
        else:
            pkg, msg = package, type_name
        if pkg not in protos or msg not in protos[pkg]:
            return "", ""
        return "MESSAGE", visit(pkg, msg)

    def visit(package: str, name: str) -> str:
        msg = protos[package][name]
        full = f"{msg.package}.{name}"
        if full in tables or full in unsupported or full in HAND_WRITTEN:
            return full
        tables[full] = []  # placeholder: recursive types
        lines = []
        struct = go[package].get(name, {})
        for f in sorted(msg.fields, key=lambda f: f.number):
            info = struct.get(f.name) or GoField(f.name, False, True, False, False)
            if f.type == "map":
                kind = MAPS.get(f.map_value)
                if kind is None:
                    unsupported.add(full)
                    break
                lines.append(f'_f("{info.json_name}", {f.number}, {kind}{_flags(info, False)}),')
                continue
            kind, sub = resolve(f.type, package)
            if not kind or sub in unsupported:
                unsupported.add(full)
                break
            if kind == "MESSAGE":
                lines.append(f'_msg("{info.json_name or f.name}", {f.number}, "{sub}"{_flags(info, f.repeated)}),')
            else:
                lines.append(f'_f("{info.json_name}", {f.number}, {kind}{_flags(info, f.repeated)}),')
        if full in unsupported:
            del tables[full]
        else:
            tables[full] = lines
        return full

    kinds: list[tuple[str, str, str, str]] = []
    for directory, names in KINDS.items():
        group, version = PACKAGES[directory]
        package = next(p for p in protos if p.endswith("." + directory.replace("/", ".")))
        for kind in names:
            for candidate in (kind, kind + "List"):
                if candidate in protos[package]:
                    full = visit(package, candidate)
                    if full not in unsupported:
                        kinds.append((group, version, candidate, full))
    # a message that reaches an unsupported one is unsupported too
    changed = True
    while changed:
        changed = False
        for full, lines in list(tables.items()):
            if any(f'"{u}"' in line for u in unsupported for line in lines):
                unsupported.add(full)
                del tables[full]
                changed = True
    kinds = [k for k in kinds if k[3] in tables]

    out = [f'"""Generated by tools/gen_protobuf_tables.py from k8s.io/api {args.tag}: do not edit.',
           "",
           "Field tables (see machinery/protobuf_types.Field) of the messages of the",
           "built-in kinds below and everything they reach.  Regenerate with the command",
           'in the script\'s docstring."""',
           "from kapiserver.machinery.protobuf_types import (BOOL, BYTES, FIELDS_V1, INT32, INT64, INT_OR_STRING,"
           " MAP_BYTES,",
           "                                                 MAP_QUANTITY, MAP_STRING, MAP_STRING_LIST, MAP_TIME,"
           " MICRO_TIME,",
           "                                                 QUANTITY, STRING, TIME, _f,",
           "                                                 _msg)",
           "",
           "# the k8s.io/api tag these tables were generated from (a test checks it is kube_version's)",
           f'API_MODULE_TAG = "{args.tag}"',
           "",
           "MESSAGES = {"]
    for full in sorted(tables):
        out.append(f'    "{full}": (')
        out.extend(f"        {line}" for line in tables[full])
        out.append("    ),")
    out.append("}")
    out.append("")
    out.append("KINDS = {")
    for group, version, kind, full in kinds:
        out.append(f'    ("{group}", "{version}", "{kind}"): "{full}",')
    out.append("}")
    print(f"{len(tables)} messages, {len(kinds)} kinds; left out: {sorted(unsupported)}", file=sys.stderr)
    return "\n".join(out) + "\n"


def _flags(info: GoField, repeated: bool) -> str:
    flags = []
    if repeated:
        flags.append("repeated=True")
    if info.pointer:
        flags.append("pointer=True")
    if not info.omitempty and not info.inline:
        flags.append("omitempty=False")
    if info.omitzero:
        flags.append("omitzero=True")
    if info.inline:
        flags.append("inline=True")
    return "".join(", " + f for f in flags)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", required=True, help="git dir of k8s.io/api")
    parser.add_argument("--apimachinery", required=True, help="git dir of k8s.io/apimachinery")
    parser.add_argument("--tag", default=kube_version.API_MODULE_TAG)
    parser.add_argument("--apimachinery-tag", default="")
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args()
    with open(args.output, "w") as f:
        f.write(generate(args))


if __name__ == "__main__":
    main()
