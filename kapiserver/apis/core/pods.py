"""Pods (core/v1): pod-spec defaults and checks, the spec's update rules, and
the printer columns kubectl shows.

Nothing runs a pod here (the envtest contract): a new pod's status is what
upstream's strategy gives it, ``phase: Pending`` and its QoS class, and stays so
until a client writes ``/status``.  What upstream's default admission plugins
add on create (the service account and its token volume, ``priority``, the two
300 s NoExecute tolerations) is theirs: the ServiceAccount, Priority and
DefaultTolerationSeconds plugins add it, as upstream, when they are enabled.
"""
from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Optional

from kapiserver.apis import columns, field_checks
from kapiserver.apis.core import bindings, ephemeral_containers, evictions, node_connections, scheduling
from kapiserver.machinery import errors, gorepr, quantity, validation
from kapiserver.machinery.fields import FieldLabelConversion
from kapiserver.machinery.jsonvalues import as_dict
from kapiserver.registry.resource_type import ResourceType, Strategy

if TYPE_CHECKING:
    from kapiserver.apis.core import podspec

SCHEMA = "io.k8s.api.core.v1.Pod"
SPEC = "io.k8s.api.core.v1.PodSpec"
STATUS = "io.k8s.api.core.v1.PodStatus"
UPDATE_FORBIDDEN = ("pod updates may not change fields other than `spec.containers[*].image`,"
                    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                    "(allow it to be set to 1 if it was previously negative)")
_QOS_RESOURCES = ("cpu", "memory")


def qos_class(spec: dict) -> str:
    """upstream's GetPodQOS over init and regular containers (cpu and memory only)."""
    from kapiserver.apis.core import podspec  # the pod validation loads with the first use
    requested = limited = False
    guaranteed = True
    for key, _, c in podspec.all_containers(spec):
        if key == "ephemeralContainers":
            continue
        res = c.get("resources") or {}
        req = {k: v for k, v in (res.get("requests") or {}).items() if k in _QOS_RESOURCES}
        lim = {k: v for k, v in (res.get("limits") or {}).items() if k in _QOS_RESOURCES}
        requested |= bool(req)
        limited |= bool(lim)
        if set(lim) != set(_QOS_RESOURCES) or any(
                quantity.parse(req.get(k, lim[k])) != quantity.parse(lim[k]) for k in lim):
            guaranteed = False
    if not requested and not limited:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_requests_from_limits(spec: dict) -> None:
    """SetDefaults_Pod: a limit without a request makes the request equal to it."""
    from kapiserver.apis.core import podspec
    for key, _, c in podspec.all_containers(spec):
        if key == "ephemeralContainers":
            continue
        res = c.get("resources")
        if isinstance(res, dict) and isinstance(res.get("limits"), dict) and res["limits"]:
            requests = res.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in res["limits"].items():
                    requests.setdefault(name, value)


def _alias_service_account(spec: dict) -> None:
    """The deprecated ``serviceAccount`` alias of ``serviceAccountName``, as v1 conversion sets it."""
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]


