"""Upstream's APIService priorities of the built-in group versions (kube-apiserver's table).

``groupPriorityMinimum`` orders groups in discovery (highest first), and
``versionPriority`` orders the versions of a group; kubectl shows resources
in that order and picks a group's preferred version from it.  A built-in
group version missing here gets no APIService (upstream skips it too, so a
CRD of the same group version can never be stuck behind one).
"""
from __future__ import annotations

from typing import Optional

# (group, version) -> (groupPriorityMinimum, versionPriority); kube-apiserver's
# DefaultGenericAPIServicePriorities merged with its own additions
BUILTIN_PRIORITIES: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("apps", "v1"): (17800, 15),
    ("events.k8s.io", "v1"): (17750, 15),
    ("events.k8s.io", "v1beta1"): (17750, 5),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authentication.k8s.io", "v1beta1"): (17700, 9),
    ("authentication.k8s.io", "v1alpha1"): (17700, 1),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("autoscaling", "v2beta1"): (17500, 9),
    ("autoscaling", "v2beta2"): (17500, 1),
    ("batch", "v1"): (17400, 15),
    ("batch", "v1beta1"): (17400, 9),
    ("batch", "v2alpha1"): (17400, 9),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("certificates.k8s.io", "v1alpha1"): (17300, 1),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("networking.k8s.io", "v1beta1"): (17200, 9),
    ("networking.k8s.io", "v1alpha1"): (17200, 1),
    ("policy", "v1"): (17100, 15),
    ("policy", "v1beta1"): (17100, 9),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("storage.k8s.io", "v1beta1"): (16800, 9),
    ("storage.k8s.io", "v1alpha1"): (16800, 1),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1beta1"): (16700, 12),
    ("admissionregistration.k8s.io", "v1alpha1"): (16700, 9),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("coordination.k8s.io", "v1alpha2"): (16500, 12),
    ("node.k8s.io", "v1"): (16300, 15),
    ("node.k8s.io", "v1alpha1"): (16300, 1),
    ("node.k8s.io", "v1beta1"): (16300, 9),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("discovery.k8s.io", "v1beta1"): (16200, 12),
    ("resource.k8s.io", "v1beta1"): (16200, 9),
    ("resource.k8s.io", "v1alpha3"): (16200, 1),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("flowcontrol.apiserver.k8s.io", "v1beta3"): (16100, 18),
    ("flowcontrol.apiserver.k8s.io", "v1beta2"): (16100, 15),
    ("flowcontrol.apiserver.k8s.io", "v1beta1"): (16100, 12),
    ("flowcontrol.apiserver.k8s.io", "v1alpha1"): (16100, 9),
    ("internal.apiserver.k8s.io", "v1alpha1"): (16000, 9),
    ("storagemigration.k8s.io", "v1alpha1"): (15800, 9),
}

# what the CRD registration gives every CRD group version (upstream: CRDs rank low,
# their versions ordered among themselves by Kubernetes version order)
CRD_GROUP_PRIORITY_MINIMUM = 1000
CRD_VERSION_PRIORITY = 100
# the aggregator's own group is listed first in /apis (upstream's APIRegistrationGroupPriority)
APIREGISTRATION_GROUP_PRIORITY = 20001


def builtin_priority(group: str, version: str) -> Optional[tuple[int, int]]:
    return BUILTIN_PRIORITIES.get((group, version))
