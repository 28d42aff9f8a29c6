"""kube-controller-manager's controller names, and which of them this server runs.

``controllers.names`` is read as kube-controller-manager reads ``--controllers``:
``*`` turns on every controller that is on by default, ``foo`` turns ``foo`` on,
``-foo`` turns it off; the first entry naming a controller wins. Names are
upstream's (v1.32, ``cmd/kube-controller-manager/names``), and their old
aliases are accepted, so the value a cluster passes to kube-controller-manager
can be given here too. ``controllers.enabled: false`` runs none of them: a real
kube-controller-manager does their work.

Only some of these controllers exist in process (``IN_PROCESS``); naming
another is accepted and does nothing, as the rest of kube-controller-manager
is not part of kapiserver.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence

NAMESPACE = "namespace-controller"
SERVICE_ACCOUNT = "serviceaccount-controller"
SERVICE_ACCOUNT_TOKEN = "serviceaccount-token-controller"
ROOT_CA_PUBLISHER = "root-ca-certificate-publisher-controller"
GARBAGE_COLLECTOR = "garbage-collector-controller"
CSR_SIGNING = "certificatesigningrequest-signing-controller"
CSR_APPROVING = "certificatesigningrequest-approving-controller"
BOOTSTRAP_SIGNER = "bootstrap-signer-controller"
TOKEN_CLEANER = "token-cleaner-controller"
CLUSTERROLE_AGGREGATION = "clusterrole-aggregation-controller"
VALIDATING_ADMISSION_POLICY_STATUS = "validatingadmissionpolicy-status-controller"
RESOURCE_QUOTA = "resourcequota-controller"
PVC_PROTECTION = "persistentvolumeclaim-protection-controller"
PV_PROTECTION = "persistentvolume-protection-controller"

# upstream's canonical name -> its aliases
KNOWN: dict[str, tuple[str, ...]] = {
    SERVICE_ACCOUNT_TOKEN: ("serviceaccount-token",),
    "endpoints-controller": ("endpoint",),
    "endpointslice-controller": ("endpointslice",),
    "endpointslice-mirroring-controller": ("endpointslicemirroring",),
    "replicationcontroller-controller": ("replicationcontroller",),
    "pod-garbage-collector-controller": ("podgc",),
    RESOURCE_QUOTA: ("resourcequota",),
    NAMESPACE: ("namespace",),
    SERVICE_ACCOUNT: ("serviceaccount",),
    GARBAGE_COLLECTOR: ("garbagecollector",),
    "daemonset-controller": ("daemonset",),
    "job-controller": ("job",),
    "deployment-controller": ("deployment",),
    "replicaset-controller": ("replicaset",),
    "horizontal-pod-autoscaler-controller": ("horizontalpodautoscaling",),
    "disruption-controller": ("disruption",),
    "statefulset-controller": ("statefulset",),
    "cronjob-controller": ("cronjob",),
    CSR_SIGNING: ("csrsigning",),
    CSR_APPROVING: ("csrapproving",),
    "certificatesigningrequest-cleaner-controller": ("csrcleaner",),
    "ttl-controller": ("ttl",),
    BOOTSTRAP_SIGNER: ("bootstrapsigner",),
    TOKEN_CLEANER: ("tokencleaner",),
    "node-ipam-controller": ("nodeipam",),
    "node-lifecycle-controller": ("nodelifecycle",),
    "taint-eviction-controller": (),
    "persistentvolume-binder-controller": ("persistentvolume-binder",),
    "persistentvolume-attach-detach-controller": ("attachdetach",),
    "persistentvolume-expander-controller": ("persistentvolume-expander",),
    CLUSTERROLE_AGGREGATION: ("clusterrole-aggregation",),
    PVC_PROTECTION: ("pvc-protection",),
    PV_PROTECTION: ("pv-protection",),
    "ttl-after-finished-controller": ("ttl-after-finished",),
    ROOT_CA_PUBLISHER: ("root-ca-cert-publisher",),
    "service-ca-certificate-publisher-controller": ("service-ca-cert-publisher",),
    "kube-apiserver-serving-clustertrustbundle-publisher-controller": (),
    "ephemeral-volume-controller": ("ephemeral-volume",),
    "storageversion-garbage-collector-controller": ("storage-version-gc",),
    "resourceclaim-controller": ("resource-claim-controller",),
    "legacy-serviceaccount-token-cleaner-controller": ("legacy-service-account-token-cleaner",),
    VALIDATING_ADMISSION_POLICY_STATUS: (),
    "volumeattributesclass-protection-controller": (),
    "service-cidr-controller": (),
    "storage-version-migrator-controller": ("svm",),
    "selinux-warning-controller": (),
    # the cloud provider's, which kube-controller-manager still knows by name
    "service-lb-controller": ("service",),
    "node-route-controller": ("route",),
    "cloud-node-lifecycle-controller": ("cloud-node-lifecycle",),
}
# the controllers kapiserver has a copy of (server_controllers.py); a kube-controller-manager running beside
# them is given the others (--controllers=*,-<these>: the testing plugin's kube_controller_manager fixture)
IN_PROCESS = frozenset({NAMESPACE, SERVICE_ACCOUNT, SERVICE_ACCOUNT_TOKEN, ROOT_CA_PUBLISHER, GARBAGE_COLLECTOR,
                        CSR_SIGNING, CSR_APPROVING, BOOTSTRAP_SIGNER, TOKEN_CLEANER, CLUSTERROLE_AGGREGATION,
                        VALIDATING_ADMISSION_POLICY_STATUS, RESOURCE_QUOTA, PVC_PROTECTION, PV_PROTECTION})
# off unless named (upstream's isDisabledByDefault)
DISABLED_BY_DEFAULT = frozenset({BOOTSTRAP_SIGNER, TOKEN_CLEANER, "selinux-warning-controller"})
_CANONICAL = {alias: name for name, aliases in KNOWN.items() for alias in (name, *aliases)}


def canonical(name: str) -> Optional[str]:
    """The upstream name of ``name`` or of its alias; None if kube-controller-manager does not know it."""
    return _CANONICAL.get(name)


def check_selection(entries: Sequence[str]) -> Optional[str]:
    """Why ``entries`` is not a valid ``--controllers`` value, or None (upstream's validation)."""
    for entry in entries:
        if entry == "*":
            continue
        name = entry[1:] if entry.startswith("-") else entry
        if canonical(name) is None:
            return f"{entry!r} is not in the list of known controllers"
    return None


class ControllerSelection:
    """Which of kube-controller-manager's controllers run (upstream's IsControllerEnabled)."""

    def __init__(self, enabled: bool, entries: Iterable[str]) -> None:
        self.enabled = enabled
        self.entries: list[tuple[str, str]] = []  # (sign, canonical name or "*")
        for entry in entries:
            if entry == "*":
                self.entries.append(("", "*"))
                continue
            negated = entry.startswith("-")
            name = canonical(entry[1:] if negated else entry)
            if name is not None:
                self.entries.append(("-" if negated else "", name))

    def __contains__(self, name: str) -> bool:
        if not self.enabled:
            return False
        star = False
        for sign, entry in self.entries:
            if entry == name:
                return sign == ""
            star = star or entry == "*"
        return star and name not in DISABLED_BY_DEFAULT

    @classmethod
    def everything(cls) -> "ControllerSelection":
        return cls(True, ["*"])