class PodStrategy(Strategy):
    status_fixed_metadata = ("ownerReferences",)  # upstream's podStatusStrategy

    def graceful_delete_period(self, obj: dict, requested: Optional[int]) -> Optional[int]:
        """upstream's podStrategy.CheckGracefulDelete: the requested period, else the pod's
        terminationGracePeriodSeconds (else 0); 0 for a pod no node runs or that has ended."""
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        period = requested
        if period is None:
            default = spec.get("terminationGracePeriodSeconds")
            period = default if isinstance(default, int) and not isinstance(default, bool) else 0
        if not spec.get("nodeName") or status.get("phase") in ("Failed", "Succeeded"):
            period = 0
        return period

    def prepare_for_status_update(self, rtype: ResourceType, new: dict, old: dict) -> None:
        super().prepare_for_status_update(rtype, new, old)
        status = new.get("status")
        old_qos = (old.get("status") or {}).get("qosClass")
        if isinstance(status, dict) and not status.get("qosClass") and old_qos:
            status["qosClass"] = old_qos  # old kubelets drop it; upstream fills it back

    def prepare_for_subresource_update(self, rtype: ResourceType, subresource: str, new: dict, old: dict) -> None:
        if subresource == ephemeral_containers.SUBRESOURCE:
            ephemeral_containers.keep_only_ephemeral_containers(new, old)
        elif subresource != bindings.SUBRESOURCE:  # a binding's change is made by the binding itself
            super().prepare_for_subresource_update(rtype, subresource, new, old)

    def validate_subresource_update(self, rtype: ResourceType, subresource: str, new: dict,
                                    old: dict) -> list[errors.Cause]:
        if subresource == ephemeral_containers.SUBRESOURCE:
            return validate_ephemeral_containers_update(new, old)
        if subresource == bindings.SUBRESOURCE:
            return []  # upstream's BindingREST writes the pod without pod validation
        return super().validate_subresource_update(rtype, subresource, new, old)

    def prepare_for_create(self, rtype: ResourceType, obj: dict) -> None:
        """upstream's PrepareForCreate: the status of a pod no node runs yet, its QoS class from
        the requests and limits admission (LimitRanger) left; and the service account the
        ServiceAccount plugin chose, under its deprecated alias too (upstream's v1 encoding)."""
        super().prepare_for_create(rtype, obj)
        spec = as_dict(obj.get("spec"))
        _alias_service_account(spec)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}

    def default(self, rtype: ResourceType, obj: dict) -> None:
        from kapiserver.apis.core import podspec
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        podspec.default_pod_spec(spec)
        _default_requests_from_limits(spec)
        spec.setdefault("enableServiceLinks", True)
        if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
            spec["serviceAccountName"] = spec["serviceAccount"]  # v1 conversion: the alias when it is alone
        _alias_service_account(spec)

    def validate(self, rtype: ResourceType, obj: dict) -> list[errors.Cause]:
        """upstream's ValidatePodCreate."""
        from kapiserver.apis.core import podspec
        spec = as_dict(obj.get("spec"))
        causes = _metadata_and_spec(obj, podspec.pod_options(spec, is_pod=True))
        if spec.get("ephemeralContainers"):
            causes.append(errors.field_forbidden("spec.ephemeralContainers", "cannot be set on create"))
        if spec.get("nodeName") and spec.get("schedulingGates"):
            causes.append(errors.field_forbidden("spec.nodeName",
                                                 "cannot be set until all schedulingGates have been cleared"))
        return causes + podspec.validate_profiles_match_annotations(obj.get("metadata"), spec, "spec")

    def validate_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePodUpdate."""
        from kapiserver.apis.core import podspec
        new_spec = as_dict(new.get("spec"))
        old_spec = as_dict(old.get("spec"))
        opts = podspec.pod_options(new_spec, old_spec, old.get("metadata"), is_pod=True)
        causes = _metadata_and_spec(new, opts)
        causes += _annotation_updates(new, old)
        for key in ("containers", "initContainers"):
            found, stop = _container_updates(new_spec.get(key), old_spec.get(key), f"spec.{key}")
            causes += found
            if stop:
                return causes
        deadline, old_deadline = new_spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
        if deadline is not None:
            if isinstance(deadline, int) and not 0 <= deadline <= validation.MAX_INT32:
                return causes + [errors.field_invalid("spec.activeDeadlineSeconds", deadline,
                                                      validation.inclusive_range_error(0, validation.MAX_INT32))]
            if isinstance(old_deadline, int) and isinstance(deadline, int) and old_deadline < deadline:
                return causes + [errors.field_invalid("spec.activeDeadlineSeconds", deadline,
                                                      "must be less than or equal to previous value")]
        elif old_deadline is not None:
            causes.append(errors.field_invalid("spec.activeDeadlineSeconds", None,
                                               "must not update from a positive integer to nil value"))
        causes += _only_added_tolerations(new_spec.get("tolerations"), old_spec.get("tolerations"))
        causes += _only_deleted_gates(new_spec.get("schedulingGates"), old_spec.get("schedulingGates"))
        if new_spec != old_spec:
            causes += _spec_mutations(new_spec, old_spec)
        return causes

    def validate_status_update(self, rtype: ResourceType, new: dict, old: dict) -> list[errors.Cause]:
        """upstream's ValidatePodStatusUpdate."""
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        status, old_status = new.get("status") or {}, old.get("status") or {}
        causes = _annotation_updates(new, old)
        for i, condition in enumerate(status.get("conditions") or ()):
            kind = (condition or {}).get("type") or "" if isinstance(condition, dict) else ""
            if kind not in ("PodScheduled", "Ready", "Initialized"):
                causes.extend(errors.field_invalid(f"metadata.conditions[{i}].Type", kind, m)
                              for m in validation.is_qualified_name(kind))
        if new_spec.get("nodeName") != old_spec.get("nodeName"):
            causes.append(errors.field_forbidden("status.nodeName", "may not be changed directly"))
        nominated = status.get("nominatedNodeName") or ""
        if nominated and nominated != (old_status.get("nominatedNodeName") or ""):
            causes.extend(errors.field_invalid("status.nominatedNodeName", nominated, m)
                          for m in validation.is_dns1123_subdomain(nominated))
        causes += field_checks.immutable(status.get("qosClass") or "", old_status.get("qosClass") or "",
                                         "status.qosClass")
        policy = old_spec.get("restartPolicy")
        causes += _state_transitions(status.get("containerStatuses"), old_status.get("containerStatuses"),
                                     "status.containerStatuses", policy)
        causes += _state_transitions(status.get("initContainerStatuses"), old_status.get("initContainerStatuses"),
                                     "status.initContainerStatuses", policy, old_spec.get("initContainers"))
        causes += _state_transitions(status.get("ephemeralContainerStatuses"),
                                     old_status.get("ephemeralContainerStatuses"),
                                     "status.ephemeralContainerStatuses", "Never")
        causes += _validate_ips(status.get("podIPs"), "status.podIPs")
        host_ips = status.get("hostIPs") or []
        if host_ips:
            first = (host_ips[0] or {}).get("ip") if isinstance(host_ips[0], dict) else None
            if (status.get("hostIP") or "") != (first or ""):
                causes.append(errors.field_invalid("status.hostIPs[0].ip", first or "", "must be equal to `hostIP`"))
            causes += _validate_ips(host_ips, "status.hostIPs")
        return causes


