"""The pod spec shared by Pods, PodTemplates and every workload's pod template.

Defaulting follows upstream's ``SetDefaults_PodSpec`` / ``SetDefaults_Container``
/ probe and volume defaults (core/v1); validation is the subset of
``ValidatePodSpec`` users hit most.  Callers add what is specific to them
(a Deployment's template must have ``restartPolicy: Always``, a Pod's spec is
mostly immutable).
"""
from __future__ import annotations

import re
from typing import Any, Iterator

from kapiserver.apis import field_checks
from kapiserver.machinery import errors, quantity, validation
from kapiserver.machinery.errors import Cause

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
DEFAULT_MODE = 420  # 0644
PORT_RANGE = "must be between 1 and 65535, inclusive"
ENV_NAME_MESSAGE = "a valid environment variable name must consist only of printable ASCII characters other than '='"
_IANA_SVC_NAME_MESSAGE = "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"

# Every volume source a Volume may carry (exactly one of them).
VOLUME_SOURCES = (
    "hostPath", "emptyDir", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "secret", "nfs", "iscsi",
    "glusterfs", "persistentVolumeClaim", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "downwardAPI",
    "fc", "azureFile", "configMap", "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "projected",
    "portworxVolume", "scaleIO", "storageos", "csi", "ephemeral", "image",
)


# ------------------------------------------------------------------ defaults

def _image_tag_is_latest(image: str) -> bool:
    """Upstream's pull-policy rule: no tag and no digest means ``latest``."""
    if "@" in image:
        return False
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return True
    return last.rsplit(":", 1)[1] == "latest"


def _default_probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    _default_handler(probe)


def _default_handler(handler: Any) -> None:
    if not isinstance(handler, dict):
        return
    http = handler.get("httpGet")
    if isinstance(http, dict):
        if not http.get("path"):
            http["path"] = "/"
        http.setdefault("scheme", "HTTP")


def _default_container(c: dict, host_network: bool) -> None:
    image = c.get("image")
    if not c.get("imagePullPolicy"):
        latest = isinstance(image, str) and bool(image) and _image_tag_is_latest(image)
        c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    c.setdefault("resources", {})
    for port in c.get("ports") or ():
        if isinstance(port, dict):
            if not port.get("protocol"):
                port["protocol"] = "TCP"
            if host_network and not port.get("hostPort") and isinstance(port.get("containerPort"), int):
                port["hostPort"] = port["containerPort"]
    for env in c.get("env") or ():
        field_ref = ((env or {}).get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None
        if isinstance(field_ref, dict):
            field_ref.setdefault("apiVersion", "v1")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(c.get(probe))
    lifecycle = c.get("lifecycle")
    if isinstance(lifecycle, dict):
        _default_handler(lifecycle.get("postStart"))
        _default_handler(lifecycle.get("preStop"))


def _default_volume(v: dict) -> None:
    if not any(k in v for k in VOLUME_SOURCES):
        v["emptyDir"] = {}
    for source in ("secret", "configMap", "downwardAPI", "projected"):
        if isinstance(v.get(source), dict):
            v[source].setdefault("defaultMode", DEFAULT_MODE)
    for item in (v.get("downwardAPI") or {}).get("items") or ():
        if isinstance(item, dict) and isinstance(item.get("fieldRef"), dict):
            item["fieldRef"].setdefault("apiVersion", "v1")
    for proj in (v.get("projected") or {}).get("sources") or ():
        token = proj.get("serviceAccountToken") if isinstance(proj, dict) else None
        if isinstance(token, dict):
            token.setdefault("expirationSeconds", 3600)
    if isinstance(v.get("hostPath"), dict):
        v["hostPath"].setdefault("type", "")


def all_containers(spec: dict) -> Iterator[tuple[str, int, dict]]:
    """(field, index, container) for init, regular and ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(key)
        if isinstance(items, list):
            for i, c in enumerate(items):
                if isinstance(c, dict):
                    yield key, i, c


def default_pod_spec(spec: dict) -> None:
    """Upstream's defaults for a PodSpec and everything inside it (in place)."""
    if not isinstance(spec, dict):
        return
    if not spec.get("dnsPolicy"):
        spec["dnsPolicy"] = "ClusterFirst"
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if spec.get("securityContext") is None:
        spec["securityContext"] = {}
    spec.setdefault("terminationGracePeriodSeconds", 30)
    if not spec.get("schedulerName"):
        spec["schedulerName"] = "default-scheduler"
    host_network = spec.get("hostNetwork") is True
    for _, _, c in all_containers(spec):
        _default_container(c, host_network)
    for v in spec.get("volumes") or ():
        if isinstance(v, dict):
            _default_volume(v)


def default_pod_template_spec(template: dict) -> None:
    """Defaults of ``template.spec``; ``template.metadata`` stays as given."""
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])


# ------------------------------------------------------------------ validation

