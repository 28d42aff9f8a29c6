"""The Pod Security levels and the annotations that make a pod update significant: what the
plugin reads before it checks a pod.  The checks themselves (``checks.py``) load with the first
pod or pod template the plugin checks."""
from __future__ import annotations

BASELINE = "baseline"
RESTRICTED = "restricted"
PRIVILEGED = "privileged"

APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