def validate_ephemeral_containers_update(new: dict, old: dict) -> list[errors.Cause]:
    """upstream's ValidatePodEphemeralContainersUpdate (``pods/{name}/ephemeralcontainers``): the pod is
    valid, and ephemeral containers are only added (static pods have none)."""
    from kapiserver.apis.core import podspec
    new_spec = as_dict(new.get("spec"))
    old_spec = as_dict(old.get("spec"))
    opts = podspec.pod_options(new_spec, old_spec, old.get("metadata"), is_pod=True)
    causes = _metadata_and_spec(new, opts) + _annotation_updates(new, old)
    if podspec.MIRROR_POD_ANNOTATION in ((old.get("metadata") or {}).get("annotations") or {}):
        return [errors.field_forbidden("", "static pods do not support ephemeral containers")]
    path = "spec.ephemeralContainers"
    by_name = {c.get("name"): c for c in new_spec.get("ephemeralContainers") or () if isinstance(c, dict)}
    for existing in old_spec.get("ephemeralContainers") or ():
        name = (existing or {}).get("name")
        if name not in by_name:
            causes.append(errors.field_forbidden(path, f"existing ephemeral containers {gorepr.quote(name)} may not "
                                                       f"be removed\n"))
        elif by_name[name] != existing:
            diff = field_checks.spec_diff(existing, by_name[name], "core.EphemeralContainer")
            causes.append(errors.field_forbidden(path, f"existing ephemeral containers {gorepr.quote(name)} may not "
                                                       f"be changed\n{diff}"))
    return causes