def field_not_found(path: str, value: Any) -> Cause:
    """upstream's ``field.NotFound``."""
    return Cause(errors.NOT_FOUND, f"Not found: {errors.render_value(value)}", path)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_valid_port_name(name: str) -> list[str]:
    """upstream's IsValidPortName (an IANA service name)."""
    problems = []
    if len(name) > 15:
        problems.append(validation.max_len_error(15))
    if not re.fullmatch(r"[-a-z0-9]+", name):
        problems.append(_IANA_SVC_NAME_MESSAGE)
    elif not re.search(r"[a-z]", name):
        problems.append("must contain at least one letter (a-z)")
    elif "--" in name:
        problems.append("must not contain consecutive hyphens")
    elif name.startswith("-") or name.endswith("-"):
        problems.append("must not begin or end with a hyphen")
    return problems


def validate_port_number(value: Any, path: str) -> list[Cause]:
    if not _is_int(value) or not 1 <= value <= 65535:
        return [errors.field_invalid(path, value, PORT_RANGE)]
    return []


def validate_non_negative(value: Any, path: str) -> list[Cause]:
    if _is_int(value) and value < 0:
        return [errors.field_invalid(path, value, validation.IS_NEGATIVE)]
    return []


def _quantity_string(value: Any) -> str:
    return value if isinstance(value, str) else errors.render_value(value)


