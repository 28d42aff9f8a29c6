"""The pod spec shared by Pods, PodTemplates and every workload's pod template.

Defaulting follows upstream's ``SetDefaults_PodSpec`` / ``SetDefaults_Container``
/ probe and volume defaults (core/v1); validation is upstream's
``ValidatePodSpec`` and ``ValidatePodTemplateSpec`` (pkg/apis/core/validation)
with the validation options 1.32 uses.  Volume sources, resources and
scheduling constraints live in their own modules (``volumes``,
``resources``, ``scheduling``).  Callers add what is specific to them (a
Deployment's template must have ``restartPolicy: Always``, a Pod's spec is
mostly immutable).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from kapiserver.apis import field_checks
from kapiserver.apis.core import resources, scheduling, volumes
from kapiserver.apis.core.ports import PROTOCOLS, validate_port_num_or_name, validate_port_number
from kapiserver.machinery import errors, gorepr, quantity, validation
from kapiserver.machinery.errors import Cause
from kapiserver.machinery.jsonvalues import as_dict, as_list, as_str

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
DEFAULT_MODE = 420  # 0644



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
    if not any(k in v for k, _ in volumes.POD_VOLUME_SOURCES):
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
        downward = proj.get("downwardAPI") if isinstance(proj, dict) else None
        for item in (downward.get("items") or ()) if isinstance(downward, dict) else ():
            if isinstance(item, dict) and isinstance(item.get("fieldRef"), dict):
                item["fieldRef"].setdefault("apiVersion", "v1")
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
    """Upstream's defaults for a PodSpec and everything inside it (in place), after
    dropping the fields of disabled features; quantities end in canonical form."""
    if not isinstance(spec, dict):
        return
    drop_disabled_fields(spec)
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
    canonicalize_pod_spec(spec)


def default_pod_template_spec(template: Any) -> None:
    """Defaults of ``template.spec``; ``template.metadata`` stays as given."""
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])


# ------------------------------------------------------------------ disabled features
#
# Fields behind feature gates that are off in 1.32 are dropped on write, as
# upstream's dropDisabledFields does (upstream keeps them when the stored object
# already uses them; nothing stored here ever does).

def _uses(spec: Any, test) -> bool:
    return isinstance(spec, dict) and test(spec)


def drop_disabled_fields(spec: Any, old_spec: Any = None) -> None:
    if not isinstance(spec, dict):
        return
    sc = as_dict(spec.get("securityContext"))
    old_sc = (old_spec or {}).get("securityContext") if isinstance(old_spec, dict) else None
    old_sc = old_sc if isinstance(old_sc, dict) else {}
    for key in ("supplementalGroupsPolicy", "seLinuxChangePolicy"):
        if old_sc.get(key) is None:
            sc.pop(key, None)
    if not _uses(old_spec, lambda o: o.get("hostUsers") is not None):
        spec.pop("hostUsers", None)
    if not _uses(old_spec, lambda o: o.get("resources") is not None):
        spec.pop("resources", None)
    old_containers = list(all_containers(old_spec)) if isinstance(old_spec, dict) else []
    if not any((c.get("securityContext") or {}).get("procMount") not in (None, "Default")
               for _, _, c in old_containers):
        for _, _, c in all_containers(spec):
            if isinstance(c.get("securityContext"), dict) and c["securityContext"].get("procMount") is not None:
                c["securityContext"]["procMount"] = "Default"
    if not (_uses(old_spec, lambda o: o.get("resourceClaims")) or
            any((c.get("resources") or {}).get("claims") for _, _, c in old_containers)):
        spec.pop("resourceClaims", None)
        for _, _, c in all_containers(spec):
            if isinstance(c.get("resources"), dict):
                c["resources"].pop("claims", None)
    if not any(c.get("resizePolicy") for _, _, c in old_containers):
        for _, _, c in all_containers(spec):
            c.pop("resizePolicy", None)
    old_volumes = (old_spec or {}).get("volumes") if isinstance(old_spec, dict) else None
    old_volumes = [v for v in old_volumes if isinstance(v, dict)] if isinstance(old_volumes, list) else []
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, dict)] if isinstance(spec.get("volumes"),
                                                                                         list) else []
    if not any(isinstance(src, dict) and src.get("clusterTrustBundle") is not None
               for v in old_volumes for src in (v.get("projected") or {}).get("sources") or ()):
        for v in volumes:
            for src in (v.get("projected") or {}).get("sources") or () if isinstance(v.get("projected"), dict) else ():
                if isinstance(src, dict):
                    src.pop("clusterTrustBundle", None)
    if not any(v.get("image") is not None for v in old_volumes):
        image_volumes = {v.get("name") for v in volumes if v.get("image") is not None}
        if image_volumes:
            spec["volumes"] = [v for v in spec["volumes"] if not (isinstance(v, dict) and v.get("name") in image_volumes
                                                                 and v.get("image") is not None)]
            for _, _, c in all_containers(spec):
                if isinstance(c.get("volumeMounts"), list):
                    c["volumeMounts"] = [m for m in c["volumeMounts"]
                                         if not (isinstance(m, dict) and m.get("name") in image_volumes)]


def canonicalize_pod_spec(spec: Any) -> None:
    """Quantities in their canonical text, as upstream stores them (``1000m`` → ``1``)."""
    if not isinstance(spec, dict):
        return
    for _, _, c in all_containers(spec):
        resources.canonicalize_requirements(c.get("resources"))
    resources.canonicalize_resource_list(spec.get("overhead"))
    for v in spec.get("volumes") or () if isinstance(spec.get("volumes"), list) else ():
        empty_dir = v.get("emptyDir") if isinstance(v, dict) else None
        if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
            empty_dir["sizeLimit"] = quantity.canonical(empty_dir["sizeLimit"])


# ------------------------------------------------------------------ validation options

@dataclass
class PodOptions:
    """upstream's PodValidationOptions (as GetValidationOptionsFromPodSpecAndMeta sets them in 1.32)."""

    is_pod: bool = False
    allow_invalid_deletion_cost: bool = False
    allow_invalid_label_value_in_selector: bool = False
    allow_invalid_topology_selector: bool = False
    allow_non_local_projected_token_path: bool = False
    allow_namespaced_sysctls: bool = False
    allow_indivisible_hugepages: bool = False


def pod_options(spec: Any = None, old_spec: Any = None, old_meta: Any = None, is_pod: bool = False) -> PodOptions:
    """What an update may keep because the stored object already had it."""
    opts = PodOptions(is_pod=is_pod)
    if isinstance(old_spec, dict):
        opts.allow_invalid_label_value_in_selector = scheduling.affinity_has_invalid_label_value(
            old_spec.get("affinity"))
        opts.allow_invalid_topology_selector = any(
            validation.validate_label_selector(as_dict(c).get("labelSelector"), "x")
            for c in as_list(old_spec.get("topologySpreadConstraints")))
        opts.allow_non_local_projected_token_path = any(
            volumes.validate_local_non_reserved_path(as_str(as_dict(src.get("serviceAccountToken")).get("path")), "x")
            for v in as_list(old_spec.get("volumes"))
            for src in as_list(as_dict(as_dict(v).get("projected")).get("sources"))
            if isinstance(src, dict) and src.get("serviceAccountToken") is not None)
        old_sc = as_dict(old_spec.get("securityContext"))
        opts.allow_namespaced_sysctls = any(
            _host_sysctl_problem(as_str(as_dict(s).get("name")), old_spec) for s in as_list(old_sc.get("sysctls")))
        opts.allow_indivisible_hugepages = any(
            resources.hugepage_problem(name, q)
            for _, _, c in all_containers(old_spec)
            for kind in ("limits", "requests")
            for name, _, q, _ in resources.quantities(as_dict(c.get("resources")).get(kind), "x") if q is not None)
    if isinstance(old_meta, dict):
        opts.allow_invalid_deletion_cost = bool(_deletion_cost_problem(as_dict(old_meta.get("annotations"))))
    return opts


# ------------------------------------------------------------------ small helpers

def _enum(value: Any, path: str, supported: list[str]) -> list[Cause]:
    """Required when empty, NotSupported when unknown (upstream's enum switches)."""
    return field_checks.one_of(value, path, supported, required=True)


