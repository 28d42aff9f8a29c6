"""The Pod Security Standards as checks (upstream's k8s.io/pod-security-admission/policy).

Each check looks at one pod (its metadata and spec, as plain dicts) and
answers ``None`` when the pod passes or a :class:`Violation` with upstream's
reason and detail.  A check has one or more versions: the policy version a
namespace asks for (``v1.N`` or ``latest``) picks the newest version of each
check that is not newer than it.  Baseline checks run for the baseline and
restricted levels; a restricted check may replace a baseline one (its
``overrides``).  Results come in upstream's order: the baseline checks by ID,
then the restricted checks by ID, which is the order of the reasons in the
error message users see.
"""
from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Optional

from kapiserver.admission.pod_security.levels import (APPARMOR_ANNOTATION_PREFIX, BASELINE, PRIVILEGED, RESTRICTED,
                                                       SECCOMP_CONTAINER_ANNOTATION_PREFIX, SECCOMP_POD_ANNOTATION)

LATEST_MINOR = 32  # the policy version "latest" means: the Kubernetes version kapiserver serves


class Violation(NamedTuple):
    reason: str
    detail: str = ""


PodCheck = Callable[[dict, dict], Optional[Violation]]  # (metadata, spec) -> violation


class Check(NamedTuple):
    id: str
    level: str
    # (minimum minor version, check), oldest first
    versions: tuple[tuple[int, PodCheck], ...]
    overrides: tuple[str, ...] = ()

    def at(self, minor: int) -> Optional[PodCheck]:
        chosen = None
        for minimum, check in self.versions:
            if minimum <= minor:
                chosen = check
        return chosen


# -- helpers shared by the checks -------------------------------------------------------------

