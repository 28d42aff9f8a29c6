"""admissionregistration.k8s.io/v1: webhook configurations, ValidatingAdmissionPolicies and
their bindings.  MutatingAdmissionPolicy (v1alpha1 in 1.32, feature gate off) is not served."""