# ------------------------------------------------------------------ containers

def _validate_ports(ports: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, port in enumerate(as_list(ports)):
        port = as_dict(port)
        at = f"{path}[{i}]"
        name = as_str(port.get("name"))
        if name:
            problems = validation.is_valid_port_name(name)
            if problems:
                causes.extend(errors.field_invalid(f"{at}.name", name, m) for m in problems)
            elif name in names:
                causes.append(errors.field_duplicate(f"{at}.name", name))
            else:
                names.add(name)
        container_port = port.get("containerPort") or 0
        if container_port == 0:
            causes.append(errors.field_required(f"{at}.containerPort"))
        else:
            causes.extend(validate_port_number(container_port, f"{at}.containerPort"))
        host_port = port.get("hostPort") or 0
        if host_port != 0:
            causes.extend(validate_port_number(host_port, f"{at}.hostPort"))
        causes.extend(_enum(port.get("protocol"), f"{at}.protocol", PROTOCOLS))
    return causes


ENV_DOWNWARD_FIELDS = ["metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
                       "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"]


def _key_selector(selector: dict, path: str) -> list[Cause]:
    name = as_str(selector.get("name"))
    causes = [errors.field_invalid(f"{path}.name", name, m) for m in validation.is_dns1123_subdomain(name)]
    key = as_str(selector.get("key"))
    if not key:
        causes.append(errors.field_required(f"{path}.key"))
    else:
        causes.extend(errors.field_invalid(f"{path}.key", key, m) for m in validation.is_config_map_key(key))
    return causes


def _validate_env_value_from(var: dict, path: str) -> list[Cause]:
    value_from = var.get("valueFrom")
    if value_from is None:
        return []
    value_from = as_dict(value_from)
    causes: list[Cause] = []
    count = 0
    if value_from.get("fieldRef") is not None:
        count += 1
        causes.extend(volumes.validate_object_field_selector(value_from["fieldRef"], sorted(ENV_DOWNWARD_FIELDS),
                                                             f"{path}.fieldRef"))
    if value_from.get("resourceFieldRef") is not None:
        count += 1
        causes.extend(volumes.validate_resource_field_selector(value_from["resourceFieldRef"],
                                                               f"{path}.resourceFieldRef", False))
    for key in ("configMapKeyRef", "secretKeyRef"):
        if value_from.get(key) is not None:
            count += 1
            causes.extend(_key_selector(as_dict(value_from[key]), f"{path}.{key}"))
    if count == 0:
        causes.append(errors.field_invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                                                     "`configMapKeyRef` or `secretKeyRef`"))
    elif var.get("value"):
        causes.append(errors.field_invalid(path, "", "may not be specified when `value` is not empty"))
    elif count > 1:
        causes.append(errors.field_invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def validate_env(env: Any, path: str) -> list[Cause]:
    """upstream's ValidateEnv (relaxed names: RelaxedEnvironmentVariableValidation is on in 1.32)."""
    causes: list[Cause] = []
    for i, var in enumerate(as_list(env)):
        var = as_dict(var)
        at = f"{path}[{i}]"
        name = as_str(var.get("name"))
        if not name:
            causes.append(errors.field_required(f"{at}.name"))
        else:
            causes.extend(errors.field_invalid(f"{at}.name", name, m) for m in validation.is_relaxed_env_var_name(name))
        causes.extend(_validate_env_value_from(var, f"{at}.valueFrom"))
    return causes


def validate_env_from(sources: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, source in enumerate(as_list(sources)):
        source = as_dict(source)
        at = f"{path}[{i}]"
        prefix = as_str(source.get("prefix"))
        if prefix:
            causes.extend(errors.field_invalid(f"{at}.prefix", prefix, m)
                          for m in validation.is_relaxed_env_var_name(prefix))
        count = 0
        for key in ("configMapRef", "secretRef"):
            if source.get(key) is None:
                continue
            count += 1
            name = as_str(as_dict(source[key]).get("name"))
            if not name:
                causes.append(errors.field_required(f"{at}.{key}.name"))
            else:
                causes.extend(errors.field_invalid(f"{at}.{key}.name", name, m)
                              for m in validation.name_is_dns_subdomain(name, True))
        if count == 0:
            causes.append(errors.field_invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
        elif count > 1:
            causes.append(errors.field_invalid(path, "", "may not have more than one field specified at a time"))
    return causes


def _validate_volume_mounts(container: dict, by_name: dict[str, dict], path: str) -> list[Cause]:
    causes: list[Cause] = []
    mounts = as_list(container.get("volumeMounts"))
    device_names = {as_str(as_dict(d).get("name")): as_str(as_dict(d).get("devicePath"))
                    for d in as_list(container.get("volumeDevices"))}
    seen_paths: set[str] = set()
    privileged = as_dict(container.get("securityContext")).get("privileged") is True
    for i, mount in enumerate(mounts):
        mount = as_dict(mount)
        at = f"{path}[{i}]"
        name, mount_path = as_str(mount.get("name")), as_str(mount.get("mountPath"))
        if not name:
            causes.append(errors.field_required(f"{at}.name"))
        if name not in by_name:
            causes.append(errors.field_not_found(f"{at}.name", name))
        if not mount_path:
            causes.append(errors.field_required(f"{at}.mountPath"))
        if mount_path in seen_paths:
            causes.append(errors.field_invalid(f"{at}.mountPath", mount_path, "must be unique"))
        seen_paths.add(mount_path)
        if name in device_names:
            causes.append(errors.field_invalid(f"{at}.name", name, "must not already exist in volumeDevices"))
        if mount_path in device_names.values():
            causes.append(errors.field_invalid(f"{at}.mountPath", mount_path,
                                               "must not already exist as a path in volumeDevices"))
        sub_path, sub_expr = as_str(mount.get("subPath")), as_str(mount.get("subPathExpr"))
        if name in by_name and by_name[name].get("image") is not None:
            if sub_path:
                causes.append(errors.field_invalid(f"{at}.subPath", sub_path, "not allowed in image volume sources"))
            if sub_expr:
                causes.append(errors.field_invalid(f"{at}.subPathExpr", sub_expr,
                                                   "not allowed in image volume sources"))
        if sub_path:
            causes.extend(volumes.validate_local_descending_path(sub_path, f"{path}.subPath"))
        if sub_expr:
            if sub_path:
                causes.append(errors.field_invalid(f"{at}.subPathExpr", sub_expr,
                                                   "subPathExpr and subPath are mutually exclusive"))
            causes.extend(volumes.validate_local_descending_path(sub_expr, f"{path}.subPathExpr"))
        propagation = mount.get("mountPropagation")
        if propagation is not None:
            if propagation not in MOUNT_PROPAGATIONS:
                causes.append(errors.field_not_supported(f"{path}.mountPropagation", propagation, MOUNT_PROPAGATIONS))
            if propagation == "Bidirectional" and not privileged:
                causes.append(errors.field_forbidden(f"{path}.mountPropagation", "Bidirectional mount propagation "
                                                     "is available only to privileged containers"))
        rro = mount.get("recursiveReadOnly")
        if rro is not None:
            if rro in ("Enabled", "IfPossible"):
                if mount.get("readOnly") is not True:
                    causes.append(errors.field_forbidden(f"{path}.recursiveReadOnly",
                                                         "may only be specified when readOnly is true"))
                if propagation not in (None, "None"):
                    causes.append(errors.field_forbidden(f"{path}.recursiveReadOnly", "may only be specified when "
                                                         "mountPropagation is None or not specified"))
            elif rro != "Disabled":
                causes.append(errors.field_not_supported(f"{path}.recursiveReadOnly", rro,
                                                         ["Disabled", "Enabled", "IfPossible"]))
    return causes


MOUNT_PROPAGATIONS = ["Bidirectional", "HostToContainer", "None"]


def _validate_volume_devices(container: dict, by_name: dict[str, dict], path: str) -> list[Cause]:
    causes: list[Cause] = []
    mounts = {as_str(as_dict(m).get("name")): as_str(as_dict(m).get("mountPath"))
              for m in as_list(container.get("volumeMounts"))}
    names: set[str] = set()
    paths: set[str] = set()
    for i, device in enumerate(as_list(container.get("volumeDevices"))):
        device = as_dict(device)
        at = f"{path}[{i}]"
        name, device_path = as_str(device.get("name")), as_str(device.get("devicePath"))
        if not name:
            causes.append(errors.field_required(f"{at}.name"))
        if name in names:
            causes.append(errors.field_invalid(f"{at}.name", name, "must be unique"))
        if name in by_name and not volumes.volume_is_claim(by_name[name]):
            causes.append(errors.field_invalid(f"{at}.name", name, "can only use volume source type of "
                                               "PersistentVolumeClaim or Ephemeral for block mode"))
        if name not in by_name:
            causes.append(errors.field_not_found(f"{at}.name", name))
        if not device_path:
            causes.append(errors.field_required(f"{at}.devicePath"))
        if device_path in paths:
            causes.append(errors.field_invalid(f"{at}.devicePath", device_path, "must be unique"))
        if device_path and ".." in device_path.split("/"):
            causes.append(errors.field_invalid(f"{at}.devicePath", device_path, "can not contain backsteps ('..')"))
        else:
            paths.add(device_path)
        if name in mounts:
            causes.append(errors.field_invalid(f"{at}.name", name, "must not already exist in volumeMounts"))
        if device_path in mounts.values():
            causes.append(errors.field_invalid(f"{at}.devicePath", device_path,
                                               "must not already exist as a path in volumeMounts"))
        if name:
            names.add(name)
    return causes


def _validate_handler(handler: dict, grace: Any, path: str, sleep_allowed: bool) -> list[Cause]:
    causes: list[Cause] = []
    count = 0
    kinds = ("exec", "httpGet", "tcpSocket", "grpc", "sleep") if sleep_allowed else ("exec", "httpGet", "tcpSocket",
                                                                                      "grpc")
    for kind in kinds:
        action = handler.get(kind)
        if action is None:
            continue
        if count:
            causes.append(errors.field_forbidden(f"{path}.{kind}", "may not specify more than 1 handler type"))
            continue
        count += 1
        action = as_dict(action)
        at = f"{path}.{kind}"
        if kind == "exec":
            if not action.get("command"):
                causes.append(errors.field_required(f"{at}.command"))
        elif kind == "httpGet":
            if not action.get("path"):
                causes.append(errors.field_required(f"{at}.path"))
            causes.extend(validate_port_num_or_name(action.get("port"), f"{at}.port"))
            scheme = action.get("scheme") or ""
            if scheme not in ("HTTP", "HTTPS"):
                causes.append(errors.field_not_supported(f"{at}.scheme", scheme, ["HTTP", "HTTPS"]))
            for header in as_list(action.get("httpHeaders")):
                header_name = as_str(as_dict(header).get("name"))
                causes.extend(errors.field_invalid(f"{at}.httpHeaders", header_name, m)
                              for m in validation.is_http_header_name(header_name))
        elif kind == "tcpSocket":
            causes.extend(validate_port_num_or_name(action.get("port"), f"{at}.port"))
        elif kind == "grpc":
            causes.extend(validate_port_number(action.get("port") or 0, f"{at}.port"))
        elif kind == "sleep":
            seconds = action.get("seconds") or 0
            if validation.is_int(grace) and validation.is_int(seconds) and (seconds <= 0 or seconds > grace):
                causes.append(errors.field_invalid(at, seconds, f"must be greater than 0 and less than "
                                                   f"terminationGracePeriodSeconds ({grace}). Enable "
                                                   "AllowPodLifecycleSleepActionZeroValue feature gate for zero "
                                                   "sleep."))
    if not count:
        causes.append(errors.field_required(path, "must specify a handler type"))
    return causes


def _validate_lifecycle(lifecycle: Any, grace: Any, path: str) -> list[Cause]:
    lifecycle = as_dict(lifecycle)
    causes: list[Cause] = []
    for hook in ("postStart", "preStop"):
        if lifecycle.get(hook) is not None:
            causes.extend(_validate_handler(as_dict(lifecycle[hook]), grace, f"{path}.{hook}", True))
    return causes


def _validate_probe(probe: Any, grace: Any, path: str, kind: str) -> list[Cause]:
    if probe is None:
        return []
    probe = as_dict(probe)
    causes = _validate_handler(probe, grace, path, False)
    for key in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        causes.extend(field_checks.non_negative_value(probe.get(key) or 0, f"{path}.{key}"))
    probe_grace = probe.get("terminationGracePeriodSeconds")
    if validation.is_int(probe_grace) and probe_grace <= 0:
        causes.append(errors.field_invalid(f"{path}.terminationGracePeriodSeconds", probe_grace,
                                           "must be greater than 0"))
    if kind in ("livenessProbe", "startupProbe"):
        success = probe.get("successThreshold")
        if success is not None and success != 1:
            causes.append(errors.field_invalid(f"{path}.successThreshold", success, "must be 1"))
    elif probe_grace is not None:
        causes.append(errors.field_invalid(f"{path}.terminationGracePeriodSeconds", probe_grace,
                                           "must not be set for readinessProbes"))
    return causes


def _validate_probes(container: dict, grace: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        causes.extend(_validate_probe(container.get(kind), grace, f"{path}.{kind}", kind))
    return causes


def _validate_resize_policy(policies: Any, path: str, restart_policy: Any) -> list[Cause]:
    causes: list[Cause] = []
    seen: set = set()
    for i, policy in enumerate(as_list(policies)):
        policy = as_dict(policy)
        name, restart = policy.get("resourceName") or "", policy.get("restartPolicy") or ""
        if name in seen:
            causes.append(errors.field_duplicate(f"{path}[{i}]", name))
        seen.add(name)
        if not name:
            causes.append(errors.field_required(path))
        elif name not in ("cpu", "memory"):
            causes.append(errors.field_not_supported(path, name, ["cpu", "memory"]))
        if not restart:
            causes.append(errors.field_required(path))
        elif restart not in ("NotRequired", "RestartContainer"):
            causes.append(errors.field_not_supported(path, restart, ["NotRequired", "RestartContainer"]))
        if restart_policy == "Never" and restart != "NotRequired":
            causes.append(errors.field_invalid(path, restart, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
    return causes


def _validate_seccomp_profile(profile: Any, path: str) -> list[Cause]:
    if profile is None:
        return []
    profile = as_dict(profile)
    causes: list[Cause] = []
    kind = profile.get("type") or ""
    if not kind:
        causes.append(errors.field_required(f"{path}.type", "type is required when seccompProfile is set"))
    elif kind not in ("Localhost", "RuntimeDefault", "Unconfined"):
        causes.append(errors.field_not_supported(f"{path}.type", kind, ["Localhost", "RuntimeDefault", "Unconfined"]))
    localhost = profile.get("localhostProfile")
    if kind == "Localhost":
        if localhost is None:
            causes.append(errors.field_required(f"{path}.localhostProfile",
                                                "must be set when seccomp type is Localhost"))
        else:
            causes.extend(volumes.validate_local_descending_path(as_str(localhost), f"{path}.localhostProfile"))
    elif localhost is not None:
        rendered = gorepr.struct("core.SeccompProfile", (("Type", gorepr.quote(kind)),
                                                        ("LocalhostProfile", gorepr.pointer(localhost, "string"))))
        causes.append(errors.field_invalid(f"{path}.localhostProfile", rendered,
                                           "can only be set when seccomp type is Localhost"))
    return causes


def _validate_apparmor_profile(profile: Any, path: str) -> list[Cause]:
    if profile is None:
        return []
    profile = as_dict(profile)
    kind, localhost = profile.get("type") or "", profile.get("localhostProfile")
    causes: list[Cause] = []
    if kind == "Localhost":
        if localhost is None:
            causes.append(errors.field_required(f"{path}.localhostProfile",
                                                "must be set when AppArmor type is Localhost"))
        else:
            text = as_str(localhost)
            if text.strip() != text:
                causes.append(errors.field_invalid(f"{path}.localhostProfile", text,
                                                   "must not be padded with whitespace"))
            elif not text:
                causes.append(errors.field_required(f"{path}.localhostProfile",
                                                    "must be set when AppArmor type is Localhost"))
            if len(text) > 4095:
                causes.append(errors.field_too_long(f"{path}.localhostProfile", 4095))
    elif kind in ("RuntimeDefault", "Unconfined"):
        if localhost is not None:
            causes.append(errors.field_invalid(f"{path}.localhostProfile", localhost,
                                               "can only be set when AppArmor type is Localhost"))
    elif not kind:
        causes.append(errors.field_required(f"{path}.type", "type is required when appArmorProfile is set"))
    else:
        causes.append(errors.field_not_supported(f"{path}.type", kind, ["Localhost", "RuntimeDefault", "Unconfined"]))
    return causes


_NETBIOS_RE = re.compile(r'^[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}$')
_DNS_DOMAIN_RE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}"
                            r"[a-zA-Z0-9])?)*$")
_USER_CHARS_RE = re.compile(r'["/\\:;|=,+*?<>@\[\]]')
_DOTS_SPACES_RE = re.compile(r"^[. ]+$")


def _validate_windows_options(options: Any, path: str) -> list[Cause]:
    if not isinstance(options, dict):
        return []
    causes: list[Cause] = []
    spec_name = options.get("gmsaCredentialSpecName")
    if spec_name is not None:
        causes.extend(errors.field_invalid(f"{path}.gmsaCredentialSpecName", spec_name, m)
                      for m in validation.is_dns1123_subdomain(as_str(spec_name)))
    cred = options.get("gmsaCredentialSpec")
    if cred is not None:
        if not cred:
            causes.append(errors.field_invalid(f"{path}.gmsaCredentialSpec", cred,
                                               "gmsaCredentialSpec cannot be an empty string"))
        elif len(as_str(cred).encode()) > 64 * 1024:
            causes.append(errors.field_invalid(f"{path}.gmsaCredentialSpec", cred,
                                               "gmsaCredentialSpec size must be under 64 KiB"))
    user = options.get("runAsUserName")
    if user is not None:
        user = as_str(user)
        at = f"{path}.runAsUserName"
        parts = user.split("\\")
        if not user:
            causes.append(errors.field_invalid(at, user, "runAsUserName cannot be an empty string"))
        elif any(ord(ch) < 32 or ord(ch) == 127 for ch in user):
            causes.append(errors.field_invalid(at, user, "runAsUserName cannot contain control characters"))
        elif len(parts) > 2:
            causes.append(errors.field_invalid(at, user, "runAsUserName cannot contain more than one backslash"))
        else:
            domain, name = (parts[0], parts[1]) if len(parts) == 2 else ("", parts[0])
            if len(domain) >= 256:
                causes.append(errors.field_invalid(at, user, "runAsUserName's Domain length must be under 256 "
                                                             "characters"))
            if len(parts) == 2 and not (_NETBIOS_RE.match(domain) or _DNS_DOMAIN_RE.match(domain)):
                causes.append(errors.field_invalid(at, user, "runAsUserName's Domain doesn't match the NetBios nor "
                                                             "the DNS format"))
            if not name:
                causes.append(errors.field_invalid(at, user, "runAsUserName's User cannot be empty"))
            elif len(name) > 104:
                causes.append(errors.field_invalid(at, user, "runAsUserName's User length must not be longer than "
                                                             "104 characters"))
            if _DOTS_SPACES_RE.match(name):
                causes.append(errors.field_invalid(at, user, "runAsUserName's User cannot contain only periods or "
                                                             "spaces"))
            if _USER_CHARS_RE.search(name):
                causes.append(errors.field_invalid(at, user, "runAsUserName's User cannot contain the following "
                                                             'characters: "/\\:;|=,+*?<>@[]'))
    return causes


def _go_security_context(sc: dict) -> gorepr.GoRepr:
    """A container SecurityContext passed to field.Invalid: field.Error dereferences it and
    prints ``core.SecurityContext{...}``."""
    fields = (("Capabilities", "*core.Capabilities"), ("Privileged", "bool"),
              ("SELinuxOptions", "*core.SELinuxOptions"),
              ("WindowsOptions", "core.WindowsSecurityContextOptions"), ("RunAsUser", "int64"),
              ("RunAsGroup", "int64"), ("RunAsNonRoot", "bool"), ("ReadOnlyRootFilesystem", "bool"),
              ("AllowPrivilegeEscalation", "bool"), ("ProcMount", "core.ProcMountType"),
              ("SeccompProfile", "core.SeccompProfile"), ("AppArmorProfile", "core.AppArmorProfile"))
    rendered = []
    for name, type_name in fields:
        key = name[0].lower() + name[1:]
        if name == "SELinuxOptions":
            key = "seLinuxOptions"
        value = sc.get(key)
        if type_name.startswith("*"):
            rendered.append((name, gorepr.pointer(value, type_name[1:])))
        else:
            rendered.append((name, gorepr.pointer(value, type_name)))
    return gorepr.struct("core.SecurityContext", rendered)


def validate_security_context(sc: Any, path: str, host_users: bool) -> list[Cause]:
    """upstream's ValidateSecurityContext (a container's)."""
    if not isinstance(sc, dict):
        return []
    causes: list[Cause] = []
    for key, check in (("runAsUser", validation.is_valid_user_id), ("runAsGroup", validation.is_valid_group_id)):
        if sc.get(key) is not None:
            causes.extend(errors.field_invalid(f"{path}.{key}", sc[key], m) for m in check(sc[key]))
    proc_mount = sc.get("procMount")
    if proc_mount is not None:
        if proc_mount not in ("Default", "Unmasked"):
            causes.append(errors.field_not_supported(f"{path}.procMount", proc_mount, ["Default", "Unmasked"]))
        if host_users and proc_mount == "Unmasked":
            causes.append(errors.field_invalid(f"{path}.procMount", proc_mount,
                                               "`hostUsers` must be false to use `Unmasked`"))
    causes.extend(_validate_seccomp_profile(sc.get("seccompProfile"), f"{path}.seccompProfile"))
    if sc.get("allowPrivilegeEscalation") is False:
        if sc.get("privileged") is True:
            causes.append(errors.field_invalid(path, _go_security_context(sc), "cannot set `allowPrivilegeEscalation` "
                                               "to false and `privileged` to true"))
        for cap in as_list(as_dict(sc.get("capabilities")).get("add")):
            if cap == "CAP_SYS_ADMIN":
                causes.append(errors.field_invalid(path, _go_security_context(sc), "cannot set "
                                                   "`allowPrivilegeEscalation` to false and `capabilities.Add` "
                                                   "CAP_SYS_ADMIN"))
    causes.extend(_validate_windows_options(sc.get("windowsOptions"), f"{path}.windowsOptions"))
    causes.extend(_validate_apparmor_profile(sc.get("appArmorProfile"), f"{path}.appArmorProfile"))
    return causes


def _validate_container_common(c: dict, by_name: dict[str, dict], claims: set[str], path: str,
                               restart_policy: Any, host_users: bool, opts: PodOptions) -> list[Cause]:
    causes: list[Cause] = []
    name = as_str(c.get("name"))
    if not name:
        causes.append(errors.field_required(f"{path}.name"))
    else:
        causes.extend(errors.field_invalid(f"{path}.name", name, m) for m in validation.is_dns1123_label(name))
    if not c.get("image"):
        causes.append(errors.field_required(f"{path}.image"))
    causes.extend(_enum(c.get("terminationMessagePolicy"), f"{path}.terminationMessagePolicy",
                          TERMINATION_MESSAGE_POLICIES))
    causes.extend(_validate_ports(c.get("ports"), f"{path}.ports"))
    causes.extend(validate_env(c.get("env"), f"{path}.env"))
    causes.extend(validate_env_from(c.get("envFrom"), f"{path}.envFrom"))
    causes.extend(_validate_volume_mounts(c, by_name, f"{path}.volumeMounts"))
    causes.extend(_validate_volume_devices(c, by_name, f"{path}.volumeDevices"))
    causes.extend(_enum(c.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES))
    causes.extend(resources.validate_resource_requirements(
        c.get("resources"), f"{path}.resources", claims, allow_indivisible_hugepages=opts.allow_indivisible_hugepages))
    causes.extend(_validate_resize_policy(c.get("resizePolicy"), f"{path}.resizePolicy", restart_policy))
    causes.extend(validate_security_context(c.get("securityContext"), f"{path}.securityContext", host_users))
    return causes


def _host_port_conflicts(containers: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for ci, c in enumerate(containers):
        for pi, port in enumerate(as_list(as_dict(c).get("ports"))):
            port = as_dict(port)
            host_port = port.get("hostPort") or 0
            if not host_port:
                continue
            key = f"{port.get('protocol') or ''}/{port.get('hostIP') or ''}/{host_port}"
            if key in seen:
                causes.append(errors.field_duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return causes


_NOT_FOR_INIT = "may not be set for init containers without restartPolicy=Always"
EPHEMERAL_ALLOWED_FIELDS = {"name", "image", "command", "args", "workingDir", "envFrom", "env", "volumeMounts",
                            "volumeDevices", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
                            "securityContext", "stdin", "stdinOnce", "tty", "targetContainerName"}
# EphemeralContainerCommon's fields in declaration order (upstream reports them in this order)
_EPHEMERAL_FIELD_ORDER = ("name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
                          "resizePolicy", "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe",
                          "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
                          "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
                          "tty")


def _validate_containers(spec: dict, by_name: dict[str, dict], claims: set[str], grace: Any, path: str,
                         host_users: bool, opts: PodOptions) -> list[Cause]:
    containers = as_list(spec.get("containers"))
    if not containers:
        return [errors.field_required(path)]
    causes: list[Cause] = []
    names: set[str] = set()
    for i, c in enumerate(containers):
        c = as_dict(c)
        at = f"{path}[{i}]"
        causes.extend(_validate_container_common(c, by_name, claims, at, spec.get("restartPolicy"), host_users, opts))
        name = as_str(c.get("name"))
        if name in names:
            causes.append(errors.field_duplicate(f"{at}.name", name))
        names.add(name)
        if c.get("lifecycle") is not None:
            causes.extend(_validate_lifecycle(c["lifecycle"], grace, f"{at}.lifecycle"))
        causes.extend(_validate_probes(c, grace, at))
        if c.get("restartPolicy") is not None:
            causes.append(errors.field_forbidden(f"{at}.restartPolicy", "may not be set for non-init containers"))
    return causes + _host_port_conflicts(containers, path)


def _validate_init_containers(spec: dict, by_name: dict[str, dict], claims: set[str], grace: Any, path: str,
                              host_users: bool, opts: PodOptions) -> list[Cause]:
    causes: list[Cause] = []
    names = {as_str(as_dict(c).get("name")) for c in as_list(spec.get("containers"))}
    for i, c in enumerate(as_list(spec.get("initContainers"))):
        c = as_dict(c)
        at = f"{path}[{i}]"
        causes.extend(_validate_container_common(c, by_name, claims, at, spec.get("restartPolicy"), host_users, opts))
        restart = c.get("restartPolicy")
        if restart is not None and restart != "Always":
            causes.append(errors.field_not_supported(f"{at}.restartPolicy", restart, ["Always"]))
        name = as_str(c.get("name"))
        if name in names:
            causes.append(errors.field_duplicate(f"{at}.name", name))
        elif name:
            names.add(name)
        causes.extend(_host_port_conflicts([c], path))  # upstream checks each alone: always index 0
        if restart == "Always":
            if c.get("lifecycle") is not None:
                causes.extend(_validate_lifecycle(c["lifecycle"], grace, f"{at}.lifecycle"))
            causes.extend(_validate_probes(c, grace, at))
        else:
            for key in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if c.get(key) is not None:
                    causes.append(errors.field_forbidden(f"{at}.{key}", _NOT_FOR_INIT))
        if c.get("resizePolicy"):
            causes.append(errors.field_invalid(f"{at}.resizePolicy", _go_resize_policies(c["resizePolicy"]),
                                               "must not be set for init containers"))
    return causes


def _go_resize_policies(policies: Any) -> gorepr.GoRepr:
    return gorepr.GoRepr("[]core.ContainerResizePolicy{" + ", ".join(
        gorepr.struct("core.ContainerResizePolicy", (("ResourceName", gorepr.quote(as_dict(p).get("resourceName"))),
                                                     ("RestartPolicy", gorepr.quote(as_dict(p).get("restartPolicy")))))
        for p in as_list(policies)) + "}")


def _validate_ephemeral_containers(spec: dict, by_name: dict[str, dict], claims: set[str], path: str,
                                   host_users: bool, opts: PodOptions) -> list[Cause]:
    ephemeral = as_list(spec.get("ephemeralContainers"))
    if not ephemeral:
        return []
    causes: list[Cause] = []
    others = {as_str(as_dict(c).get("name"))
              for key in ("containers", "initContainers") for c in as_list(spec.get(key))}
    names = set(others)
    for i, c in enumerate(ephemeral):
        c = as_dict(c)
        at = f"{path}[{i}]"
        causes.extend(_validate_container_common(c, by_name, claims, at, spec.get("restartPolicy"), host_users, opts))
        causes.extend(_validate_container_only_for_pod(c, at))
        name = as_str(c.get("name"))
        if name in names:
            causes.append(errors.field_duplicate(f"{at}.name", name))
        else:
            names.add(name)
        target = as_str(c.get("targetContainerName"))
        if target and target not in others:
            causes.append(errors.field_not_found(f"{at}.targetContainerName", target))
        for key in _EPHEMERAL_FIELD_ORDER:
            if key not in EPHEMERAL_ALLOWED_FIELDS and c.get(key) not in (None, [], {}, "", False):
                causes.append(errors.field_forbidden(f"{at}.{key}", "cannot be set for an Ephemeral Container"))
        for j, mount in enumerate(as_list(c.get("volumeMounts"))):
            for key in ("subPath", "subPathExpr"):
                if as_dict(mount).get(key):
                    causes.append(errors.field_forbidden(f"{at}.volumeMounts[{j}].{key}",
                                                         "cannot be set for an Ephemeral Container"))
    return causes


def _validate_container_only_for_pod(c: dict, path: str) -> list[Cause]:
    image = as_str(c.get("image"))
    if image != image.strip():
        return [errors.field_invalid(f"{path}.image", image, "must not have leading or trailing whitespace")]
    return []


# ------------------------------------------------------------------ pod-level fields

_SYSCTL_SEGMENT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_SYSCTL_RE_TEXT = "^(" + _SYSCTL_SEGMENT + "[\\./])*" + _SYSCTL_SEGMENT + "$"
_SYSCTL_RE = re.compile(_SYSCTL_RE_TEXT)


def _normalize_sysctl(name: str) -> str:
    """A sysctl with '/' separators in its '.' form (upstream's NormalizeName)."""
    first_sep = re.search(r"[./]", name)
    if first_sep and first_sep.group() == "/":
        return name.translate(str.maketrans("./", "/."))
    return name


def _host_sysctl_problem(name: str, spec: dict) -> str:
    normalized = _normalize_sysctl(name)
    net = normalized.startswith("net.")
    ipc = normalized == "kernel.sem" or normalized.startswith(("kernel.shm", "kernel.msg", "fs.mqueue."))
    if spec.get("hostNetwork") is True and net:
        return "may not be specified when 'hostNetwork' is true"
    if spec.get("hostIPC") is True and ipc:
        return "may not be specified when 'hostIPC' is true"
    return ""


def _validate_sysctls(spec: dict, sysctls: list, path: str, opts: PodOptions) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, sysctl in enumerate(sysctls):
        name = as_str(as_dict(sysctl).get("name"))
        at = f"{path}[{i}].name"
        if not name:
            causes.append(errors.field_required(at))
        elif len(name) > 253 or not _SYSCTL_RE.match(name):
            causes.append(errors.field_invalid(at, name, f"must have at most 253 characters and match regex "
                                               f"{_SYSCTL_RE_TEXT}"))
        elif name in names:
            causes.append(errors.field_duplicate(at, name))
        if not opts.allow_namespaced_sysctls:
            problem = _host_sysctl_problem(name, spec)
            if problem:
                causes.append(errors.field_invalid(at, name, problem))
        names.add(name)
    return causes


def _validate_pod_security_context(spec: dict, path: str, opts: PodOptions) -> list[Cause]:
    sc = spec.get("securityContext")
    if not isinstance(sc, dict):
        return []
    causes: list[Cause] = []
    for key, check in (("fsGroup", validation.is_valid_group_id), ("runAsUser", validation.is_valid_user_id),
                       ("runAsGroup", validation.is_valid_group_id)):
        if sc.get(key) is not None:
            causes.extend(errors.field_invalid(f"{path}.{key}", sc[key], m) for m in check(sc[key]))
    for i, gid in enumerate(as_list(sc.get("supplementalGroups"))):
        causes.extend(errors.field_invalid(f"{path}.supplementalGroups[{i}]", gid, m)
                      for m in validation.is_valid_group_id(gid))
    if spec.get("shareProcessNamespace") is True and spec.get("hostPID") is True:
        causes.append(errors.field_invalid(f"{path}.shareProcessNamespace", True,
                                           "ShareProcessNamespace and HostPID cannot both be enabled"))
    if as_list(sc.get("sysctls")):
        causes.extend(_validate_sysctls(spec, sc["sysctls"], f"{path}.sysctls", opts))
    policy = sc.get("fsGroupChangePolicy")
    if policy is not None and policy not in ("Always", "OnRootMismatch"):
        causes.append(errors.field_not_supported(f"{path}.fsGroupChangePolicy", policy, ["Always", "OnRootMismatch"]))
    causes.extend(_validate_seccomp_profile(sc.get("seccompProfile"), f"{path}.seccompProfile"))
    causes.extend(_validate_windows_options(sc.get("windowsOptions"), f"{path}.windowsOptions"))
    causes.extend(_validate_apparmor_profile(sc.get("appArmorProfile"), f"{path}.appArmorProfile"))
    groups_policy = sc.get("supplementalGroupsPolicy")
    if groups_policy is not None and groups_policy not in ("Merge", "Strict"):
        causes.append(errors.field_not_supported(f"{path}.supplementalGroupsPolicy", groups_policy,
                                                 ["Merge", "Strict"]))
    selinux_policy = sc.get("seLinuxChangePolicy")
    if selinux_policy is not None and selinux_policy != "Recursive":
        causes.append(errors.field_not_supported(f"{path}.seLinuxChangePolicy", selinux_policy, ["Recursive"]))
    return causes


def _validate_dns_config(spec: dict, path: str) -> list[Cause]:
    config = spec.get("dnsConfig")
    if spec.get("dnsPolicy") == "None":
        if config is None:
            return [errors.field_required(path, "must provide `dnsConfig` when `dnsPolicy` is None")]
        if not as_list(as_dict(config).get("nameservers")):
            return [errors.field_required(f"{path}.nameservers",
                                          "must provide at least one DNS nameserver when `dnsPolicy` is None")]
    if not isinstance(config, dict):
        return []
    causes: list[Cause] = []
    servers = as_list(config.get("nameservers"))
    if len(servers) > 3:
        causes.append(errors.field_invalid(f"{path}.nameservers", gorepr.string_slice(servers),
                                           "must not have more than 3 nameservers"))
    for i, server in enumerate(servers):
        causes.extend(validation.is_valid_ip(f"{path}.nameservers[{i}]", server))
    searches = [as_str(s) for s in as_list(config.get("searches"))]
    if len(searches) > 32:
        causes.append(errors.field_invalid(f"{path}.searches", gorepr.string_slice(searches),
                                           "must not have more than 32 search paths"))
    if len(" ".join(searches)) > 2048:
        causes.append(errors.field_invalid(f"{path}.searches", gorepr.string_slice(searches),
                                           "must not have more than 2048 characters (including spaces) in the "
                                           "search list"))
    for i, search in enumerate(searches):
        search = search[:-1] if search.endswith(".") else search
        causes.extend(errors.field_invalid(f"{path}.searches[{i}]", search, m)
                      for m in validation.is_dns1123_subdomain(search))
    for i, option in enumerate(as_list(config.get("options"))):
        if not as_dict(option).get("name"):
            causes.append(errors.field_required(f"{path}.options[{i}]", "must not be empty"))
    return causes


def _validate_host_network_deps(spec: dict, path: str, opts: PodOptions) -> list[Cause]:
    if spec.get("hostNetwork") is not True:
        return []
    causes: list[Cause] = []
    for i, c in enumerate(as_list(spec.get("containers"))):
        for j, port in enumerate(as_list(as_dict(c).get("ports"))):
            port = as_dict(port)
            host_port, container_port = port.get("hostPort") or 0, port.get("containerPort") or 0
            if (opts.is_pod or host_port != 0) and host_port != container_port:
                causes.append(errors.field_invalid(f"{path}.containers[{i}].ports[{j}].hostPort", host_port,
                                                   "must match `containerPort` when `hostNetwork` is true"))
    return causes


def _validate_image_pull_secrets(secrets: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, ref in enumerate(as_list(secrets)):
        ref = as_dict(ref)
        if set(ref) - {"name"}:
            rendered = gorepr.struct("core.LocalObjectReference", (("Name", gorepr.quote(ref.get("name"))),))
            causes.append(errors.field_invalid(f"{path}[{i}]", rendered, "only name may be set"))
    return causes


def _validate_scheduling_gates(gates: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, gate in enumerate(as_list(gates)):
        name = as_str(as_dict(gate).get("name"))
        causes.extend(errors.field_invalid(f"{path}[{i}]", name, m) for m in validation.is_qualified_name(name))
        if name in seen:
            causes.append(errors.field_duplicate(f"{path}[{i}]", name))
        seen.add(name)
    return causes


def _validate_pod_resource_claims(spec: dict, path: str, pod_meta: Optional[dict]) -> list[Cause]:
    causes: list[Cause] = []
    names: set[str] = set()
    for i, claim in enumerate(as_list(spec.get("resourceClaims"))):
        if pod_meta is not None and MIRROR_POD_ANNOTATION in as_dict(pod_meta.get("annotations")):
            return [errors.field_forbidden("[]", "static pods do not support resource claims")]
        claim = as_dict(claim)
        at = f"{path}[{i}]"
        name = as_str(claim.get("name"))
        if not name:
            causes.append(errors.field_required(f"{at}.name"))
        elif name in names:
            causes.append(errors.field_duplicate(f"{at}.name", name))
        else:
            causes.extend(errors.field_invalid(f"{at}.name", name, m) for m in validation.is_dns1123_label(name))
            names.add(name)
        rendered = gorepr.struct("core.PodResourceClaim", (
            ("Name", gorepr.quote(name)),
            ("ResourceClaimName", gorepr.pointer(claim.get("resourceClaimName"), "string")),
            ("ResourceClaimTemplateName", gorepr.pointer(claim.get("resourceClaimTemplateName"), "string"))))
        has_name, has_template = claim.get("resourceClaimName") is not None, \
            claim.get("resourceClaimTemplateName") is not None
        if has_name and has_template:
            causes.append(errors.field_invalid(at, rendered, "at most one of `resourceClaimName` or "
                                                             "`resourceClaimTemplateName` may be specified"))
        if not has_name and not has_template:
            causes.append(errors.field_invalid(at, rendered, "must specify one of: `resourceClaimName`, "
                                                             "`resourceClaimTemplateName`"))
        for key in ("resourceClaimName", "resourceClaimTemplateName"):
            if claim.get(key) is not None:
                causes.extend(errors.field_invalid(f"{at}.{key}", claim[key], m)
                              for m in validation.is_dns1123_subdomain(as_str(claim[key])))
    return causes


def _host_process_problems(spec: dict, path: str) -> list[Cause]:
    pod_hp = as_dict(as_dict(spec.get("securityContext")).get("windowsOptions")).get("hostProcess")
    count = hp_count = 0
    causes: list[Cause] = []
    for key, i, c in all_containers(spec):
        count += 1
        c_hp = as_dict(as_dict(c.get("securityContext")).get("windowsOptions")).get("hostProcess")
        if pod_hp is not None and c_hp is not None and pod_hp != c_hp:
            causes.append(errors.field_invalid(f"{path}.{key}[{i}].securityContext.windowsOptions.hostProcess", c_hp,
                                               "pod hostProcess value must be identical if both are specified, was "
                                               f"{'true' if pod_hp else 'false'}"))
        if c_hp is True or (c_hp is None and pod_hp is True):
            hp_count += 1
    if hp_count:
        if hp_count != count:
            causes.append(errors.field_invalid(path, "", "If pod contains any hostProcess containers then all "
                                                         "containers must be HostProcess containers"))
        if spec.get("hostNetwork") is not True:
            causes.append(errors.field_invalid(f"{path}.hostNetwork", False,
                                               "hostNetwork must be true if pod contains any hostProcess containers"))
    return causes


def _validate_host_users(spec: dict, path: str) -> list[Cause]:
    if spec.get("hostUsers") is not False:
        return []
    causes = []
    for key, report in (("hostNetwork", "hostNetwork"), ("hostPID", "HostPID"), ("hostIPC", "HostIPC")):
        if spec.get(key) is True:
            causes.append(errors.field_forbidden(f"{path}.{report}", "when `pod.Spec.HostUsers` is false"))
    return causes


_WINDOWS_FORBIDDEN_POD = (("securityContext", "appArmorProfile"), ("securityContext", "seLinuxOptions"),
                          ("", "hostUsers"), ("", "hostPID"), ("", "hostIPC"), ("securityContext", "seccompProfile"),
                          ("securityContext", "fsGroup"), ("securityContext", "fsGroupChangePolicy"),
                          ("securityContext", "sysctls"), ("", "shareProcessNamespace"),
                          ("securityContext", "runAsUser"), ("securityContext", "runAsGroup"),
                          ("securityContext", "supplementalGroups"), ("securityContext", "supplementalGroupsPolicy"),
                          ("securityContext", "seLinuxChangePolicy"))
_WINDOWS_FORBIDDEN_CONTAINER = ("appArmorProfile", "seLinuxOptions", "seccompProfile", "capabilities",
                                "readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation", "procMount",
                                "runAsUser", "runAsGroup")


def _validate_os(spec: dict, path: str) -> list[Cause]:
    os_spec = spec.get("os")
    if not isinstance(os_spec, dict):
        return []
    name = as_str(os_spec.get("name"))
    if not name:
        return [errors.field_required(f"{path}.os.name", "cannot be empty")]
    if name not in ("linux", "windows"):
        return [errors.field_not_supported(f"{path}.os", name, ["linux", "windows"])]
    causes: list[Cause] = []
    sc = as_dict(spec.get("securityContext"))
    if name == "linux":
        if sc.get("windowsOptions") is not None:
            causes.append(errors.field_forbidden(f"{path}.securityContext.windowsOptions",
                                                 "windows options cannot be set for a linux pod"))
        for key, i, c in all_containers(spec):
            if as_dict(c.get("securityContext")).get("windowsOptions") is not None:
                causes.append(errors.field_forbidden(f"{path}.{key}[{i}].securityContext.windowsOptions",
                                                     "windows options cannot be set for a linux pod"))
        return causes
    for parent, key in _WINDOWS_FORBIDDEN_POD:
        if parent == "securityContext":
            if not isinstance(spec.get("securityContext"), dict):
                continue
            value = sc.get(key)
            set_ = bool(value) if key == "sysctls" else value is not None
            if set_:
                causes.append(errors.field_forbidden(f"{path}.securityContext.{key}",
                                                     "cannot be set for a windows pod"))
        else:
            value = spec.get(key)
            set_ = value is True if key in ("hostPID", "hostIPC") else value is not None
            if set_ and isinstance(spec.get("securityContext"), dict):
                causes.append(errors.field_forbidden(f"{path}.{key}", "cannot be set for a windows pod"))
    for ckey, i, c in all_containers(spec):
        csc = c.get("securityContext")
        if isinstance(csc, dict):
            for key in _WINDOWS_FORBIDDEN_CONTAINER:
                if csc.get(key) is not None:
                    causes.append(errors.field_forbidden(f"{path}.{ckey}[{i}].securityContext.{key}",
                                                         "cannot be set for a windows pod"))
    return causes


def validate_pod_spec(spec: Any, path: str, opts: Optional[PodOptions] = None,
                      pod_meta: Optional[dict] = None) -> list[Cause]:
    """upstream's ValidatePodSpec; ``path`` is e.g. ``spec`` or ``spec.template.spec``."""
    opts = opts or PodOptions()
    spec = as_dict(spec)
    causes: list[Cause] = []
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is None:
        causes.append(errors.field_required(f"{path}.terminationGracePeriodSeconds"))
    host_users = spec.get("hostUsers") is not False
    pod_name = as_str(as_dict(pod_meta).get("name")) if pod_meta is not None else ""
    by_name, volume_causes = volumes.validate_volumes(spec.get("volumes"), pod_name, f"{path}.volumes", opts.is_pod)
    causes += volume_causes
    claims = {as_str(as_dict(c).get("name")) for c in as_list(spec.get("resourceClaims")) if as_dict(c).get("name")}
    causes += _validate_pod_resource_claims(spec, f"{path}.resourceClaims", pod_meta)
    causes += _validate_containers(spec, by_name, claims, grace, f"{path}.containers", host_users, opts)
    causes += _validate_init_containers(spec, by_name, claims, grace, f"{path}.initContainers", host_users, opts)
    causes += _validate_ephemeral_containers(spec, by_name, claims, f"{path}.ephemeralContainers", host_users, opts)
    causes += _validate_host_network_deps(spec, path, opts)
    causes += _enum(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES)
    causes += _enum(spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES)
    causes += validation.validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    causes += _validate_pod_security_context(spec, f"{path}.securityContext", opts)
    causes += _validate_image_pull_secrets(spec.get("imagePullSecrets"), f"{path}.imagePullSecrets")
    causes += scheduling.validate_affinity(spec.get("affinity"), f"{path}.affinity",
                                           opts.allow_invalid_label_value_in_selector)
    causes += _validate_dns_config(spec, f"{path}.dnsConfig")
    for i, gate in enumerate(as_list(spec.get("readinessGates"))):
        condition = as_str(as_dict(gate).get("conditionType"))
        causes.extend(errors.field_invalid(f"{path}.readinessGates[{i}].conditionType", condition, m)
                      for m in validation.is_qualified_name(condition))
    causes += _validate_scheduling_gates(spec.get("schedulingGates"), f"{path}.schedulingGates")
    causes += scheduling.validate_topology_spread_constraints(spec.get("topologySpreadConstraints"),
                                                              f"{path}.topologySpreadConstraints",
                                                              opts.allow_invalid_topology_selector)
    causes += _host_process_problems(spec, path)
    causes += _validate_host_users(spec, path)
    for key in ("serviceAccountName", "nodeName"):
        value = as_str(spec.get(key))
        if value:
            causes.extend(errors.field_invalid(f"{path}.{key}", value, m)
                          for m in validation.is_dns1123_subdomain(value))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and validation.is_int(deadline) and not 1 <= deadline <= validation.MAX_INT32:
        causes.append(errors.field_invalid(f"{path}.activeDeadlineSeconds", deadline,
                                           validation.inclusive_range_error(1, validation.MAX_INT32)))
    for key in ("hostname", "subdomain"):
        value = as_str(spec.get(key))
        if value:
            causes.extend(errors.field_invalid(f"{path}.{key}", value, m) for m in validation.is_dns1123_label(value))
    if as_list(spec.get("tolerations")):
        causes += scheduling.validate_tolerations(spec["tolerations"], f"{path}.tolerations")
    for i, alias in enumerate(as_list(spec.get("hostAliases"))):
        alias = as_dict(alias)
        causes.extend(validation.is_valid_ip(f"{path}.hostAliases[{i}].ip", alias.get("ip") or ""))
        for j, host in enumerate(as_list(alias.get("hostnames"))):
            host = as_str(host)
            causes.extend(errors.field_invalid(f"{path}.hostAliases[{i}].hostnames[{j}]", host, m)
                          for m in validation.is_dns1123_subdomain(host))
    for key in ("priorityClassName", "runtimeClassName"):
        value = spec.get(key)
        if (key == "runtimeClassName" and value is not None) or (key == "priorityClassName" and value):
            causes.extend(errors.field_invalid(f"{path}.{key}", value, m)
                          for m in validation.is_dns1123_subdomain(as_str(value)))
    preemption = spec.get("preemptionPolicy")
    if preemption is not None:
        causes += _enum(preemption, f"{path}.preemptionPolicy", ["PreemptLowerPriority", "Never"])
    if spec.get("overhead") is not None:
        causes += resources.validate_resource_requirements({"limits": spec["overhead"]}, f"{path}.overhead",
                                                           allow_indivisible_hugepages=opts.allow_indivisible_hugepages)
    causes += _validate_os(spec, path)
    return causes


# ------------------------------------------------------------------ annotations

MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
TOLERATIONS_ANNOTATION = "scheduler.alpha.kubernetes.io/tolerations"
DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
APPARMOR_CONTAINER_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def _deletion_cost_problem(annotations: dict) -> bool:
    if DELETION_COST_ANNOTATION not in annotations:
        return False
    value = as_str(annotations[DELETION_COST_ANNOTATION])
    if not value or not (value[0] == "-" or value == "0" or "1" <= value[0] <= "9"):
        return True
    try:
        number = int(value, 10)
    except ValueError:
        return True
    return not -2 ** 31 <= number < 2 ** 31 or not re.fullmatch(r"-?[0-9]+", value)


def _seccomp_annotation_problems(value: str, path: str) -> list[Cause]:
    if value in ("runtime/default", "docker/default", "unconfined"):
        return []
    if value.startswith("localhost/"):
        return volumes.validate_local_descending_path(value[len("localhost/"):], path)
    return [errors.field_invalid(path, value, "must be a valid seccomp profile")]


def validate_pod_specific_annotations(annotations: Any, spec: Any, path: str, opts: PodOptions) -> list[Cause]:
    """upstream's ValidatePodSpecificAnnotations (``path`` is the annotations' path)."""
    annotations = as_dict(annotations)
    spec = as_dict(spec)
    causes: list[Cause] = []
    if MIRROR_POD_ANNOTATION in annotations and not spec.get("nodeName"):
        causes.append(errors.field_invalid(f"{path}[{MIRROR_POD_ANNOTATION}]", annotations[MIRROR_POD_ANNOTATION],
                                           "must set spec.nodeName if mirror pod annotation is set"))
    if annotations.get(TOLERATIONS_ANNOTATION):
        import json
        try:
            tolerations = json.loads(annotations[TOLERATIONS_ANNOTATION])
            if not isinstance(tolerations, list):
                raise ValueError("json: cannot unmarshal into Go value of type []v1.Toleration")
        except ValueError as e:
            causes.append(errors.field_invalid(path, TOLERATIONS_ANNOTATION, str(e)))
        else:
            causes.extend(scheduling.validate_tolerations(tolerations, f"{path}.{TOLERATIONS_ANNOTATION}"))
    if not opts.allow_invalid_deletion_cost and _deletion_cost_problem(annotations):
        causes.append(errors.field_invalid(f"{path}[{DELETION_COST_ANNOTATION}]",
                                           annotations[DELETION_COST_ANNOTATION], "must be a 32bit integer"))
    if SECCOMP_POD_ANNOTATION in annotations:
        causes.extend(_seccomp_annotation_problems(as_str(annotations[SECCOMP_POD_ANNOTATION]),
                                                   f"{path}.{SECCOMP_POD_ANNOTATION}"))
    for key, value in annotations.items():
        if key.startswith(SECCOMP_CONTAINER_PREFIX):
            causes.extend(_seccomp_annotation_problems(as_str(value), f"{path}.{key}"))
    names = {as_str(c.get("name")) for _, _, c in all_containers(spec)}
    for key, value in annotations.items():
        if not key.startswith(APPARMOR_CONTAINER_PREFIX):
            continue
        container = key[len(APPARMOR_CONTAINER_PREFIX):]
        if container not in names:
            causes.append(errors.field_invalid(f"{path}[{key}]", container, "container not found"))
        value = as_str(value)
        if value not in ("", "runtime/default", "unconfined") and not value.startswith("localhost/"):
            causes.append(errors.field_invalid(f"{path}[{key}]", value,
                                               f"invalid AppArmor profile name: {gorepr.quote(value)}"))
    return causes


def validate_profiles_match_annotations(meta: Any, spec: Any, path: str) -> list[Cause]:
    """Seccomp and AppArmor fields must agree with the deprecated annotations when both are set."""
    annotations = as_dict(as_dict(meta).get("annotations"))
    spec = as_dict(spec)
    causes: list[Cause] = []
    sc = as_dict(spec.get("securityContext"))
    if sc.get("seccompProfile") is not None and SECCOMP_POD_ANNOTATION in annotations:
        causes.extend(_seccomp_match(as_str(annotations[SECCOMP_POD_ANNOTATION]), as_dict(sc["seccompProfile"]),
                                     f"{path}.securityContext.seccompProfile"))
    for key, i, c in all_containers(spec):
        profile = as_dict(c.get("securityContext")).get("seccompProfile")
        annotation = annotations.get(SECCOMP_CONTAINER_PREFIX + as_str(c.get("name")))
        if profile is not None and annotation is not None:
            causes.extend(_seccomp_match(as_str(annotation), as_dict(profile),
                                         f"{path}.{key}[{i}].securityContext.seccompProfile"))
    if as_dict(spec.get("os")).get("name") == "windows":
        return causes
    pod_profile = sc.get("appArmorProfile")
    for key, i, c in all_containers(spec):
        profile = as_dict(c.get("securityContext")).get("appArmorProfile") or pod_profile
        annotation = annotations.get(APPARMOR_CONTAINER_PREFIX + as_str(c.get("name")))
        if not isinstance(profile, dict) or annotation is None:
            continue
        at = f"{path}.{key}[{i}].securityContext.appArmorProfile"
        kind = profile.get("type")
        if kind == "Unconfined" and annotation != "unconfined" or \
                kind == "RuntimeDefault" and annotation != "runtime/default" or \
                kind == "Localhost" and not as_str(annotation).startswith("localhost/"):
            causes.append(errors.field_forbidden(f"{at}.type", "apparmor type in annotation and field must match"))
        elif kind == "Localhost" and as_str(annotation)[len("localhost/"):] != profile.get("localhostProfile"):
            causes.append(errors.field_forbidden(f"{at}.localhostProfile",
                                                 "apparmor profile in annotation and field must match"))
    return causes


def _seccomp_match(annotation: str, profile: dict, path: str) -> list[Cause]:
    kind = profile.get("type")
    if kind == "Unconfined" and annotation != "unconfined":
        return [errors.field_forbidden(f"{path}.type", "seccomp type in annotation and field must match")]
    if kind == "RuntimeDefault" and annotation not in ("runtime/default", "docker/default"):
        return [errors.field_forbidden(f"{path}.type", "seccomp type in annotation and field must match")]
    if kind == "Localhost":
        if not annotation.startswith("localhost/"):
            return [errors.field_forbidden(f"{path}.type", "seccomp type in annotation and field must match")]
        if annotation[len("localhost/"):] != profile.get("localhostProfile"):
            return [errors.field_forbidden(f"{path}.localhostProfile",
                                           "seccomp profile in annotation and field must match")]
    return []


# ------------------------------------------------------------------ templates

def validate_pod_template_spec(template: Any, path: str, opts: Optional[PodOptions] = None) -> list[Cause]:
    """upstream's ValidatePodTemplateSpec: labels and annotations (reported at ``<path>.labels``), the spec,
    and no ephemeral containers."""
    opts = opts or PodOptions()
    template = as_dict(template)
    md = as_dict(template.get("metadata"))
    spec = as_dict(template.get("spec"))
    causes = validation.validate_labels(md.get("labels"), f"{path}.labels")
    causes += validation.validate_annotations(md.get("annotations"), f"{path}.annotations")
    causes += validate_pod_specific_annotations(md.get("annotations"), spec, f"{path}.annotations", opts)
    causes += validate_pod_spec(spec, f"{path}.spec", opts)
    causes += validate_profiles_match_annotations(md, spec, f"{path}.spec")
    if as_list(spec.get("ephemeralContainers")):
        causes.append(errors.field_forbidden(f"{path}.spec.ephemeralContainers",
                                             "ephemeral containers not allowed in pod template"))
    return causes


def template_options(template: Any, old_template: Any = None) -> PodOptions:
    """upstream's GetValidationOptionsFromPodTemplate."""
    old = as_dict(old_template)
    return pod_options(as_dict(template).get("spec"), old.get("spec") if old_template is not None else None,
                       old.get("metadata") if old_template is not None else None)