def _metadata_and_spec(pod: dict, opts: podspec.PodOptions) -> list[errors.Cause]:
    """upstream's validatePodMetadataAndSpec, less the generic metadata checks the Store runs."""
    from kapiserver.apis.core import podspec
    md = as_dict(pod.get("metadata"))
    spec = as_dict(pod.get("spec"))
    causes = field_checks.kube_object_meta(pod)
    causes += podspec.validate_pod_specific_annotations(md.get("annotations"), spec, "metadata.annotations", opts)
    causes += podspec.validate_pod_spec(spec, "spec", opts, pod_meta=md)
    if not spec.get("serviceAccountName"):
        for vi, volume in enumerate(spec.get("volumes") or ()):
            for si, source in enumerate(((volume or {}).get("projected") or {}).get("sources") or ()):
                if isinstance(source, dict) and source.get("serviceAccountToken") is not None:
                    causes.append(errors.field_forbidden(
                        f"spec.volumes[{vi}].projected.sources[{si}].serviceAccountToken",
                        "must not be specified when serviceAccountName is not set"))
    for key in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(key) or ()):
            image = (c or {}).get("image") if isinstance(c, dict) else None
            if isinstance(image, str) and image != image.strip():
                causes.append(errors.field_invalid(f"spec.{key}[{i}].image", image,
                                                   "must not have leading or trailing whitespace"))
    return causes


def _annotation_updates(new: dict, old: dict) -> list[errors.Cause]:
    """upstream's ValidatePodSpecificAnnotationUpdates (AppArmor and mirror annotations are fixed)."""
    from kapiserver.apis.core import podspec
    annotations = (new.get("metadata") or {}).get("annotations") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    causes = []
    for key, value in old_annotations.items():
        if key in annotations and annotations[key] == value:
            continue
        if key.startswith(podspec.APPARMOR_CONTAINER_PREFIX):
            causes.append(errors.field_forbidden(f"metadata.annotations[{key}]",
                                                 "may not remove or update AppArmor annotations"))
        if key == podspec.MIRROR_POD_ANNOTATION:
            causes.append(errors.field_forbidden(f"metadata.annotations[{key}]",
                                                 "may not remove or update mirror pod annotation"))
    for key in annotations:
        if key in old_annotations:
            continue
        if key.startswith(podspec.APPARMOR_CONTAINER_PREFIX):
            causes.append(errors.field_forbidden(f"metadata.annotations[{key}]", "may not add AppArmor annotations"))
        if key == podspec.MIRROR_POD_ANNOTATION:
            causes.append(errors.field_forbidden(f"metadata.annotations[{key}]", "may not add mirror pod annotation"))
    return causes


def _container_updates(new: Any, old: Any, path: str) -> tuple[list[errors.Cause], bool]:
    new, old = new or [], old or []
    if len(new) != len(old):
        return [errors.field_forbidden(path, "pod updates may not add or remove containers")], True
    causes = []
    for i, c in enumerate(new):
        image = (c or {}).get("image") if isinstance(c, dict) else None
        if not image:
            causes.append(errors.field_required(f"{path}[{i}].image"))
        elif isinstance(image, str) and image.strip() != image:
            causes.append(errors.field_invalid(f"{path}[{i}].image", image,
                                               "must not have leading or trailing whitespace"))
    return causes, False


def _only_added_tolerations(new: Any, old: Any) -> list[errors.Cause]:
    new, old = new or [], old or []
    for toleration in old:
        base = {k: v for k, v in (toleration or {}).items() if k != "tolerationSeconds"}
        if not any(isinstance(t, dict) and {k: v for k, v in t.items() if k != "tolerationSeconds"} == base
                   for t in new):
            return [errors.field_forbidden("spec.tolerations",
                                           "existing toleration can not be modified except its tolerationSeconds")]
    return scheduling.validate_tolerations(new, "spec.tolerations")


def _only_deleted_gates(new: Any, old: Any) -> list[errors.Cause]:
    old_names = {(g or {}).get("name") for g in old or () if isinstance(g, dict)}
    return [errors.field_forbidden(f"spec.schedulingGates[{i}].name",
                                   f"only deletion is allowed, but found new scheduling gate '{g.get('name')}'")
            for i, g in enumerate(new or ()) if isinstance(g, dict) and g.get("name") not in old_names]


def _spec_mutations(new: dict, old: dict) -> list[errors.Cause]:
    """The pod spec equals the old one once the fields an update may change are put back."""
    munged = copy.deepcopy(new)
    for key in ("containers", "initContainers"):
        for c, old_c in zip(munged.get(key) or (), old.get(key) or ()):
            if isinstance(c, dict) and isinstance(old_c, dict):
                if "image" in old_c:
                    c["image"] = old_c["image"]
                else:
                    c.pop("image", None)
    for key in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if key in old:
            munged[key] = copy.deepcopy(old[key])
        else:
            munged.pop(key, None)
    old_grace = old.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and munged.get("terminationGracePeriodSeconds") == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    causes = []
    if old.get("schedulingGates"):
        causes += _gated_pod_mutations(munged, old)
    if munged != old:
        diff = field_checks.spec_diff(old, munged, "core.PodSpec")
        causes.append(errors.field_forbidden("spec", UPDATE_FORBIDDEN + "\n" + diff))
    return causes


