"""The one Kubernetes version kapiserver emulates.

Everything that names a Kubernetes version derives from here: ``/version``,
OpenAPI ``info.version``, the built-in schemas (kubernetes-validate's
definitions of this minor version) and the protobuf field tables
(generated from k8s.io/api ``v0.<MINOR>.<PATCH>``; the generated module
records its tag and a test checks that it matches).  1.32 is the release the
project's reference kube-apiserver (../shared/anchor) runs, and one that
every bundled kubectl (1.27-1.33) talks to without skew warnings.
"""
from __future__ import annotations

MAJOR = 1
MINOR = 32
PATCH = 13

# upstream's gitVersion form, with kapiserver as build metadata (like k3s's "+k3s1")
GIT_VERSION = f"v{MAJOR}.{MINOR}.{PATCH}+kapiserver"
# the k8s.io/api tag the protobuf tables are generated from
API_MODULE_TAG = f"v0.{MINOR}.{PATCH}"
# kubernetes-validate's folder of upstream definitions for this minor version
SCHEMA_DIRECTORY = f"kubernetes-json-schema/v{MAJOR}.{MINOR}.0-local"
# OpenAPI info.version: upstream uses its gitVersion without pre-release or build metadata
OPENAPI_INFO_VERSION = f"v{MAJOR}.{MINOR}.{PATCH}"
