"""Generate kapiserver/machinery/protobuf_tables_generated.py from upstream's wire definitions.

Kubernetes numbers every field of its API types in ``generated.proto`` and
says in ``types.go`` how Go encodes each one as JSON (its name, ``omitempty``,
pointer or not, inlined).  The protobuf codec (machinery/protobuf.py) needs
both facts; this script reads them from the Go modules that define the
built-in kinds (k8s.io/api, k8s.io/apimachinery, k8s.io/apiextensions-apiserver,
k8s.io/kube-aggregator) and writes one table per message, for every message
reachable from the kinds listed in KINDS.  Hand-written tables in
machinery/protobuf_types.py (meta/v1 and the first kinds) are not generated
again.  A kind whose messages cannot all be described fails the run.

    python3 tools/gen_protobuf_tables.py --mirrors /work/.mirror

reads bare git copies ``<mirrors>/kubernetes+<module>/repo`` (what
``fetch github:kubernetes/<module>`` brings; files are read with
``git show <tag>:<path>``); ``--api``, ``--apimachinery``,
``--apiextensions-apiserver`` and ``--kube-aggregator`` name them one by one.
The tag defaults to kapiserver.kube_version.API_MODULE_TAG, the version we
emulate (the staging modules are tagged together).
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
from kapiserver.machinery import protobuf_types  # noqa: E402
from kapiserver.machinery.protobuf_types import MESSAGE  # noqa: E402
from kapiserver.machinery.protobuf_types import MESSAGES as HAND_WRITTEN  # noqa: E402  (not generated again)

MODULES = ("api", "apimachinery", "apiextensions-apiserver", "kube-aggregator")

# package directory -> (module, group, version); the group is "" for packages without kinds of their own
PACKAGES = {
    "core/v1": ("api", "", "v1"), "apps/v1": ("api", "apps", "v1"), "batch/v1": ("api", "batch", "v1"),
    "rbac/v1": ("api", "rbac.authorization.k8s.io", "v1"),
    "networking/v1": ("api", "networking.k8s.io", "v1"),
    "policy/v1": ("api", "policy", "v1"), "storage/v1": ("api", "storage.k8s.io", "v1"),
    "scheduling/v1": ("api", "scheduling.k8s.io", "v1"), "discovery/v1": ("api", "discovery.k8s.io", "v1"),
    "autoscaling/v2": ("api", "autoscaling", "v2"), "autoscaling/v1": ("api", "autoscaling", "v1"),
    "authorization/v1": ("api", "authorization.k8s.io", "v1"),
    "authentication/v1": ("api", "authentication.k8s.io", "v1"),
    "admissionregistration/v1": ("api", "admissionregistration.k8s.io", "v1"),
    "flowcontrol/v1": ("api", "flowcontrol.apiserver.k8s.io", "v1"),
    "certificates/v1": ("api", "certificates.k8s.io", "v1"),
    "node/v1": ("api", "node.k8s.io", "v1"),
    "pkg/apis/apiextensions/v1": ("apiextensions-apiserver", "apiextensions.k8s.io", "v1"),
    "pkg/apis/apiregistration/v1": ("kube-aggregator", "apiregistration.k8s.io", "v1"),
    "pkg/apis/meta/v1": ("apimachinery", "meta.k8s.io", "v1"),
    "pkg/apis/meta/v1beta1": ("apimachinery", "meta.k8s.io", "v1beta1"),
    "pkg/runtime": ("apimachinery", "", ""),
}

# Top-level kinds to generate (their List kinds are added when the package has them).
KINDS = {
    "core/v1": ["Pod", "Service", "Endpoints", "PersistentVolumeClaim", "PersistentVolume", "Node", "PodTemplate",
                "ReplicationController", "ResourceQuota", "LimitRange", "Binding", "ComponentStatus"],
    "apps/v1": ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"],
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
    "admissionregistration/v1": ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                                 "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"],
    "flowcontrol/v1": ["FlowSchema", "PriorityLevelConfiguration"],
    "certificates/v1": ["CertificateSigningRequest"],
    "node/v1": ["RuntimeClass"],
    "pkg/apis/apiextensions/v1": ["CustomResourceDefinition"],
    "pkg/apis/apiregistration/v1": ["APIService"],
    # PartialObjectMetadata answers (metadata informers); v1's kinds are hand-written tables
    "pkg/apis/meta/v1beta1": ["PartialObjectMetadataList"],
}
# Messages the codec needs that no kind above reaches (the frame of a protobuf watch).
EXTRA_MESSAGES = {"pkg/apis/meta/v1": ["WatchEvent"]}

# proto types with a special JSON form -> the codec's field kind
SPECIAL = {
    ".k8s.io.apimachinery.pkg.apis.meta.v1.Time": "TIME",
    ".k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "MICRO_TIME",
    ".k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "FIELDS_V1",
    ".k8s.io.apimachinery.pkg.util.intstr.IntOrString": "INT_OR_STRING",
    ".k8s.io.apimachinery.pkg.api.resource.Quantity": "QUANTITY",
}
SCALARS = {"string": "STRING", "bool": "BOOL", "int32": "INT32", "int64": "INT64", "bytes": "BYTES",
           "double": "DOUBLE"}
MAPS = {"string": "MAP_STRING", "bytes": "MAP_BYTES", ".k8s.io.apimachinery.pkg.api.resource.Quantity": "MAP_QUANTITY",
        ".k8s.io.apimachinery.pkg.apis.meta.v1.Time": "MAP_TIME",
        # authentication's, authorization's and certificates' ExtraValue: a message wrapping a string list
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
    order: int = 0  # position in the Go struct: JSON key order


@dataclass
class Message:
    package: str  # short name prefix: "core", "autoscaling.v2", "meta", "runtime"
    name: str
    fields: list[ProtoField] = field(default_factory=list)


def git_show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def git_ls(repo: str, tag: str, directory: str) -> list[str]:
    out = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", f"{tag}:{directory}"], check=True,
                         capture_output=True, text=True).stdout
    return out.split()


def go_sources(names: list[str]) -> list[str]:
    """The hand-written Go files of a package (where the JSON tags are)."""
    return sorted(n for n in names if n.endswith(".go") and not n.endswith("_test.go")
                  and not n.startswith("zz_generated") and "generated" not in n)


def short_package(proto_package: str) -> str:
    """``k8s.io.api.apps.v1`` -> ``apps``; ``k8s.io.api.autoscaling.v2`` -> ``autoscaling.v2``;
    ``k8s.io.apimachinery.pkg.runtime`` -> ``runtime``."""
    parts = proto_package.split(".")
    group, version = parts[-2], parts[-1]
    if not re.fullmatch(r"v\d+((alpha|beta)\d+)?", version):
        return version
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


def parse_go(text: str) -> dict[str, dict[int, GoField]]:
    """struct name -> proto field number -> how Go writes it as JSON.

    Keyed by number: an embedded struct's tag may carry no ``name=``
    (EphemeralContainer's ``protobuf:"bytes,1,req"``)."""
    structs: dict[str, dict[int, GoField]] = {}
    for m in _STRUCT.finditer(text):
        fields: dict[int, GoField] = {}
        for line in m.group(2).splitlines():
            if line.strip().startswith("//"):
                continue
            f = _GO_FIELD.match(line)
            if not f:
                continue
            tags = dict(re.findall(r'(\w+):"([^"]*)"', f.group(3)))
            number = re.match(r"\w+,(\d+),", tags.get("protobuf", ""))
            if not number:
                continue
            json_parts = tags.get("json", "").split(",")
            fields[int(number.group(1))] = GoField(json_name=json_parts[0], pointer=f.group(2).startswith("*"),
                                            omitempty="omitempty" in json_parts[1:],
                                            omitzero="omitzero" in json_parts[1:],
                                            inline="inline" in json_parts[1:], order=len(fields))
        structs[m.group(1)] = fields
    return structs


def read_sources(args: argparse.Namespace) -> tuple[dict[str, dict[str, Message]], dict[str, dict]]:
    """proto package -> messages, and proto package -> Go structs, for every package in PACKAGES."""
    protos: dict[str, dict[str, Message]] = {}
    go: dict[str, dict[str, dict[int, GoField]]] = {}
    for directory, (module, _, _) in PACKAGES.items():
        repo = repo_of(args, module)
        package, messages = parse_proto(git_show(repo, args.tag, f"{directory}/generated.proto"))
        protos[package] = messages
        structs: dict[str, dict[int, GoField]] = {}
        for name in go_sources(git_ls(repo, args.tag, directory)):
            structs.update(parse_go(git_show(repo, args.tag, f"{directory}/{name}")))
        go[package] = structs
    return protos, go


def repo_of(args: argparse.Namespace, module: str) -> str:
    given = getattr(args, module.replace("-", "_"))
    if given:
        return given
    if args.mirrors:
        return os.path.join(args.mirrors, f"kubernetes+{module}", "repo")
    raise SystemExit(f"no git copy of k8s.io/{module}: pass --mirrors or --{module}")


class Unsupported(Exception):
    """A message has a field the codec cannot describe."""


def generate(args: argparse.Namespace) -> str:
    protos, go = read_sources(args)
    tables: dict[str, list[str]] = {}

    def resolve(type_name: str, package: str) -> tuple[str, str]:
        if type_name in SCALARS:
            return SCALARS[type_name], ""
        # meta/v1's own messages name Time and MicroTime without their package
        qualified = type_name if type_name.startswith(".") else f".{package}.{type_name}"
        if qualified in SPECIAL:
            return SPECIAL[qualified], ""
        if type_name.startswith("."):
            pkg, _, msg = type_name[1:].rpartition(".")
        else:
            pkg, msg = package, type_name
        if pkg not in protos or msg not in protos[pkg]:
            raise Unsupported(f"{type_name} (not in the packages read)")
        return "MESSAGE", visit(pkg, msg)

    def visit(package: str, name: str) -> str:
        msg = protos[package][name]
        full = f"{msg.package}.{name}"
        if full in tables or full in HAND_WRITTEN:
            return full
        tables[full] = []  # placeholder: recursive types
        lines = []
        struct = go[package].get(name, {})
        unknown_order = len(struct)
        # JSON key order is the Go struct's; fields Go does not tag go last, by number
        ordered = sorted(msg.fields, key=lambda f: (struct[f.number].order if f.number in struct else unknown_order,
                                                    f.number))
        for f in ordered:
            info = struct.get(f.number) or GoField(f.name, False, True, False, False)
            # no JSON name: inlined (named for readability), or inside a type with its own JSON
            # form (RawExtension's json:"-" bytes): the proto name
            json_name = f.name if info.json_name in ("", "-") else info.json_name
            if f.type == "map":
                kind = MAPS.get(f.map_value)
                if kind is None:
                    value_kind, sub = resolve(f.map_value, package)
                    if value_kind != "MESSAGE":
                        raise Unsupported(f"{full}.{f.name}: map of {f.map_value}")
                    lines.append(_line(json_name, f.number, "MAP_MESSAGE", _flags(info, False), sub))
                    continue
                lines.append(_line(json_name, f.number, kind, _flags(info, False)))
                continue
            kind, sub = resolve(f.type, package)
            lines.append(_line(json_name, f.number, kind, _flags(info, f.repeated), sub))
        tables[full] = lines
        return full

    def package_of(directory: str) -> str:
        return next(p for p in protos if p.endswith("." + directory.replace("/", ".")))

    kinds: list[tuple[str, str, str, str]] = []
    failed: list[str] = []
    for directory, names in KINDS.items():
        _, group, version = PACKAGES[directory]
        package = package_of(directory)
        for kind in names:
            if kind not in protos[package]:
                failed.append(f"{directory} {kind}: no such message")
                continue
            for candidate in (kind, kind + "List"):
                if candidate in protos[package]:
                    try:
                        kinds.append((group, version, candidate, visit(package, candidate)))
                    except Unsupported as e:
                        failed.append(f"{directory} {candidate}: {e}")
    for directory, names in EXTRA_MESSAGES.items():
        for name in names:
            visit(package_of(directory), name)
    if failed:
        raise SystemExit("cannot describe: " + "; ".join(failed))

    out = [f'"""Generated by tools/gen_protobuf_tables.py from the Kubernetes Go modules at {args.tag}: do not edit.',
           "",
           "Field tables (see machinery/protobuf_types.Field) of the messages of the",
           "built-in kinds below and everything they reach, as text read into a message's",
           "fields when it is first used (``protobuf_types.FieldTables``: a field a line,",
           "its JSON name, number, kind, and what is not the default: ``message=``,",
           "``repeated``, ``pointer``, ``!omitempty``, ``omitzero``, ``inline``).",
           "Regenerate with the command in the script's docstring.\"\"\"",
           "from kapiserver.machinery.protobuf_types import FieldTables",
           "",
           "# the module tag these tables were generated from (a test checks it is kube_version's)",
           f'API_MODULE_TAG = "{args.tag}"',
           "",
           "MESSAGES = FieldTables({"]
    for full in sorted(tables):
        if not tables[full]:
            out.append(f'    "{full}": "",')
            continue
        out.append(f'    "{full}": (')
        out.extend(f'        "{line}\\n"' for line in tables[full])
        out.append("    ),")
    out.append("})")
    out.append("")
    out.append("KINDS = {")
    for group, version, kind, full in kinds:
        out.append(f'    ("{group}", "{version}", "{kind}"): "{full}",')
    out.append("}")
    print(f"{len(tables)} messages, {len(kinds)} kinds", file=sys.stderr)
    return "\n".join(out) + "\n"


def _flags(info: GoField, repeated: bool) -> list[str]:
    """How a field differs from ``protobuf_types.Field``'s defaults, as its table line says it."""
    flags = []
    if repeated:
        flags.append("repeated")
    if info.pointer:
        flags.append("pointer")
    if not info.omitempty and not info.inline:
        flags.append("!omitempty")
    if info.omitzero:
        flags.append("omitzero")
    if info.inline:
        flags.append("inline")
    return flags


def _line(json_name: str, number: int, kind: str, flags: list[str], message: str = "") -> str:
    """One field's line of a generated table (``protobuf_types.FieldTables`` reads it); ``kind`` is
    the name of the kind's constant in protobuf_types, or MESSAGE with ``message``."""
    value = MESSAGE if kind == "MESSAGE" else getattr(protobuf_types, kind)
    return " ".join([json_name, str(number), value, *([f"message={message}"] if message else []), *flags])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirrors", default="", help="folder of kubernetes+<module>/repo bare git copies")
    for module in MODULES:
        parser.add_argument(f"--{module}", default="", help=f"git dir of k8s.io/{module}")
    parser.add_argument("--tag", default=kube_version.API_MODULE_TAG)
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args()
    text = generate(args)
    with open(args.output, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