def _join_quote(items: list[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _containers_phrase(names: list[str]) -> str:
    return f"{_plural('container', 'containers', len(names))} {_join_quote(names)}"


def _containers(spec: dict) -> Iterator[dict]:
    """Every container, init container and ephemeral container (upstream's visitContainers)."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or ():
            if isinstance(container, dict):
                yield container


def _security_context(obj: dict) -> dict:
    context = obj.get("securityContext")
    return context if isinstance(context, dict) else {}


def _pod_context(spec: dict) -> dict:
    return _security_context(spec)


def _is_windows(spec: dict) -> bool:
    return ((spec.get("os") or {}).get("name") or "") == "windows"


def _user_namespaced(spec: dict) -> bool:
    return spec.get("hostUsers") is False


def _setters(pod_bad: bool, containers: list[str]) -> str:
    """``pod``, ``container "a"`` or ``pod and containers "a", "b"``."""
    parts = ["pod"] if pod_bad else []
    if containers:
        parts.append(_containers_phrase(containers))
    return " and ".join(parts)


def _not_windows(check: PodCheck) -> PodCheck:
    """From policy v1.25 on, pods that declare ``spec.os.name: windows`` are exempt."""
    def checked(metadata: dict, spec: dict) -> Optional[Violation]:
        return None if _is_windows(spec) else check(metadata, spec)
    return checked


# -- baseline -------------------------------------------------------------------------------

def _apparmor_annotations(metadata: dict) -> list[str]:
    bad = []
    for key, value in ((metadata.get("annotations") or {}).items()):
        if key.startswith(APPARMOR_ANNOTATION_PREFIX) and value and value != "runtime/default" \
                and not str(value).startswith("localhost/"):
            bad.append(f'{key}="{value}"')
    return bad


def _apparmor_violation(bad: list[str]) -> Optional[Violation]:
    if not bad:
        return None
    bad.sort()
    return Violation(_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad)), ", ".join(bad))


def apparmor_1_0(metadata: dict, spec: dict) -> Optional[Violation]:
    return _apparmor_violation(_apparmor_annotations(metadata))


def apparmor_1_30(metadata: dict, spec: dict) -> Optional[Violation]:
    """The annotations, and the ``appArmorProfile`` fields (GA in 1.30): Unconfined is forbidden."""
    bad = _apparmor_annotations(metadata)
    if (_pod_context(spec).get("appArmorProfile") or {}).get("type") == "Unconfined":
        bad.append('pod securityContext.appArmorProfile.type="Unconfined"')
    for container in _containers(spec):
        if (_security_context(container).get("appArmorProfile") or {}).get("type") == "Unconfined":
            bad.append(f'container "{container.get("name", "")}" securityContext.appArmorProfile.type="Unconfined"')
    return _apparmor_violation(bad)


BASELINE_CAPABILITIES = frozenset((
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"))


def capabilities_baseline(metadata: dict, spec: dict) -> Optional[Violation]:
    bad_containers, bad_caps = [], set()
    for container in _containers(spec):
        added = [str(c) for c in ((_security_context(container).get("capabilities") or {}).get("add") or ())
                 if c not in BASELINE_CAPABILITIES]
        if added:
            bad_containers.append(container.get("name", ""))
            bad_caps.update(added)
    if not bad_containers:
        return None
    return Violation("non-default capabilities", f"{_containers_phrase(bad_containers)} must not include "
                                                 f"{_join_quote(sorted(bad_caps))} in securityContext.capabilities.add")


def host_namespaces(metadata: dict, spec: dict) -> Optional[Violation]:
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return Violation("host namespaces", ", ".join(used)) if used else None


def host_path_volumes(metadata: dict, spec: dict) -> Optional[Violation]:
    names = [v.get("name", "") for v in spec.get("volumes") or () if isinstance(v, dict) and v.get("hostPath")
             is not None]
    if not names:
        return None
    return Violation("hostPath volumes", f"{_plural('volume', 'volumes', len(names))} {_join_quote(names)}")


def host_ports(metadata: dict, spec: dict) -> Optional[Violation]:
    bad_containers: list[str] = []
    ports: set[str] = set()
    for container in _containers(spec):
        used = [p.get("hostPort") for p in container.get("ports") or () if isinstance(p, dict) and p.get("hostPort")]
        if used:
            bad_containers.append(container.get("name", ""))
            ports.update(str(p) for p in used)
    if not bad_containers:
        return None
    many = len(bad_containers)
    return Violation("hostPort", f"{_containers_phrase(bad_containers)} {_plural('uses', 'use', many)} "
                                 f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}")


def privileged(metadata: dict, spec: dict) -> Optional[Violation]:
    bad = [c.get("name", "") for c in _containers(spec) if _security_context(c).get("privileged") is True]
    return Violation("privileged", f"{_containers_phrase(bad)} must not set securityContext.privileged=true") \
        if bad else None


def proc_mount_1_0(metadata: dict, spec: dict) -> Optional[Violation]:
    bad_containers, values = [], set()
    for container in _containers(spec):
        mount = _security_context(container).get("procMount")
        if mount not in (None, "", "Default"):
            bad_containers.append(container.get("name", ""))
            values.add(str(mount))
    if not bad_containers:
        return None
    return Violation("procMount", f"{_containers_phrase(bad_containers)} must not set securityContext.procMount "
                                  f"to {_join_quote(sorted(values))}")


def proc_mount_1_30(metadata: dict, spec: dict) -> Optional[Violation]:
    """Pods in a user namespace may unmask /proc (their root is not the node's)."""
    return None if _user_namespaced(spec) else proc_mount_1_0(metadata, spec)


SELINUX_TYPES = frozenset(("", "container_t", "container_init_t", "container_kvm_t"))


def selinux_options(metadata: dict, spec: dict) -> Optional[Violation]:
    bad_types: set[str] = set()
    set_user = set_role = False

    def valid(options: object) -> bool:
        nonlocal set_user, set_role
        if not isinstance(options, dict):
            return True
        ok = True
        if (options.get("type") or "") not in SELINUX_TYPES:
            ok = False
            bad_types.add(str(options.get("type")))
        if options.get("user"):
            ok, set_user = False, True
        if options.get("role"):
            ok, set_role = False, True
        return ok

    pod_bad = not valid(_pod_context(spec).get("seLinuxOptions"))
    bad_containers = [c.get("name", "") for c in _containers(spec)
                      if not valid(_security_context(c).get("seLinuxOptions"))]
    if not pod_bad and not bad_containers:
        return None
    data = []
    if bad_types:
        data.append(f"{_plural('type', 'types', len(bad_types))} {_join_quote(sorted(bad_types))}")
    if set_user:
        data.append("user may not be set")
    if set_role:
        data.append("role may not be set")
    return Violation("seLinuxOptions", f"{_setters(pod_bad, bad_containers)} set forbidden "
                                       f"securityContext.seLinuxOptions: {'; '.join(data)}")


_GOOD_SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


def seccomp_baseline_1_0(metadata: dict, spec: dict) -> Optional[Violation]:
    """Before 1.19 seccomp was set by annotations."""
    annotations = metadata.get("annotations") or {}
    keys = [SECCOMP_POD_ANNOTATION] + [SECCOMP_CONTAINER_ANNOTATION_PREFIX + c.get("name", "")
                                       for c in _containers(spec)]
    bad = sorted({f'{key}="{annotations[key]}"' for key in keys if key in annotations
                  and not (annotations[key] in ("runtime/default", "docker/default")
                           or str(annotations[key]).startswith("localhost/"))})
    if not bad:
        return None
    return Violation("seccompProfile", f"forbidden {_plural('annotation', 'annotations', len(bad))} {', '.join(bad)}")


def _seccomp_type(context: dict) -> Optional[str]:
    profile = context.get("seccompProfile")
    return str(profile.get("type") or "") if isinstance(profile, dict) else None


def seccomp_baseline_1_19(metadata: dict, spec: dict) -> Optional[Violation]:
    values: set[str] = set()
    pod_type = _seccomp_type(_pod_context(spec))
    pod_bad = pod_type is not None and pod_type == "Unconfined"
    if pod_bad:
        values.add(pod_type or "")
    bad_containers = []
    for container in _containers(spec):
        kind = _seccomp_type(_security_context(container))
        if kind == "Unconfined":
            bad_containers.append(container.get("name", ""))
            values.add(kind)
    if not pod_bad and not bad_containers:
        return None
    return Violation("seccompProfile", f"{_setters(pod_bad, bad_containers)} must not set "
                                       f"securityContext.seccompProfile.type to {_join_quote(sorted(values))}")


ALLOWED_SYSCTLS = (
    (0, ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
         "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start")),
    (27, ("net.ipv4.ip_local_reserved_ports",)),
    (29, ("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
          "net.ipv4.tcp_keepalive_probes")),
    (32, ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")),
)


def _sysctls_check(minor: int) -> PodCheck:
    allowed = frozenset(name for since, names in ALLOWED_SYSCTLS if since <= minor for name in names)

    def check(metadata: dict, spec: dict) -> Optional[Violation]:
        bad = [str(s.get("name")) for s in _pod_context(spec).get("sysctls") or ()
               if isinstance(s, dict) and s.get("name") not in allowed]
        return Violation("forbidden sysctls", ", ".join(bad)) if bad else None
    return check


def windows_host_process(metadata: dict, spec: dict) -> Optional[Violation]:
    def host_process(context: dict) -> bool:
        return (context.get("windowsOptions") or {}).get("hostProcess") is True

    pod_bad = host_process(_pod_context(spec))
    bad_containers = [c.get("name", "") for c in _containers(spec) if host_process(_security_context(c))]
    if not pod_bad and not bad_containers:
        return None
    return Violation("hostProcess", f"{_setters(pod_bad, bad_containers)} must not set "
                                    f"securityContext.windowsOptions.hostProcess=true")


# -- restricted -----------------------------------------------------------------------------

def allow_privilege_escalation(metadata: dict, spec: dict) -> Optional[Violation]:
    bad = [c.get("name", "") for c in _containers(spec)
           if _security_context(c).get("allowPrivilegeEscalation") is not False]
    if not bad:
        return None
    return Violation("allowPrivilegeEscalation != false",
                     f"{_containers_phrase(bad)} must set securityContext.allowPrivilegeEscalation=false")


def capabilities_restricted(metadata: dict, spec: dict) -> Optional[Violation]:
    missing_drop_all, adding, caps = [], [], set()
    for container in _containers(spec):
        capabilities = _security_context(container).get("capabilities")
        if not isinstance(capabilities, dict):
            missing_drop_all.append(container.get("name", ""))
            continue
        if "ALL" not in (capabilities.get("drop") or ()):
            missing_drop_all.append(container.get("name", ""))
        extra = [str(c) for c in capabilities.get("add") or () if c != "NET_BIND_SERVICE"]
        if extra:
            adding.append(container.get("name", ""))
            caps.update(extra)
    details = []
    if missing_drop_all:
        details.append(f'{_containers_phrase(missing_drop_all)} must set securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_containers_phrase(adding)} must not include {_join_quote(sorted(caps))} in "
                       f"securityContext.capabilities.add")
    return Violation("unrestricted capabilities", "; ".join(details)) if details else None


# volume sources a restricted pod may use; any other is named by its field (or "unknown")
RESTRICTED_ALLOWED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                              "projected", "secret")
RESTRICTED_NAMED_VOLUMES = (
    "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi", "glusterfs", "rbd", "flexVolume",
    "cinder", "cephfs", "flocker", "fc", "azureFile", "vsphereVolume", "quobyte", "azureDisk",
    "photonPersistentDisk", "portworxVolume", "scaleIO", "storageos", "hostPath", "image")


def restricted_volumes(metadata: dict, spec: dict) -> Optional[Violation]:
    bad_volumes, bad_types = [], set()
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, dict) or any(volume.get(k) is not None for k in RESTRICTED_ALLOWED_VOLUMES):
            continue
        bad_volumes.append(volume.get("name", ""))
        bad_types.add(next((k for k in RESTRICTED_NAMED_VOLUMES if volume.get(k) is not None), "unknown"))
    if not bad_volumes:
        return None
    many = len(bad_volumes)
    return Violation("restricted volume types",
                     f"{_plural('volume', 'volumes', many)} {_join_quote(bad_volumes)} {_plural('uses', 'use', many)} "
                     f"{_plural('restricted volume type', 'restricted volume types', len(bad_types))} "
                     f"{_join_quote(sorted(bad_types))}")


def run_as_non_root(metadata: dict, spec: dict) -> Optional[Violation]:
    pod_value = _pod_context(spec).get("runAsNonRoot")
    explicit, implicit = [], []
    for container in _containers(spec):
        value = _security_context(container).get("runAsNonRoot")
        if value is False:
            explicit.append(container.get("name", ""))
        elif value is None and pod_value is not True:
            implicit.append(container.get("name", ""))
    if pod_value is False or explicit:
        return Violation("runAsNonRoot != true",
                         f"{_setters(pod_value is False, explicit)} must not set securityContext.runAsNonRoot=false")
    if implicit:
        return Violation("runAsNonRoot != true",
                         f"pod or {_containers_phrase(implicit)} must set securityContext.runAsNonRoot=true")
    return None


def run_as_user(metadata: dict, spec: dict) -> Optional[Violation]:
    pod_bad = _pod_context(spec).get("runAsUser") == 0
    bad = [c.get("name", "") for c in _containers(spec) if _security_context(c).get("runAsUser") == 0]
    if not pod_bad and not bad:
        return None
    return Violation("runAsUser=0", f"{_setters(pod_bad, bad)} must not set runAsUser=0")


def seccomp_restricted(metadata: dict, spec: dict) -> Optional[Violation]:
    values: set[str] = set()
    pod_type = _seccomp_type(_pod_context(spec))
    pod_bad = pod_type is not None and pod_type not in _GOOD_SECCOMP_TYPES
    if pod_bad:
        values.add(pod_type or "")
    pod_set = pod_type in _GOOD_SECCOMP_TYPES
    explicit, implicit = [], []
    for container in _containers(spec):
        kind = _seccomp_type(_security_context(container))
        if kind is None:
            if not pod_set:
                implicit.append(container.get("name", ""))
        elif kind not in _GOOD_SECCOMP_TYPES:
            explicit.append(container.get("name", ""))
            values.add(kind)
    if pod_bad or explicit:
        return Violation("seccompProfile", f"{_setters(pod_bad, explicit)} must not set "
                                           f"securityContext.seccompProfile.type to {_join_quote(sorted(values))}")
    if implicit:
        return Violation("seccompProfile", f'pod or {_containers_phrase(implicit)} must set '
                                           f'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


CHECKS: tuple[Check, ...] = (
    Check("appArmorProfile", BASELINE, ((0, apparmor_1_0), (30, apparmor_1_30))),
    Check("capabilities_baseline", BASELINE, ((0, capabilities_baseline),)),
    Check("hostNamespaces", BASELINE, ((0, host_namespaces),)),
    Check("hostPathVolumes", BASELINE, ((0, host_path_volumes),)),
    Check("hostPorts", BASELINE, ((0, host_ports),)),
    Check("privileged", BASELINE, ((0, privileged),)),
    Check("procMount", BASELINE, ((0, proc_mount_1_0), (30, proc_mount_1_30))),
    Check("seLinuxOptions", BASELINE, ((0, selinux_options),)),
    Check("seccompProfile_baseline", BASELINE, ((0, seccomp_baseline_1_0), (19, seccomp_baseline_1_19))),
    Check("sysctls", BASELINE, tuple((since, _sysctls_check(since)) for since, _ in ALLOWED_SYSCTLS)),
    Check("windowsHostProcess", BASELINE, ((0, windows_host_process),)),
    Check("allowPrivilegeEscalation", RESTRICTED,
          ((8, allow_privilege_escalation), (25, _not_windows(allow_privilege_escalation)))),
    Check("capabilities_restricted", RESTRICTED,
          ((22, capabilities_restricted), (25, _not_windows(capabilities_restricted))),
          overrides=("capabilities_baseline",)),
    Check("restrictedVolumes", RESTRICTED, ((0, restricted_volumes),), overrides=("hostPathVolumes",)),
    Check("runAsNonRoot", RESTRICTED, ((0, run_as_non_root),)),
    Check("runAsUser", RESTRICTED, ((23, run_as_user),)),
    Check("seccompProfile_restricted", RESTRICTED,
          ((19, seccomp_restricted), (25, _not_windows(seccomp_restricted))),
          overrides=("seccompProfile_baseline",)),
)


def evaluate(level: str, minor: Optional[int], metadata: dict, spec: dict) -> list[Violation]:
    """The violations of ``spec`` against ``level`` at policy version ``v1.<minor>`` (None: latest)."""
    if level == PRIVILEGED:
        return []
    version = LATEST_MINOR if minor is None or minor > LATEST_MINOR else minor
    overridden: set[str] = set()
    if level == RESTRICTED:
        for check in CHECKS:
            if check.level == RESTRICTED and check.at(version) is not None:
                overridden.update(check.overrides)
    violations = []
    for wanted in (BASELINE, RESTRICTED) if level == RESTRICTED else (BASELINE,):
        for check in sorted((c for c in CHECKS if c.level == wanted), key=lambda c: c.id):
            pod_check = check.at(version)
            if pod_check is None or check.id in overridden:
                continue
            found = pod_check(metadata, spec)
            if found is not None:
                violations.append(found)
    return violations


def describe(violations: list[Violation]) -> str:
    """``reason (detail), reason (detail)``: the text after ``violates PodSecurity "...": ``."""
    return ", ".join(f"{v.reason} ({v.detail})" if v.detail else v.reason for v in violations)