def validate_resource_list(resources: Any, path: str) -> list[Cause]:
    """Every value a quantity, none negative."""
    causes = []
    if not isinstance(resources, dict):
        return causes
    for name, value in resources.items():
        parsed = quantity.parse(value)
        key_path = f"{path}[{name}]"
        if parsed is None:
            causes.append(errors.field_invalid(key_path, value, "quantities must match the regular expression "
                                               "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
        elif parsed < 0:
            causes.append(errors.field_invalid(key_path, _quantity_string(value), validation.IS_NEGATIVE))
    return causes


def validate_resource_requirements(req: Any, path: str) -> list[Cause]:
    """Requests and limits are quantities and no request exceeds its limit."""
    if not isinstance(req, dict):
        return []
    limits, requests = req.get("limits") or {}, req.get("requests") or {}
    causes = validate_resource_list(limits, path + ".limits") + validate_resource_list(requests, path + ".requests")
    if causes or not isinstance(limits, dict) or not isinstance(requests, dict):
        return causes
    for name, value in requests.items():
        if name in limits:
            if quantity.parse(value) > quantity.parse(limits[name]):
                causes.append(errors.field_invalid(
                    f"{path}.requests[{name}]", _quantity_string(value),
                    f"must be less than or equal to {name} limit of {_quantity_string(limits[name])}"))
    return causes


def _validate_ports(ports: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(ports if isinstance(ports, list) else ()):
        p = f"{path}[{i}]"
        if not isinstance(port, dict):
            continue
        name = port.get("name")
        if name:
            causes.extend(errors.field_invalid(p + ".name", name, m) for m in is_valid_port_name(name))
            if name in names:
                causes.append(errors.field_duplicate(p + ".name", name))
            names.add(name)
        cp = port.get("containerPort")
        if cp in (None, 0):
            causes.append(errors.field_required(p + ".containerPort"))
        else:
            causes.extend(validate_port_number(cp, p + ".containerPort"))
        hp = port.get("hostPort")
        if hp not in (None, 0):
            causes.extend(validate_port_number(hp, p + ".hostPort"))
        causes.extend(field_checks.one_of(port.get("protocol"), p + ".protocol", PROTOCOLS, required=True))
    return causes


def _validate_env(env: Any, path: str) -> list[Cause]:
    causes = []
    for i, var in enumerate(env if isinstance(env, list) else ()):
        if not isinstance(var, dict):
            continue
        name = var.get("name")
        p = f"{path}[{i}].name"
        if not name:
            causes.append(errors.field_required(p))
        elif "=" in name or not all(" " <= ch <= "~" for ch in name):
            causes.append(errors.field_invalid(p, name, ENV_NAME_MESSAGE))
        if var.get("value") and var.get("valueFrom"):
            causes.append(errors.field_invalid(f"{path}[{i}].valueFrom", "",
                                               "may not be specified when `value` is not empty"))
    return causes


def _validate_container(c: dict, path: str, volumes: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    if not c.get("image"):
        causes.append(errors.field_required(path + ".image"))
    elif isinstance(c.get("image"), str) and c["image"] != c["image"].strip():
        causes.append(errors.field_invalid(path + ".image", c["image"], "must not have leading or trailing whitespace"))
    causes.extend(_validate_ports(c.get("ports"), path + ".ports"))
    causes.extend(_validate_env(c.get("env"), path + ".env"))
    causes.extend(field_checks.one_of(c.get("imagePullPolicy"), path + ".imagePullPolicy", PULL_POLICIES, required=True))
    causes.extend(field_checks.one_of(c.get("terminationMessagePolicy"), path + ".terminationMessagePolicy",
                                TERMINATION_MESSAGE_POLICIES, required=True))
    causes.extend(validate_resource_requirements(c.get("resources"), path + ".resources"))
    mount_paths: set[str] = set()
    for i, mount in enumerate(c.get("volumeMounts") or ()):
        if not isinstance(mount, dict):
            continue
        p = f"{path}.volumeMounts[{i}]"
        name = mount.get("name")
        if not name:
            causes.append(errors.field_required(p + ".name"))
        elif name not in volumes:
            causes.append(field_not_found(p + ".name", name))
        mount_path = mount.get("mountPath")
        if not mount_path:
            causes.append(errors.field_required(p + ".mountPath"))
        elif mount_path in mount_paths:
            causes.append(errors.field_invalid(p + ".mountPath", mount_path, "must be unique"))
        else:
            mount_paths.add(mount_path)
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        pr = c.get(probe)
        if isinstance(pr, dict):
            for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                        "failureThreshold"):
                causes.extend(validate_non_negative(pr.get(key), f"{path}.{probe}.{key}"))
    return causes


def _unique_label_name(name: Any, path: str, seen: set[str]) -> list[Cause]:
    """A required DNS-1123 label, unique among ``seen`` (volume and container names)."""
    if not name:
        return [errors.field_required(path)]
    causes = [errors.field_invalid(path, name, m) for m in validation.is_dns1123_label(name)]
    if name in seen:
        causes.append(errors.field_duplicate(path, name))
    seen.add(name)
    return causes


def _validate_volumes(volumes: Any, path: str) -> tuple[list[Cause], set[str]]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, v in enumerate(volumes if isinstance(volumes, list) else ()):
        if not isinstance(v, dict):
            continue
        p = f"{path}[{i}]"
        causes.extend(_unique_label_name(v.get("name"), p + ".name", names))
        sources = [k for k in VOLUME_SOURCES if v.get(k) is not None]
        if not sources:
            causes.append(errors.field_required(p, "must specify a volume type"))
        for extra in sources[1:]:
            causes.append(errors.field_forbidden(f"{p}.{extra}", "may not specify more than 1 volume type"))
    return causes, names


def validate_pod_spec(spec: dict, path: str) -> list[Cause]:
    """The common upstream ``ValidatePodSpec`` checks; ``path`` is e.g. ``spec`` or ``spec.template.spec``."""
    if not isinstance(spec, dict):
        return [errors.field_required(path)]
    causes, volumes = _validate_volumes(spec.get("volumes"), path + ".volumes")
    if not spec.get("containers"):
        causes.append(errors.field_required(path + ".containers"))
    seen: set[str] = set()
    for key, i, c in all_containers(spec):
        p = f"{path}.{key}[{i}]"
        causes.extend(_unique_label_name(c.get("name"), p + ".name", seen))
        causes.extend(_validate_container(c, p, volumes))
    causes.extend(field_checks.one_of(spec.get("restartPolicy"), path + ".restartPolicy", RESTART_POLICIES, required=True))
    causes.extend(field_checks.one_of(spec.get("dnsPolicy"), path + ".dnsPolicy", DNS_POLICIES, required=True))
    for key in ("terminationGracePeriodSeconds", "activeDeadlineSeconds"):
        causes.extend(validate_non_negative(spec.get(key), f"{path}.{key}"))
    deadline = spec.get("activeDeadlineSeconds")
    if _is_int(deadline) and deadline == 0:
        causes.append(errors.field_invalid(path + ".activeDeadlineSeconds", deadline,
                                           "must be between 1 and 2147483647, inclusive"))
    sa = spec.get("serviceAccountName")
    if sa:
        causes.extend(errors.field_invalid(path + ".serviceAccountName", sa, m)
                      for m in validation.is_dns1123_subdomain(sa))
    node = spec.get("nodeName")
    if node:
        causes.extend(errors.field_invalid(path + ".nodeName", node, m) for m in validation.is_dns1123_subdomain(node))
    return causes


def validate_pod_template_spec(template: dict, path: str) -> list[Cause]:
    """``ValidatePodTemplateSpec``: template labels/annotations and the spec; no ephemeral containers."""
    if not isinstance(template, dict):
        return [errors.field_required(path)]
    md = template.get("metadata") or {}
    causes = validation.validate_labels(md.get("labels"), path + ".metadata.labels")
    causes += validation.validate_annotations(md.get("annotations"), path + ".metadata.annotations")
    spec = template.get("spec")
    causes += validate_pod_spec(spec if isinstance(spec, dict) else {}, path + ".spec")
    if isinstance(spec, dict) and spec.get("ephemeralContainers"):
        causes.append(errors.field_forbidden(path + ".spec.ephemeralContainers",
                                             "ephemeral containers not allowed in pod template"))
    return causes


# ------------------------------------------------------------------ shared helpers for workloads