def _gated_pod_mutations(munged: dict, old: dict) -> list[errors.Cause]:
    """A pod still gated may gain node selector entries and narrower node affinity (upstream's rules)."""
    causes = []
    selector, old_selector = munged.get("nodeSelector") or {}, old.get("nodeSelector") or {}
    if selector != old_selector:
        for key, value in old_selector.items():
            if selector.get(key) != value:
                causes.append(errors.field_invalid("spec.nodeSelector", gorepr.string_map(selector),
                                                   "only additions to spec.nodeSelector are allowed (no mutations "
                                                   "or deletions)"))
                break
        if "nodeSelector" in old:
            munged["nodeSelector"] = copy.deepcopy(old["nodeSelector"])
        else:
            munged.pop("nodeSelector", None)
    return causes


def _state_transitions(new: Any, old: Any, path: str, restart_policy: Any,
                       init_containers: Any = None) -> list[errors.Cause]:
    if restart_policy == "Always":
        return []
    restartable = {(c or {}).get("name") for c in init_containers or ()
                   if isinstance(c, dict) and c.get("restartPolicy") == "Always"}
    causes = []
    for i, status in enumerate(old or ()):
        status = status if isinstance(status, dict) else {}
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is None:
            continue
        if (terminated or {}).get("exitCode", 0) != 0 and restart_policy == "OnFailure":
            continue
        if status.get("name") in restartable:
            continue
        for new_status in new or ():
            if isinstance(new_status, dict) and new_status.get("name") == status.get("name") and \
                    (new_status.get("state") or {}).get("terminated") is None:
                causes.append(errors.field_forbidden(f"{path}[{i}].state",
                                                     "may not be transitioned to non-terminated state"))
    return causes


def _go_ip(entry: Any, type_name: str) -> gorepr.GoRepr:
    return gorepr.struct(type_name, (("IP", gorepr.quote((entry or {}).get("ip"))),))


def _validate_ips(entries: Any, path: str) -> list[errors.Cause]:
    """status.podIPs / status.hostIPs: valid, at most one per family, no duplicates."""
    entries = [e if isinstance(e, dict) else {} for e in entries or ()]
    causes = []
    for i, entry in enumerate(entries):
        causes += validation.is_valid_ip(f"{path}[{i}]", entry.get("ip") or "")
    if len(entries) > 1:
        ips = [e.get("ip") or "" for e in entries]
        type_name = "core.PodIP" if path.endswith("podIPs") else "core.HostIP"
        if not validation.is_dual_stack(ips) or len(ips) > 2:
            rendered = gorepr.GoRepr(f"[]{type_name}{{" + ", ".join(_go_ip(e, type_name) for e in entries) + "}")
            causes.append(errors.field_invalid(path, rendered, "may specify no more than one IP for each IP family"))
        seen: set = set()
        for i, entry in enumerate(entries):
            if entry.get("ip") in seen:
                causes.append(errors.field_duplicate(f"{path}[{i}]", _go_ip(entry, type_name)))
            seen.add(entry.get("ip"))
    return causes


# ------------------------------------------------------------------ printer

