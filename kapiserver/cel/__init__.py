"""CEL for every part that evaluates it: the Kubernetes function library, the cost
estimate and the compiler of admission-style expressions.

Upstream shares ``k8s.io/apiserver/pkg/cel`` (library, cost) and
``pkg/admission/plugin/cel`` (the compiler) between CRD validation rules
(``apiextensions/cel/rules.py``), ValidatingAdmissionPolicies and webhook match
conditions (``admission/``), their validation (``apis/admissionregistration/``)
and the claim mappings of structured authentication (``auth/oidc.py``).  It
depends on machinery alone; the engine and the library load on first use.
"""