def _status_reason(pod: dict) -> tuple[str, int, int, int]:
    """(STATUS, ready containers, total containers, restarts) as upstream's pod printer computes them."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or ())
    ready = restarts = 0
    reason = status.get("reason") or status.get("phase") or ""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = spec.get("initContainers") or ()
    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or ()):
        restarts += cs.get("restartCount") or 0
        state = cs.get("state") or {}
        term, wait = state.get("terminated"), state.get("waiting")
        if term and term.get("exitCode") == 0:
            continue
        if term:
            reason = "Init:" + (term.get("reason") or (f"Signal:{term['signal']}" if term.get("signal")
                                                       else f"ExitCode:{term.get('exitCode', 0)}"))
        elif wait and wait.get("reason") and wait.get("reason") != "PodInitializing":
            reason = "Init:" + wait["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or ()):
            restarts += cs.get("restartCount") or 0
            state = cs.get("state") or {}
            wait, term = state.get("waiting"), state.get("terminated")
            if wait and wait.get("reason"):
                reason = wait["reason"]
            elif term and term.get("reason"):
                reason = term["reason"]
            elif term:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode', 0)}"
            elif "running" in state and cs.get("ready"):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running"
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason, ready, total, restarts


def _readiness_gates(pod: dict) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    true = {c.get("type") for c in (pod.get("status") or {}).get("conditions") or () if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _or_none(value: Any) -> str:
    return value if value else "<none>"


def _pod_ip(pod: dict) -> str:
    """The internal object's first ``status.podIPs`` entry: v1's ``podIP`` when set (it wins
    over ``podIPs`` in upstream's conversion), else the first of ``podIPs``."""
    status = pod.get("status") or {}
    if status.get("podIP"):
        return str(status["podIP"])
    ips = status.get("podIPs") or ()
    return str((ips[0] or {}).get("ip") or "") if ips and isinstance(ips[0], dict) else ""


def _service_account_name(pod: dict) -> str:
    """``serviceAccountName``, or the deprecated ``serviceAccount`` alias when it is empty (conversion)."""
    spec = pod.get("spec") or {}
    return str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "")


# Upstream's ToSelectableFields (pkg/registry/core/pod/strategy.go): status.podIPs is accepted by
# the label conversion below but is not in the field set, so it always has the value "".
SELECTABLE_FIELDS = {
    "spec.nodeName": columns.text_at("spec", "nodeName"),
    "spec.restartPolicy": columns.text_at("spec", "restartPolicy"),
    "spec.schedulerName": columns.text_at("spec", "schedulerName"),
    "spec.serviceAccountName": _service_account_name,
    "spec.hostNetwork": lambda o: "true" if columns.get_path(o, "spec", "hostNetwork") is True else "false",
    "status.phase": columns.text_at("status", "phase"),
    "status.podIP": _pod_ip,
    "status.nominatedNodeName": columns.text_at("status", "nominatedNodeName"),
}
# pkg/apis/core/v1/conversion.go; spec.host is what old v1 clients called spec.nodeName
FIELD_LABELS = FieldLabelConversion(
    ("metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
     "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
     "status.nominatedNodeName"),
    renamed={"spec.host": "spec.nodeName"})


def resource_type() -> ResourceType:
    return ResourceType(
        group="", version="v1", kind="Pod", plural="pods", singular="pod", namespaced=True,
        strategy=PodStrategy(), short_names=("po",), categories=("all",), has_status=True,
        schema_name=SCHEMA, return_deleted_object=True,
        extra_subresources=(bindings.binding_subresource(), ephemeral_containers.ephemeral_containers_subresource(),
                            evictions.eviction_subresource(), *node_connections.pod_subresources()),
        table_columns=(
            columns.name_column(),
            columns.column("Ready", lambda o: "{1}/{2}".format(*_status_reason(o)), desc=(
                "The aggregate readiness state of this pod for accepting traffic.")),
            columns.column("Status", lambda o: _status_reason(o)[0], desc=(
                "The aggregate status of the containers in this pod.")),
            columns.column("Restarts", lambda o: str(_status_reason(o)[3]), desc=(
                "The number of times the containers in this pod have been restarted and when the last "
                "container in this pod has restarted.")),
            columns.age_column(),
            columns.column("IP", lambda o: _or_none(columns.get_path(o, "status", "podIP")), STATUS, "podIP",
                           priority=1),
            columns.column("Node", lambda o: _or_none(columns.get_path(o, "spec", "nodeName")), SPEC, "nodeName",
                           priority=1),
            columns.column("Nominated Node", lambda o: _or_none(columns.get_path(o, "status", "nominatedNodeName")),
                           STATUS, "nominatedNodeName", priority=1),
            columns.column("Readiness Gates", _readiness_gates, SPEC, "readinessGates", priority=1),
        ),
        selectable_fields=dict(SELECTABLE_FIELDS), field_labels=FIELD_LABELS, indexed_fields=("spec.nodeName",),
    )
